/**
 * Rescaling running stages in place: the input stream of a keyed stage is resharded 2 → 4 → 3 and
 * the source stream 2 → 3 while records keep arriving, without stopping the job. Parent shards are
 * read to their end before their children, each child takes over its key groups' state, timers and
 * dedupe sets from its parents, and producers switch to the new shards at a barrier. The windows
 * and running counts must equal those computed from the input without the engine, each once —
 * also when instances crash at every point of a flush, batches are delivered twice, PutRecords
 * fails partly and coordinator tasks fail, on a seeded schedule (a child crashing mid-takeover
 * rebuilds its parents again).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { LocalJobRunner } from '../../local/runner.js';
import { listAllShards } from '../../shared/adapters/aws/kinesis.js';
import type { CheckpointRecord } from '../../shared/coordinator/coordinator.js';
import type { RescaleRecord } from '../../shared/coordinator/rescale.js';
import { CHAOS_CHECKPOINT_TIMEOUT_MS, CHAOS_INVOCATION_TIMEOUT_MS } from '../chaos/harness.js';
import { chaosHooks, FaultSchedule } from '../../local/chaos/faults.js';
import { windowJob, type Ev, type UserCount, type WindowCount } from './jobs.js';
import { makeEvents, totalsOracle, windowOracle } from './oracles.js';

interface Outcome {
  readonly events: Ev[];
  readonly rescales: RescaleRecord[];
  /** the checkpoint that announced each reshard, as recorded when the reshard finished */
  readonly announcing: CheckpointRecord[];
  readonly windows: WindowCount[];
  readonly totals: UserCount[];
  readonly shardCounts: Record<string, number[]>;
  readonly faults: string;
}

/** Runs the job, rescales s1 2 → 4 → 3 and s0 2 → 3 while producing, ends the input. */
async function scenario(emulators: LocalEmulators, prefix: string, schedule?: FaultSchedule): Promise<Outcome> {
  const hooks = schedule ? chaosHooks(schedule, { invocationTimeoutMs: CHAOS_INVOCATION_TIMEOUT_MS, checkpointTimeoutMs: CHAOS_CHECKPOINT_TIMEOUT_MS }) : undefined;
  const runner = await LocalJobRunner.start(windowJob(2, true), {
    emulators,
    environments: 2,
    prefix,
    checkpointIntervalMs: 300,
    recycleProbability: 0.1,
    seed: 5,
    batchSize: 25,
    ...(hooks ? { ...hooks.options, invocationTimeoutMs: CHAOS_INVOCATION_TIMEOUT_MS } : {}),
  });
  hooks?.attach(runner);
  const events: Ev[] = [];
  const rescales: RescaleRecord[] = [];
  const announcing: CheckpointRecord[] = [];
  const shardCounts: Record<string, number[]> = {};
  try {
    const t0 = Date.now();
    const lap = (what: string) => console.log(`${prefix}: ${what} at ${Date.now() - t0} ms`);
    const countShards = async (stage: string) => {
      const stream = runner.names.streamOf(runner.plan.stages.find((s) => s.id === stage)!);
      (shardCounts[stage] ??= []).push((await listAllShards(runner.clients, stream)).filter((s) => s.endingSequenceNumber === undefined).length);
    };
    let ts = 0;
    const produce = async (n: number, seed: number) => {
      const batch = makeEvents(n, 6, ts, 40, seed);
      ts += n * 40;
      events.push(...batch);
      await runner.produce('events', batch);
    };
    // records keep arriving while each reshard runs: some land in the parents, some in the children
    const step = async (stage: string, shards: number, seed: number) => {
      const [r] = await Promise.all([runner.rescaleInPlace(stage, shards, { timeoutMs: 180_000 }), produce(30, seed)]);
      rescales.push(r);
      announcing.push((await runner.coordinator.get(r.checkpointId!))!);
      await countShards(stage);
      lap(`${stage} → ${shards} shards`);
      await produce(30, seed + 100);
    };
    await produce(40, 1);
    await runner.awaitCheckpoints(1, new Date(), 120_000);
    await step('s1', 4, 2);
    await step('s1', 3, 3);
    await step('s0', 3, 4);
    await runner.endInput('events');
    if (schedule) schedule.enabled = false;
    await runner.awaitCheckpoints(2, new Date(), 120_000);
    lap('checkpoints after the end of the input');
    const windows = runner.collected.published<WindowCount>('windows');
    const totals = await runner.readUpsertSink<UserCount>('totals');
    const faults = schedule ? [...schedule.counts].map(([k, n]) => `${k}=${n}`).join(' ') : 'none';
    lap(`faults: ${faults}`);
    return { events, rescales, announcing, windows, totals, shardCounts, faults };
  } finally {
    await runner.stop();
  }
}

describe.each([
  { name: 'without faults', prefix: 'inplace', schedule: undefined },
  {
    name: 'under a seeded fault schedule',
    prefix: 'inplace-faults',
    schedule: () =>
      new FaultSchedule({
        seed: 7,
        rates: {
          'crash-before-state-update': 0.03,
          'crash-after-emit': 0.03,
          'crash-after-delta': 0.05,
          'crash-mid-apply': 0.05,
          'crash-before-ack': 0.03,
          'crash-after-ack': 0.04,
          'putrecords-partial': 0.08,
          'putrecords-partial-barrier': 0.3,
          'duplicate-delivery': 0.05,
          'coordinator-task-failure': 0.08,
          'env-recycled': 0.1,
        },
      }),
  },
])('rescale running stages in place, $name', ({ prefix, schedule }) => {
  let emulators: LocalEmulators;
  let out: Outcome;

  beforeAll(async () => {
    emulators = await startEmulators();
    out = await scenario(emulators, prefix, schedule?.());
  }, 600_000);

  afterAll(async () => {
    await emulators?.stop();
  });

  it('reshards each stream to the asked number of shards, at a checkpoint boundary', () => {
    expect(out.rescales.map((r) => `${r.stage}:${r.fromShards}→${r.toShards}:${r.phase}`)).toEqual(['s1:2→4:done', 's1:4→3:done', 's0:2→3:done']);
    expect(out.shardCounts).toEqual({ s1: [4, 3], s0: [3] });
    // UpdateShardCount ran only once the checkpoint announcing it had completed
    out.rescales.forEach((r, i) => {
      const ck = out.announcing[i]!;
      expect(ck.checkpointId).toBe(r.checkpointId);
      expect(ck.status).toBe('COMPLETED');
      expect(ck.reshard).toEqual([r.stage === 's0' ? 0 : 1]);
      expect(Date.parse(r.reshardedAt!)).toBeGreaterThanOrEqual(Date.parse(ck.endedAt!));
    });
  });

  it('publishes exactly the windows of the input (computed without the engine), each once', () => {
    const got = out.windows.map((w) => `${w.user}|${w.start}|${w.count}`).sort();
    const want = windowOracle(out.events);
    // the difference first: it names what went wrong
    expect({ missing: want.filter((w) => !got.includes(w)), unexpected: got.filter((w) => !want.includes(w)) }).toEqual({ missing: [], unexpected: [] });
    expect(got).toEqual(want);
  });

  it('keeps every running count: the last count per user is the number of its records', () => {
    expect(new Map(out.totals.map((t) => [t.user, t.count]))).toEqual(totalsOracle(out.events));
  });
});
