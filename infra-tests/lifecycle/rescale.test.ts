/**
 * Rescaling by stop-with-savepoint → new parallelism → restore, twice (2 → 4 → 3 instances of the
 * keyed stages). State rows move whole with their key groups, timers go to the new owner of their
 * key group, and the results must equal those of the whole input computed without the engine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { windowOracle } from './oracles.js';
import { runPhases, type PhasesResult } from './phases.js';

describe('rescale 2 → 4 → 3 through savepoints', () => {
  let emulators: LocalEmulators;
  let result: PhasesResult;

  beforeAll(async () => {
    emulators = await startEmulators();
    result = await runPhases(emulators, 'rescale', [2, 4, 3], { eventsPerPhase: 40, withTotals: false });
    console.log(`rescale phases (ms): ${result.durations.join(', ')}`);
  }, 300_000);

  afterAll(async () => {
    await emulators?.stop();
  });

  it('takes each savepoint at the parallelism it ran with', () => {
    expect(result.savepoints.map((m) => m.stages.map((s) => s.parallelism))).toEqual([
      [2, 2],
      [2, 4],
    ]);
    for (const m of result.savepoints) expect(m.timers).toBeGreaterThan(0);
  });

  it('publishes exactly the windows of the unscaled run (computed from the input), each once', () => {
    const got = result.windows.map((w) => `${w.user}|${w.start}|${w.count}`).sort();
    expect(got).toEqual(windowOracle(result.events));
  });
});
