/**
 * Each rule of BarrierSenders on its own: hash ranges covering a source stream (against an oracle
 * that counts covered keys on a small space), split and merged source shards, the counted rule of
 * inner stages (the barrier's topology, else the plan's parallelism), a stage fed by both kinds, and
 * what `learn` lists and remembers.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { CountingTelemetry } from '../adapters/telemetry.js';
import { createJobStreams, MemoryKinesis, MemoryShardDirectory } from '../adapters/memory/memory-kinesis.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import { BarrierSenders, coverHashSpace } from './barrier-senders.js';
import type { ShardDirectory, ShardInfo } from './ports.js';

const LAST = (1n << 128n) - 1n;

describe('coverHashSpace against counting the keys it leaves out', () => {
  it('is true exactly when every key of the space lies in some range (ranges cut at a few points of it)', () => {
    // ranges between cut points spread over the space, in any order, overlapping or not; the
    // oracle walks the elementary intervals between cuts and asks whether each lies in a range
    const cuts = [0n, 1n, LAST / 3n, LAST / 2n, LAST / 2n + 1n, LAST - 1n, LAST];
    const rangeArb = fc.tuple(fc.nat(cuts.length - 1), fc.nat(cuts.length - 1)).map(([a, b]) => [cuts[Math.min(a, b)]!, cuts[Math.max(a, b)]!] as const);
    fc.assert(
      fc.property(fc.array(rangeArb, { maxLength: 6 }), (ranges) => {
        const points = [...new Set([...cuts, ...ranges.flatMap(([s, e]) => [s, e, e + 1n])])].filter((p) => p <= LAST).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        // every key from one point up to the next behaves alike: testing each point and the key before the next decides all
        const keys = points.flatMap((p, i) => (i + 1 < points.length ? [p, points[i + 1]! - 1n] : [p]));
        const covered = keys.every((k) => ranges.some(([s, e]) => s <= k && k <= e));
        expect(coverHashSpace(ranges)).toBe(covered);
      }),
      { numRuns: 2000 },
    );
  });

  it('ranges that only touch still cover; the end of a range inside an earlier one does not shrink what is covered', () => {
    expect(coverHashSpace([[0n, 9n], [10n, LAST]])).toBe(true);
    expect(coverHashSpace([[0n, 9n], [11n, LAST]])).toBe(false);
    expect(coverHashSpace([[0n, 100n], [5n, 6n], [101n, LAST]])).toBe(true);
    expect(coverHashSpace([[0n, 100n], [5n, 6n], [7n, LAST]])).toBe(true);
    expect(coverHashSpace([[7n, LAST], [0n, 6n], [0n, LAST - 5n]])).toBe(true);
    expect(coverHashSpace([[LAST, LAST], [0n, LAST - 1n]])).toBe(true);
  });
});

interface Rec {
  readonly k: string;
}

/**
 * s0 reads source "a" (2 shards); s1 reads source "b" and keys into s2 (parallelism 3); the join
 * stage reads s0 directly and s2: upstreams of both kinds.
 */
function bothKinds() {
  const j = job('senders-rules', { maxParallelism: 8 });
  const a = j.source<Rec>({ name: 'a', shards: 2 }).keyBy((r) => r.k, { parallelism: 2 });
  const b = j
    .source<Rec>({ name: 'b', shards: 1 })
    .keyBy((r) => r.k, { parallelism: 3 })
    .process<Rec>({ processElement: (r, _ctx, out) => out.collect(r) }, { name: 'mid' })
    .keyBy((r) => r.k, { parallelism: 2 });
  a.connect(b)
    .process<Rec>({ processElement1: (r, _ctx, out) => out.collect(r), processElement2: (r, _ctx, out) => out.collect(r) }, { name: 'join' })
    .sinkTo(collectSink<Rec>('out'));
  return planJob(j);
}

/** a shard directory over the in-memory Kinesis that counts the listings asked of it */
class CountedShards implements ShardDirectory {
  listings: string[] = [];
  constructor(private readonly inner: ShardDirectory) {}
  openShards(stream: string): Promise<readonly ShardInfo[]> {
    return this.inner.openShards(stream);
  }
  allShards(stream: string): Promise<readonly ShardInfo[]> {
    this.listings.push(stream);
    return this.inner.allShards(stream);
  }
}

function setUp() {
  const plan = bothKinds();
  const names = resourceNames(plan);
  const kinesis = new MemoryKinesis();
  createJobStreams(kinesis, plan, names);
  const shards = new CountedShards(new MemoryShardDirectory(kinesis));
  const logs: string[] = [];
  const telemetry = new CountingTelemetry((line) => logs.push(line));
  const join = plan.stages.find((s) => s.input.kind === 'exchange' && s.input.fromStages.length === 2)!;
  const [srcA, mid] = join.input.kind === 'exchange' ? (join.input.fromStages as [string, string]) : ['', ''];
  const srcB = plan.stages.find((s) => s.input.kind === 'source' && s.id !== srcA)!.id;
  const streamA = names.streamOf(plan.stages.find((s) => s.id === srcA)!);
  const producers = (stage: string, stream: string) => kinesis.listShards(stream).map((s) => `${stage}:${s.shardId}`);
  const senders = () => new BarrierSenders(plan, join, names, shards, telemetry);
  return { plan, names, kinesis, shards, logs, join, srcA, srcB, mid, streamA, producers, senders };
}

describe('BarrierSenders, rule by rule', () => {
  it('the plan at hand: the join stage reads a source stage and an inner stage of parallelism 3', () => {
    const { plan, join, srcA, mid } = setUp();
    expect(plan.stages.find((s) => s.id === srcA)!.input.kind).toBe('source');
    expect(plan.stages.find((s) => s.id === mid)!.input.kind).toBe('exchange');
    expect(plan.stages.find((s) => s.id === mid)!.parallelism).toBe(3);
    expect(join.input.kind).toBe('exchange');
  });

  it('a stage reading a source aligns no barriers: it has none', () => {
    const { plan, names, shards } = setUp();
    const source = plan.stages.find((s) => s.input.kind === 'source')!;
    expect(() => new BarrierSenders(plan, source, names, shards, new CountingTelemetry())).toThrow(`${source.id} reads a source`);
  });

  it('unknown: only a shard of a source upstream not learned yet; learn lists that source stream once for all its shards', async () => {
    const { shards, srcA, srcB, mid, streamA, producers, senders } = setUp();
    const s = senders();
    const [a0, a1] = producers(srcA, streamA) as [string, string];
    expect(s.unknown(a0)).toBe(true);
    expect(s.unknown(`${mid}:0`)).toBe(false); // an inner instance is counted, never looked up
    expect(s.unknown(`${srcB}:shardId-000000000000`)).toBe(false); // a source that feeds this stage only through another
    expect(s.unknown(`${srcA}x:shardId-000000000000`)).toBe(false); // another stage whose id starts alike
    await s.learn(`${mid}:0`);
    expect(shards.listings).toEqual([]);
    await s.learn(a0);
    expect(shards.listings).toEqual([streamA]);
    expect(s.unknown(a0)).toBe(false);
    expect(s.unknown(a1)).toBe(false);
  });

  it('a barrier from a shard the stream no longer lists is remembered as covering nothing, with a warning', async () => {
    const { logs, srcA, mid, streamA, producers, senders, shards } = setUp();
    const s = senders();
    const gone = `${srcA}:shardId-000000000099`;
    await s.learn(gone);
    expect(s.unknown(gone)).toBe(false);
    expect(logs.filter((l) => l.includes('no longer lists'))).toHaveLength(1);
    expect(logs[0]).toContain(gone);
    // the shards it did list are known: no listing again for them
    await s.learn(producers(srcA, streamA)[0]!);
    expect(shards.listings).toEqual([streamA, streamA]);
    expect(logs).toHaveLength(1);
    // 'gone' adds no range: the listed shards alone decide
    const inner = [`${mid}:0`, `${mid}:1`, `${mid}:2`];
    expect(s.allSent([gone, producers(srcA, streamA)[0]!, ...inner], [])).toBe(false);
    expect(s.allSent([gone, ...producers(srcA, streamA), ...inner], [])).toBe(true);
  });

  it('complete only when both rules hold: the source shards cover the hash space and the inner instances are all counted', async () => {
    const { srcA, mid, streamA, producers, senders, plan } = setUp();
    const s = senders();
    const [a0, a1] = producers(srcA, streamA) as [string, string];
    await s.learn(a0);
    const inner = (n: number) => Array.from({ length: n }, (_, i) => `${mid}:${i}`);
    const midIndex = plan.stages.findIndex((st) => st.id === mid);
    const topology = plan.stages.map((st) => st.parallelism);
    expect(s.allSent([a0, a1, ...inner(3)], topology)).toBe(true);
    expect(s.allSent([a0, ...inner(3)], topology)).toBe(false); // half the hash space
    expect(s.allSent([a0, a1, ...inner(2)], topology)).toBe(false); // one instance short
    // the count is the barrier's topology, not the plan's: a rescaled stage of 2, or of 4
    const rescaled = (n: number) => topology.map((p, i) => (i === midIndex ? n : p));
    expect(s.allSent([a0, a1, ...inner(2)], rescaled(2))).toBe(true);
    expect(s.allSent([a0, a1, ...inner(3)], rescaled(4))).toBe(false);
    // no topology: the plan's parallelism
    expect(s.allSent([a0, a1, ...inner(2)], [])).toBe(false);
    expect(s.allSent([a0, a1, ...inner(3)], [])).toBe(true);
    // a topology that does not name the stage counts none from it
    expect(s.allSent([a0, a1], topology.slice(0, midIndex))).toBe(true);
    // producers of other stages count for nothing
    expect(s.allSent([a0, a1, 'other:0', 'other:1', 'other:2'], topology)).toBe(false);
    expect(s.allSent([a0, a1, `${mid}x:0`, `${mid}x:1`, `${mid}x:2`], topology)).toBe(false);
    // a source shard not learned adds nothing
    expect(senders().allSent([a0, a1, ...inner(3)], topology)).toBe(false);
  });

  it('split and merged source shards: the children of a split cover their parent, a merged child covers both parents', async () => {
    const { kinesis, srcA, mid, streamA, producers, senders } = setUp();
    const [p0, p1] = producers(srcA, streamA) as [string, string];
    kinesis.reshard(streamA, 4); // split: 4 children under 2 parents
    const [, , c0, c1, c2, c3] = producers(srcA, streamA) as [string, string, string, string, string, string];
    kinesis.reshard(streamA, 1); // merge: one child of the 4
    const m = producers(srcA, streamA)[6]!;
    const s = senders();
    await s.learn(c0);
    const inner = [`${mid}:0`, `${mid}:1`, `${mid}:2`];
    const ok = (ps: string[]) => s.allSent([...ps, ...inner], []);
    expect(ok([p0, p1])).toBe(true);
    expect(ok([c0, c1, c2, c3])).toBe(true);
    expect(ok([p0, c2, c3])).toBe(true);
    expect(ok([c0, c1, p1])).toBe(true);
    expect(ok([c0, c1, c2])).toBe(false); // the last quarter never sent it
    expect(ok([p0, c3])).toBe(false);
    expect(ok([m])).toBe(true);
    expect(ok([c0, m])).toBe(true);
    // more producers than the topology counts never stand in for a range that is missing
    expect(s.allSent([c0, c1, c0, c1, ...inner], [9, 9, 9, 9])).toBe(false);
  });
});
