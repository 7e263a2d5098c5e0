/**
 * Rescaling running stages in place: the input stream of a keyed stage is resharded 2 → 4 → 3 and
 * the source stream 2 → 3 while records keep arriving, without stopping the job. Parent shards are
 * read to their end before their children, each child takes over its key groups' state, timers and
 * dedupe sets from its parents, and producers switch to the new shards at a barrier. The windows
 * and running counts must equal those computed from the input without the engine, each once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { LocalJobRunner } from '../../local/runner.js';
import { listAllShards } from '../../shared/adapters/aws/kinesis.js';
import type { RescaleRecord } from '../../shared/coordinator/rescale.js';
import { windowJob, type Ev, type UserCount, type WindowCount } from './jobs.js';
import { makeEvents, totalsOracle, windowOracle } from './oracles.js';

describe('rescale running stages in place', () => {
  let emulators: LocalEmulators;
  let runner: LocalJobRunner;
  const events: Ev[] = [];
  const rescales: RescaleRecord[] = [];
  let windows: WindowCount[] = [];
  let totals: UserCount[] = [];
  const shardCounts: Record<string, number[]> = {};

  beforeAll(async () => {
    emulators = await startEmulators();
    runner = await LocalJobRunner.start(windowJob(2, true), {
      emulators,
      environments: 2,
      prefix: 'inplace',
      checkpointIntervalMs: 300,
      recycleProbability: 0.1,
      seed: 5,
      batchSize: 25,
    });
    const t0 = Date.now();
    const lap = (what: string) => console.log(`rescale in place: ${what} at ${Date.now() - t0} ms`);
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
      const [r] = await Promise.all([runner.rescaleInPlace(stage, shards, { timeoutMs: 120_000 }), produce(30, seed)]);
      rescales.push(r);
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
    await runner.awaitCheckpoints(1, new Date(), 120_000);
    lap('a checkpoint after the end of the input');
    windows = runner.collected.published<WindowCount>('windows');
    totals = await runner.readUpsertSink<UserCount>('totals');
  }, 600_000);

  afterAll(async () => {
    await runner?.stop();
    await emulators?.stop();
  });

  it('reshards each stream to the asked number of shards, at a checkpoint boundary', () => {
    expect(rescales.map((r) => `${r.stage}:${r.fromShards}→${r.toShards}:${r.phase}`)).toEqual(['s1:2→4:done', 's1:4→3:done', 's0:2→3:done']);
    expect(shardCounts).toEqual({ s1: [4, 3], s0: [3] });
    for (const r of rescales) expect(r.checkpointId).toBeGreaterThan(0);
  });

  it('publishes exactly the windows of the input (computed without the engine), each once', () => {
    expect(windows.map((w) => `${w.user}|${w.start}|${w.count}`).sort()).toEqual(windowOracle(events));
  });

  it('keeps every running count: the last count per user is the number of its records', () => {
    const want = totalsOracle(events);
    expect(new Map(totals.map((t) => [t.user, t.count]))).toEqual(want);
  });
});
