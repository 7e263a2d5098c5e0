/**
 * Stop-with-savepoint, then restore into a new run with the same parallelism: the window results
 * and running totals must equal what the input gives when the job never stops (computed from the
 * input), with windows that were open at the savepoint firing after the restore (their state rows
 * and timers travel in the savepoint).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { SAVEPOINT_FORMAT } from '../../shared/adapters/aws/savepoints.js';
import { totalsOracle, windowOracle } from './oracles.js';
import { runPhases, type PhasesResult } from './phases.js';

describe('savepoint and restore', () => {
  let emulators: LocalEmulators;
  let result: PhasesResult;

  beforeAll(async () => {
    emulators = await startEmulators();
    result = await runPhases(emulators, 'sp-same', [2, 2]);
    console.log(`savepoint-restore phases (ms): ${result.durations.join(', ')}`);
  }, 240_000);

  afterAll(async () => {
    await emulators?.stop();
  });

  it('writes a portable savepoint: manifest, source positions, state rows and timers per key group', () => {
    const [m] = result.savepoints;
    expect(m!.format).toBe(SAVEPOINT_FORMAT);
    expect(m!.version).toBe(1);
    expect(m!.sources.map((s) => s.shardId).sort()).toEqual(['shardId-000000000000', 'shardId-000000000001']);
    for (const s of m!.sources) expect(s.replayPoint.from).toBe('after');
    expect(m!.rows).toBeGreaterThan(0);
    // windows still open at the savepoint: their timers are in it
    expect(m!.timers).toBeGreaterThan(0);
    for (const op of m!.operators) for (const g of op.keyGroups) expect(g).toBeLessThan(m!.maxParallelism);
  });

  it('restored run + stopped run publish exactly the windows of the whole input, each once', () => {
    const got = result.windows.map((w) => `${w.user}|${w.start}|${w.count}`).sort();
    expect(got).toEqual(windowOracle(result.events));
  });

  it('running totals after the restore equal the counts of the whole input', () => {
    const want = totalsOracle(result.events);
    expect(new Map(result.totals.map((t) => [t.user, t.count]))).toEqual(want);
  });
});
