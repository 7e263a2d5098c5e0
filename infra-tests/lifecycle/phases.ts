/**
 * Runs the window job in phases on one set of emulators: each phase starts a run with the given
 * parallelism of the keyed stages (restoring the previous phase's stop-with-savepoint), produces
 * its events, and ends with a stop-with-savepoint — except the last, which ends the input and
 * waits for its windows to fire. What the collect sink published in every run, taken together,
 * is the job's output.
 */
import type { LocalEmulators } from '../../local/emulators.js';
import { LocalJobRunner } from '../../local/runner.js';
import { readManifest, type SavepointManifest } from '../../shared/adapters/aws/savepoints.js';
import { windowJob, type Ev, type UserCount, type WindowCount } from './jobs.js';
import { makeEvents } from './oracles.js';

export interface PhasesResult {
  readonly events: Ev[];
  readonly windows: WindowCount[];
  readonly totals: UserCount[];
  readonly savepoints: SavepointManifest[];
  /** per phase: ms from start to stop */
  readonly durations: number[];
}

export async function runPhases(
  emulators: LocalEmulators,
  prefix: string,
  parallelisms: readonly number[],
  options: { eventsPerPhase?: number; withTotals?: boolean } = {},
): Promise<PhasesResult> {
  const eventsPerPhase = options.eventsPerPhase ?? 50;
  const withTotals = options.withTotals ?? true;
  const events: Ev[] = [];
  const windows: WindowCount[] = [];
  const savepoints: SavepointManifest[] = [];
  const durations: number[] = [];
  let restoreFrom: string | undefined;
  let totals: UserCount[] = [];
  for (let i = 0; i < parallelisms.length; i++) {
    const t0 = Date.now();
    const lap = (what: string) => console.log(`${prefix} phase ${i} (parallelism ${parallelisms[i]}): ${what} at ${Date.now() - t0} ms`);
    const last = i === parallelisms.length - 1;
    const runner = await LocalJobRunner.start(windowJob(parallelisms[i]!, withTotals), {
      emulators,
      environments: 2,
      prefix,
      checkpointIntervalMs: 300,
      recycleProbability: 0.1,
      seed: 11 + i,
      batchSize: 25,
      ...(restoreFrom !== undefined ? { restoreFrom } : {}),
    });
    lap(restoreFrom !== undefined ? `started, restored ${restoreFrom}` : 'started');
    try {
      // timestamps keep rising from phase to phase: nothing is late
      const batch = makeEvents(eventsPerPhase, 5, i * eventsPerPhase * 50, 50, 100 + i);
      events.push(...batch);
      await runner.produce('events', batch);
      if (last) await runner.endInput('events');
      // one checkpoint after the input: every output of the input is in an epoch below it, published at its commit
      await runner.awaitCheckpoints(1, new Date(), 120_000);
      lap('a checkpoint after the input');
      if (!last) {
        const sp = await runner.savepoint({ id: `${prefix}-phase${i}`, stop: true, timeoutMs: 120_000 });
        savepoints.push(await readManifest({ clients: runner.clients, bucket: runner.names.bucket }, sp.id));
        restoreFrom = sp.id;
        lap(`stopped with savepoint ${sp.id} (checkpoint ${sp.checkpointId}, ${sp.rows} rows, ${sp.timers} timers)`);
      } else {
        if (withTotals) totals = await runner.readUpsertSink<UserCount>('totals');
      }
      windows.push(...runner.collected.published<WindowCount>('windows'));
    } finally {
      await runner.stop();
    }
    durations.push(Date.now() - t0);
  }
  return { events, windows, totals, savepoints, durations };
}
