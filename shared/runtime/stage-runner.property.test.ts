/**
 * Protocol tests of the real StageRunner / StageInstance on the in-memory twins: seeded scenarios
 * of faults (fast-check), each checked against the oracle the driver computes from the input alone
 * (stage-runner-sim.test-support.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { runScenario, safeZombie, scenario, staleTakeoverZombie } from './stage-runner-sim-scenario.test-support.js';

/** runs per property (a longer run: `SIM_SEEDS=400 npx vitest run <this file>`) */
const seeds = Number(process.env.SIM_SEEDS ?? 30);
const timeout = Math.max(60_000, seeds * 1_000);

describe('StageRunner on the in-memory twins: property', () => {
  it('keeps every invariant over random inputs, batches, routing and faults', async () => {
    const started = Date.now();
    let runs = 0;
    const totals = { batches: 0, crashes: 0, zombies: 0, zombieFenced: 0, redeliveries: 0, envLosses: 0, completed: 0, aborted: 0, retried: 0 };
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        const s = await runScenario(sc);
        runs++;
        for (const k of ['batches', 'crashes', 'zombies', 'zombieFenced', 'redeliveries', 'envLosses'] as const) totals[k] += s.stats[k];
        totals.completed += s.completed.length;
        totals.aborted += s.aborted.length;
        totals.retried += (s.m.telemetry as { get?: (n: string) => number }).get?.('PutRecordsRetried') ?? 0;
        if (s.errors.length) throw new Error(`scenario ${JSON.stringify(sc)}:\n${s.errors.slice(0, 4).join('\n\n')}\n\n${s.diagnostics()}`);
      }),
      { seed: 20_261_129, numRuns: seeds, endOnFailure: true },
    );
    // the faults must actually have happened
    expect(totals.crashes).toBeGreaterThan(0);
    expect(totals.zombies).toBeGreaterThan(0);
    expect(totals.retried).toBeGreaterThan(0);
    expect(totals.completed).toBeGreaterThan(runs);
    console.log(`property: ${runs} runs in ${Date.now() - started} ms`, totals);
  }, timeout);

  // ENGINE BUG (see 'restores the snapshot current at takeover'): the same property, with zombies
  // scheduled so the ESM's retry reads the lease, then the timed-out invocation publishes a
  // snapshot, then the retry takes over with the fence it read and restores the older snapshot.
  it('keeps every invariant when a retry reads the lease before the old invocation snapshots', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        const s = await runScenario({ ...sc, zombieP: 0.3, parallelism: Math.max(1, sc.parallelism) }, staleTakeoverZombie);
        if (s.errors.length) throw new Error(`scenario ${JSON.stringify(sc)}:\n${s.errors.slice(0, 4).join('\n\n')}`);
      }),
      { seed: 42, numRuns: seeds, endOnFailure: true },
    );
  }, timeout);

  it('keeps every invariant with barriers at the sources\' read position', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        const s = await runScenario({ ...sc, zombieP: Math.max(sc.zombieP, 0.1) }, safeZombie, { sourceBarriers: true });
        if (s.errors.length) throw new Error(`scenario ${JSON.stringify(sc)}:\n${s.errors.slice(0, 4).join('\n\n')}`);
      }),
      { seed: 3, numRuns: seeds, endOnFailure: true },
    );
  }, timeout);
});
