/**
 * A child shard of an in-place reshard starts from its parents' final state (shard-inheritance.ts):
 * each parent restored from its last snapshot and replayed to the end of its
 * closed shard. Children run in any order, and a child may run (or run again, after a crash or a
 * recycled environment) after its sibling has already snapshotted past the reshard. These tests drive
 * a windowed stage through a reshard on the in-memory twins, with the children invoked in every order.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, TumblingEventTimeWindows, WatermarkStrategies } from '../api/index.js';
import { createJobStreams, createMemoryPorts } from '../adapters/memory/memory-ports.js';
import { CollectRegistry } from '../adapters/memory/collect-registry.js';
import { encodeSourceControl } from '../codec/envelope.js';
import { keyGroupOf, keyGroupsOfHashRange, keyString } from '../plan/key-groups.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import { StageRunner } from './stage-runner.js';

interface Ev {
  readonly key: string;
  readonly ts: number;
  readonly v: number;
}

const MAX_P = 8;

function windowedJob() {
  const j = job('reshard-windows', { maxParallelism: MAX_P });
  j.source<Ev>({ name: 'ev', shards: 1, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
    .keyBy((e) => e.key, { parallelism: 1 })
    .window(TumblingEventTimeWindows.of(10_000))
    .aggregate(
      { createAccumulator: () => 0, add: (e: Ev, acc: number) => acc + e.v, getResult: (a: number) => a, merge: (a: number, b: number) => a + b },
      { result: (key, w, sum) => ({ key, start: w.start, end: w.end, sum }) },
    )
    .sinkTo(collectSink('out'));
  return j;
}

/** A key whose key group lies in the lower (0) or upper (1) half of the key groups. */
function keyInHalf(half: 0 | 1, not?: string): string {
  for (let i = 0; ; i++) {
    const k = `key-${i}`;
    if (k !== not && Math.floor(keyGroupOf(keyString(k), MAX_P) / (MAX_P / 2)) === half) return k;
  }
}

/**
 * The scenario: one inner shard P holds window state for keys a and b (checkpoint 1 announces the
 * reshard); after barrier 1, records past the window end reach P (its timers are due in the tail);
 * P's stream is resharded into two children; checkpoint 2 runs; the children are invoked in `order`,
 * each in a fresh environment; the second may also run once more from scratch (a retry).
 */
async function reshardWindowedStage(order: readonly [0 | 1, 0 | 1], rerunFirst: boolean) {
  const j = windowedJob();
  const plan = planJob(j);
  const names = resourceNames(plan);
  const collect = new CollectRegistry();
  const mem = createMemoryPorts({ seed: 3, collect });
  createJobStreams(mem.kinesis, plan, names);
  const [s0, s1] = plan.stages as [(typeof plan.stages)[number], (typeof plan.stages)[number]];
  const src = names.streamOf(s0);
  const inner = names.streamOf(s1);
  const a = keyInHalf(0);
  const b = keyInHalf(1, a);
  const put = (e: Ev) => mem.kinesis.putRecord(src, { data: new TextEncoder().encode(JSON.stringify(e)), partitionKey: e.key });
  const barrier = (n: number, topology: number[], reshard: number[]) => {
    mem.control.allocateCheckpoint(topology);
    mem.kinesis.putRecord(src, { data: encodeSourceControl({ kind: 'barrier', checkpointId: n, topology, savepoint: false, ...(reshard.length ? { reshard } : {}), time: n * 1000 }), partitionKey: 'barrier' });
  };
  const read = new Map<string, string | undefined>();
  const runShard = async (runner: StageRunner, stream: string, shardId: string) => {
    const k = `${stream}/${shardId}`;
    const last = read.get(k);
    const fresh = mem.kinesis.records(stream, shardId).filter((r) => last === undefined || BigInt(r.sequenceNumber) > BigInt(last));
    if (!fresh.length) return;
    await runner.run(shardId, fresh);
    read.set(k, fresh[fresh.length - 1]!.sequenceNumber);
  };
  const source = new StageRunner(j, plan, s0, names, mem.ports);
  const srcShard = mem.kinesis.listShards(src)[0]!.shardId;
  const parent = mem.kinesis.listShards(inner)[0]!.shardId;

  // checkpoint 1 announces the reshard of stage 1; window state of a and b is in its snapshot
  put({ key: a, ts: 1_000, v: 1 });
  put({ key: b, ts: 1_000, v: 10 });
  barrier(1, [1, 1], [1]);
  // after barrier 1: event time passes the window end, so P's timers for a and b are due in its tail
  put({ key: a, ts: 15_000, v: 2 });
  put({ key: b, ts: 15_000, v: 20 });
  await runShard(source, src, srcShard);
  await runShard(new StageRunner(j, plan, s1, names, mem.ports), inner, parent);
  expect(mem.control.checkpoint(1)!.acks.size).toBe(2);
  mem.control.finishCheckpoint(1, 'COMPLETED');
  collect.publish(1);

  // the reshard, then checkpoint 2 on the new shards
  mem.kinesis.reshard(inner, 2);
  const children = mem.kinesis.listShards(inner).filter((s) => s.parentShardId === parent);
  expect(children).toHaveLength(2);
  put({ key: a, ts: 16_000, v: 3 });
  put({ key: b, ts: 16_000, v: 30 });
  barrier(2, [1, 2], []);
  await runShard(source, src, srcShard);
  const runChild = async (i: 0 | 1) => runShard(new StageRunner(j, plan, s1, names, mem.ports), inner, children[i]!.shardId);
  await runChild(order[0]);
  if (rerunFirst) {
    // the first child's environment is recycled and its batch retried: it inherits nothing again
    read.delete(`${inner}/${children[order[0]].shardId}`);
    await runChild(order[0]);
  }
  await runChild(order[1]);
  const ck2 = mem.control.checkpoint(2)!;
  // a's and b's windows [0, 10 s) fired once each, with their own sums; each child holds only its own timers
  mem.control.finishCheckpoint(2, 'COMPLETED');
  collect.publish(2);
  const owned = children.map((c) => new Set(keyGroupsOfHashRange(c.startingHashKey, c.endingHashKey, MAX_P)));
  const timersOf = children.map((c) => {
    const p = mem.control.lease(`${s1.id}:${c.shardId}`).snapshot;
    return p?.meta.timers;
  });
  return { ck2, published: collect.published<{ key: string; start: number; sum: number }>('out'), a, b, owned, timersOf };
}

describe('reshard of a windowed stage: children invoked in every order', () => {
  for (const order of [
    [0, 1],
    [1, 0],
  ] as const) {
    for (const rerunFirst of [false, true]) {
      it(`child ${order[0]} then child ${order[1]}${rerunFirst ? ' (the first one retried)' : ''}: the later child inherits only its own key groups' timers (inheritance restores owned timers only)`, async () => {
        const r = await reshardWindowedStage(order, rerunFirst);
        expect(r.ck2.acks.size, 'both children and the source acked checkpoint 2').toBe(3);
        const windows = r.published.filter((o) => o.start === 0).map((o) => [o.key, o.sum]).sort();
        expect(windows).toEqual([[r.a, 1], [r.b, 10]].sort());
        // each child keeps one timer: its own key's window [10 s, 20 s)
        expect(r.timersOf).toEqual([1, 1]);
      });
    }
  }
});
