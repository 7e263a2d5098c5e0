/**
 * The chaos harness in CI: a few seeds of the chaos job on the emulated AWS stack, each under a
 * fault profile biased toward the combinations that find protocol bugs (zombie + takeover, PutRecords
 * failures right before a barrier, crashes between delta, pointer, apply and ack, coordinator
 * failures around the commit). Seeds 1–5 cover the five profiles and both job shapes, and the
 * schedule makes every kind of its profile fire at least once, so together they fire every kind.
 *
 * The targeted tests, one per hazard of the protocol (docs/guarantees.md), are in hazards.test.ts.
 *
 * Larger runs: `npm run chaos -- --seeds 300 --from 100` (what it takes: README, "Testing and measuring").
 */
import { describe, expect, it } from 'vitest';
import { useEmulators } from '../emulators-fixture.js';
import { FAULT_KINDS } from '../../local/chaos/faults.js';
import { KINDS_OUTSIDE_PROFILES } from '../../local/chaos/schedule.js';
import { runChaos } from './harness.js';

const CI_SEEDS = [1, 2, 3, 4, 5, 6];

describe('chaos: seeded faults on the emulated stack', () => {
  const emulators = useEmulators();

  it(
    `seeds ${CI_SEEDS.join(', ')}: nothing lost, duplicated or mismatched; dead letters = poison; checkpoints keep completing; every fault kind fires`,
    async () => {
      const lines: string[] = [];
      const summary = await runChaos({
        seeds: CI_SEEDS,
        emulators: emulators(),
        records: 100,
        concurrency: 2,
        prefixTag: '-ci',
        onSeed: (_r, line) => {
          lines.push(line);
          console.log(line);
        },
      });
      console.log(summary.line);
      const report = `${lines.join('\n')}\n${summary.line}`;
      expect(summary.results.filter((r) => r.error), report).toEqual([]);
      expect(summary.stalled, report).toBe(0);
      expect(summary.lost, report).toBe(0);
      expect(summary.duplicated, report).toBe(0);
      expect(summary.mismatched, report).toBe(0);
      expect(summary.deadLettered, report).toBe(summary.poison);
      expect(summary.poison).toBeGreaterThan(0);
      expect(
        FAULT_KINDS.filter((k) => !KINDS_OUTSIDE_PROFILES.includes(k) && !summary.faultsByKind.get(k)),
        `fault kinds that never fired:\n${report}`,
      ).toEqual([]);
    },
    420_000,
  );
});
