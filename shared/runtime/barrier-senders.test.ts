/**
 * Whose barriers of a checkpoint an inner instance waits for (barrier-senders.ts): a source stage's
 * by the hash ranges of the shards that sent them, an inner stage's by count; and a source child
 * shard that never met a barrier sends it before the next one (StageInstance.snapshot).
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { CollectRegistry } from '../adapters/memory/collect-registry.js';
import { createJobStreams, createMemoryPorts } from '../adapters/memory/memory-ports.js';
import { encodeSourceControl } from '../codec/envelope.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import { BarrierSenders, coverHashSpace } from './barrier-senders.js';
import { StageRunner } from './stage-runner.js';

const LAST = (1n << 128n) - 1n;
const HALF = 1n << 127n;

describe('coverHashSpace', () => {
  it('is true only when the ranges, in any order and overlapping or not, leave no hash key out', () => {
    expect(coverHashSpace([[0n, LAST]])).toBe(true);
    expect(coverHashSpace([[HALF, LAST], [0n, HALF - 1n]])).toBe(true);
    // a parent and one of its children overlap; the other child's range is still needed
    expect(coverHashSpace([[0n, HALF - 1n], [0n, HALF / 2n - 1n]])).toBe(false);
    expect(coverHashSpace([[0n, HALF - 1n], [0n, HALF / 2n - 1n], [HALF, LAST]])).toBe(true);
    expect(coverHashSpace([[0n, HALF - 2n], [HALF, LAST]])).toBe(false); // one key missing
    expect(coverHashSpace([[1n, LAST]])).toBe(false);
    expect(coverHashSpace([[0n, LAST - 1n]])).toBe(false);
    expect(coverHashSpace([])).toBe(false);
  });
});

interface Rec {
  readonly k: string;
  readonly id: string;
}

/** source (1 shard) → keyBy → every record collected */
function passJob() {
  const j = job('senders', { maxParallelism: 8 });
  j.source<Rec>({ name: 'in', shards: 1 })
    .keyBy((r) => r.k, { parallelism: 1 })
    .process<Rec>({ processElement: (r, _ctx, out) => out.collect(r) }, { name: 'pass' })
    .sinkTo(collectSink<Rec>('out'));
  return j;
}

describe('BarrierSenders', () => {
  const j = passJob();
  const plan = planJob(j);
  const names = resourceNames(plan);

  it('a source stage: barriers complete once their shards cover the hash space; an inner stage: by the count its topology gives', async () => {
    const mem = createMemoryPorts({ seed: 1 });
    createJobStreams(mem.kinesis, plan, names);
    const src = names.streamOf(plan.stages[0]!);
    mem.kinesis.reshard(src, 2);
    const [parent, a, b] = mem.kinesis.listShards(src).map((s) => `${plan.stages[0]!.id}:${s.shardId}`) as [string, string, string];
    const senders = new BarrierSenders(plan, plan.stages[1]!, names, mem.ports.shards, mem.ports.telemetry);
    expect(senders.unknown(a)).toBe(true);
    expect(senders.unknown('elsewhere:x')).toBe(false);
    await senders.learn(a);
    expect(senders.unknown(b)).toBe(false);
    // a topology counting one source shard is met by one child: the hash range is not
    expect(senders.allSent([a], [1, 1])).toBe(false);
    expect(senders.allSent([a, b], [1, 1])).toBe(true);
    expect(senders.allSent([parent], [2, 1])).toBe(true);
    expect(senders.allSent([parent, a], [2, 1])).toBe(true);
  });
});

describe('a source shard split outside the job after barrier 2 was put for it, before the shard met it', () => {
  /**
   * Checkpoint 1 crosses the pipeline. Barrier 2 was put for the source's only shard P, which was split
   * before the put: it lands in child C1. Records reach both children; C2 never meets barrier 2, and
   * meets barrier 3. Then the inner instance sees P's records, C1's barrier 2, and last C2's records
   * and barriers.
   */
  async function run() {
    const j = passJob();
    const plan = planJob(j);
    const names = resourceNames(plan);
    const collect = new CollectRegistry();
    const mem = createMemoryPorts({ seed: 5, collect });
    createJobStreams(mem.kinesis, plan, names);
    const [s0, s1] = plan.stages as [(typeof plan.stages)[number], (typeof plan.stages)[number]];
    const src = names.streamOf(s0);
    const inner = names.streamOf(s1);
    const put = (r: Rec, hashKey: bigint) => mem.kinesis.putRecord(src, { data: new TextEncoder().encode(JSON.stringify(r)), partitionKey: r.id, explicitHashKey: hashKey.toString() });
    const barrier = (n: number, topology: number[], hashKey: bigint) => {
      mem.control.allocateCheckpoint(topology);
      mem.kinesis.putRecord(src, { data: encodeSourceControl({ kind: 'barrier', checkpointId: n, topology, savepoint: false, time: n * 1000 }), partitionKey: 'barrier', explicitHashKey: hashKey.toString() });
    };
    const read = new Map<string, string>();
    const runShard = async (runner: StageRunner, stream: string, shardId: string) => {
      const last = read.get(`${stream}/${shardId}`);
      const fresh = mem.kinesis.records(stream, shardId).filter((r) => last === undefined || BigInt(r.sequenceNumber) > BigInt(last));
      if (!fresh.length) return;
      await runner.run(shardId, fresh);
      read.set(`${stream}/${shardId}`, fresh[fresh.length - 1]!.sequenceNumber);
    };
    const source = new StageRunner(j, plan, s0, names, mem.ports);
    const keyed = new StageRunner(j, plan, s1, names, mem.ports);
    const innerShard = mem.kinesis.listShards(inner)[0]!.shardId;
    const p = mem.kinesis.listShards(src)[0]!.shardId;

    put({ k: 'a', id: 'r1' }, 1n);
    barrier(1, [1, 1], 0n);
    put({ k: 'b', id: 'r2' }, LAST); // epoch 1
    await runShard(source, src, p);
    await runShard(keyed, inner, innerShard);
    mem.control.finishCheckpoint(1, 'COMPLETED');

    mem.kinesis.reshard(src, 2);
    const [c1, c2] = mem.kinesis.listShards(src).filter((s) => s.parentShardId === p);
    put({ k: 'a', id: 'r3' }, 1n); // C1, epoch 1
    barrier(2, [1, 1], 0n); // put for P's starting hash key: it lands in C1
    put({ k: 'b', id: 'r4' }, LAST); // C2: epoch 1, as C2 never meets barrier 2
    put({ k: 'a', id: 'r5' }, 1n); // C1, epoch 2
    await runShard(source, src, c1!.shardId);
    await runShard(keyed, inner, innerShard);
    // checkpoint 2 aborts (P never acks it); barrier 3 goes to both children
    mem.control.finishCheckpoint(2, 'ABORTED');
    barrier(3, [2, 1], 0n);
    mem.kinesis.putRecord(src, { data: encodeSourceControl({ kind: 'barrier', checkpointId: 3, topology: [2, 1], savepoint: false, time: 3000 }), partitionKey: 'barrier', explicitHashKey: LAST.toString() });
    await runShard(source, src, c2!.shardId);
    await runShard(source, src, c1!.shardId);
    await runShard(keyed, inner, innerShard);
    const innerId = `${s1.id}:${innerShard}`;
    const epoch = mem.control.lease(innerId).snapshot?.checkpointId;
    // checkpoint 3 crossed the pipeline: publish what came before it
    collect.publish(3);
    return { epoch, published: collect.published<Rec>('out').map((r) => r.id).sort() };
  }

  it('the inner instance waits for barrier 2 from both children (their hash ranges), C2 sends barrier 2 before 3, and every record is published once', async () => {
    const r = await run();
    expect(r.epoch).toBe(3);
    expect(r.published).toEqual(['r1', 'r2', 'r3', 'r4', 'r5']);
  });
});
