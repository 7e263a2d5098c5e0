/**
 * Protocol tests of the real StageRunner / StageInstance with zombies that stall for long: an
 * invocation blocked at a port call (any stage) while the event source mapping retries its batch
 * elsewhere and goes on, and the coordinator injects, commits, aborts and collects garbage; then it
 * wakes (stage-runner-sim-zombies.test-support.ts). Besides every invariant of the other property
 * tests: a zombie woken after a takeover is fenced or changes nothing, and every state row a keyed
 * instance reads holds what the snapshot of its epoch holds (no restore mixes two checkpoints).
 *
 * SIM_SEEDS sets the runs per property (a longer run: `SIM_SEEDS=400 npx vitest run <this file>`).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { runScenario, safeZombie, scenario, stallPlan } from './stage-runner-sim-scenario.test-support.js';

/** runs per property; the read-position one runs more: its run 46 stalls a source after its takeover, woken once a newer owner dropped its placements (as chaos seed 206) */
const runs = (sourceBarriers: boolean) => Number(process.env.SIM_SEEDS ?? (sourceBarriers ? 50 : 20));

describe('StageRunner on the in-memory twins: zombies that stall while the mapping and the coordinator go on', () => {
  for (const sourceBarriers of [false, true]) {
    it(`keeps every invariant${sourceBarriers ? ' with barriers at the sources\' read position' : ' with barriers at the tail'}`, async () => {
      const started = Date.now();
      const totals = { runs: 0, stalls: 0, stallsOvertaken: 0, stallsOverCheckpoints: 0, zombieFenced: 0, orphanDeltas: 0, completed: 0, aborted: 0, stateReadsChecked: 0 };
      await fc.assert(
        fc.asyncProperty(scenario, stallPlan, async (sc, plan) => {
          // the usual zombies too, and environments that lose their instances: takeovers meanwhile
          const s = await runScenario({ ...sc, records: Math.max(sc.records, 40) }, safeZombie, { sourceBarriers }, plan);
          totals.runs++;
          for (const k of ['stalls', 'stallsOvertaken', 'stallsOverCheckpoints', 'zombieFenced', 'orphanDeltas', 'stateReadsChecked'] as const) totals[k] += s.stats[k];
          totals.completed += s.completed.length;
          totals.aborted += s.aborted.length;
          if (s.errors.length) throw new Error(`scenario ${JSON.stringify(sc)} stalls ${JSON.stringify(plan)}:\n${s.errors.slice(0, 4).join('\n\n')}\n\n${s.diagnostics()}`);
        }),
        { seed: sourceBarriers ? 20_261_203 : 20_261_202, numRuns: runs(sourceBarriers), endOnFailure: true },
      );
      // the stalls must actually have outlived takeovers, and the checks must have had reads to check
      expect(totals.stallsOvertaken).toBeGreaterThan(0);
      expect(totals.stallsOverCheckpoints).toBeGreaterThan(0);
      expect(totals.stateReadsChecked).toBeGreaterThan(0);
      console.log(`stalled zombies (${sourceBarriers ? 'read-position' : 'tail'} barriers): ${totals.runs} runs in ${Date.now() - started} ms`, totals);
    }, Math.max(240_000, runs(sourceBarriers) * 1_000));
  }
});
