/**
 * A source stream resharded by Kinesis itself, as an on-demand stream is: one source shard is split
 * while records arrive, and later its two children are merged back, at moments the job does not
 * choose (no announcing barrier, no drain) and under a seeded fault schedule. The job adopts the new
 * shards by the path of its own rescale: each child rebuilds its parents' final state
 * (runtime/shard-inheritance.ts), the checkpoint that expected a closed shard aborts and the next
 * one expects the open shards. The windows and running counts must equal those computed from the
 * input without the engine, each once. Without the adoption no checkpoint completes after the split.
 */
import { MergeShardsCommand, SplitShardCommand } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { LocalJobRunner } from '../../local/runner.js';
import { listAllShards } from '../../shared/adapters/aws/kinesis.js';
import type { CheckpointRecord } from '../../shared/coordinator/coordinator.js';
import { CHAOS_CHECKPOINT_TIMEOUT_MS, CHAOS_INVOCATION_TIMEOUT_MS } from '../chaos/harness.js';
import { chaosHooks } from '../../local/chaos/faults.js';
import { FaultSchedule } from '../../local/chaos/schedule.js';
import { windowJob, type Ev, type UserCount, type WindowCount } from './jobs.js';
import { makeEvents, totalsOracle, windowOracle } from './oracles.js';

describe('a source stream resharded outside the job (split, then merge) under faults', () => {
  let emulators: LocalEmulators;
  const events: Ev[] = [];
  let windows: WindowCount[] = [];
  let totals: UserCount[] = [];
  let last: CheckpointRecord | undefined;
  let shards: string[] = [];

  beforeAll(async () => {
    emulators = await startEmulators();
    const schedule = new FaultSchedule({
      seed: 11,
      rates: {
        'crash-before-state-update': 0.03,
        'crash-after-emit': 0.03,
        'crash-after-delta': 0.05,
        'crash-before-ack': 0.03,
        'crash-after-ack': 0.04,
        'putrecords-partial': 0.08,
        'duplicate-delivery': 0.05,
        'coordinator-task-failure': 0.08,
        'env-recycled': 0.1,
      },
    });
    const hooks = chaosHooks(schedule, { invocationTimeoutMs: CHAOS_INVOCATION_TIMEOUT_MS, checkpointTimeoutMs: CHAOS_CHECKPOINT_TIMEOUT_MS });
    // a checkpoint that expected a closed shard waits for its timeout: keep it short
    const runner = await LocalJobRunner.start(windowJob(2, true, { timeoutMs: 5_000 }), {
      emulators,
      environments: 2,
      prefix: 'srcreshard',
      checkpointIntervalMs: 300,
      recycleProbability: 0.1,
      seed: 5,
      batchSize: 25,
      ...hooks.options,
      invocationTimeoutMs: CHAOS_INVOCATION_TIMEOUT_MS,
    });
    hooks.attach(runner);
    try {
      let ts = 0;
      const produce = async (n: number, seed: number) => {
        const batch = makeEvents(n, 6, ts, 40, seed);
        ts += n * 40;
        events.push(...batch);
        await runner.produce('events', batch);
      };
      const stream = runner.names.sourceStream(runner.plan.sources[0]!);
      const open = async () => (await listAllShards(runner.clients, stream)).filter((s) => s.endingSequenceNumber === undefined);
      await produce(40, 1);
      await runner.awaitCheckpoints(1, new Date(), 120_000);
      // split the first shard in two while records arrive (some land in the parent, some in the children)
      const [parent] = await open();
      const middle = ((BigInt(parent!.startingHashKey) + BigInt(parent!.endingHashKey)) / 2n).toString();
      await Promise.all([produce(60, 2), runner.clients.kinesis.send(new SplitShardCommand({ StreamName: stream, ShardToSplit: parent!.shardId, NewStartingHashKey: middle }))]);
      await produce(60, 3);
      await runner.awaitCheckpoints(1, new Date(), 120_000);
      // merge the two children back while records arrive
      const [a, b] = (await open()).filter((s) => s.parentShardId === parent!.shardId);
      await Promise.all([produce(60, 4), runner.clients.kinesis.send(new MergeShardsCommand({ StreamName: stream, ShardToMerge: a!.shardId, AdjacentShardToMerge: b!.shardId }))]);
      await produce(60, 5);
      await runner.endInput('events');
      schedule.enabled = false;
      await runner.awaitCheckpoints(2, new Date(), 180_000);
      windows = runner.collected.published<WindowCount>('windows');
      totals = await runner.readUpsertSink<UserCount>('totals');
      last = (await runner.coordinator.list()).filter((c) => c.status === 'COMPLETED').at(-1);
      shards = (await open()).map((s) => `s0:${s.shardId}`).sort();
      console.log(`srcreshard: faults ${[...schedule.counts].map(([k, n]) => `${k}=${n}`).join(' ')}`);
    } finally {
      await runner.stop();
    }
  }, 600_000);

  afterAll(async () => {
    await emulators?.stop();
  });

  it('the last checkpoint expects the open shards after the merge (the job adopted them)', () => {
    expect(shards).toHaveLength(2);
    expect(last?.topology[0]).toBe(2);
    expect(Object.keys(last?.instances ?? {}).filter((id) => id.startsWith('s0:')).sort()).toEqual(shards);
  });

  it('publishes exactly the windows of the input (computed without the engine), each once', () => {
    const got = windows.map((w) => `${w.user}|${w.start}|${w.count}`).sort();
    const want = windowOracle(events);
    expect({ missing: want.filter((w) => !got.includes(w)), unexpected: got.filter((w) => !want.includes(w)) }).toEqual({ missing: [], unexpected: [] });
    expect(got).toEqual(want);
  });

  it('keeps every running count: the last count per user is the number of its records', () => {
    expect(new Map(totals.map((t) => [t.user, t.count]))).toEqual(totalsOracle(events));
  });
});
