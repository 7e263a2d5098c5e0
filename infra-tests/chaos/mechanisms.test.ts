/**
 * One end-to-end test per protocol mechanism that the seeded chaos runs and the hazard tests did not
 * catch by their verdict (lost, duplicated, mismatched) when the mechanism was taken out. Each test
 * names its mechanism, forces the interleaving it guards on the emulated stack, and judges the sinks
 * against the oracle. docs/guarantees.md lists what each one reported with its mechanism removed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { runSeed, seedLine, type ChaosOptions, type SeedResult } from './harness.js';

function expectClean(r: SeedResult): void {
  const msg = seedLine(r);
  console.log(msg);
  expect(r.error, msg).toBeUndefined();
  expect(r.live, msg).toBe(true);
  expect(r.verdict.lost, msg).toBe(0);
  expect(r.verdict.duplicated, msg).toBe(0);
  expect(r.verdict.mismatched, msg).toBe(0);
  expect(r.deadLettered, msg).toBe(r.poison);
}

describe('chaos: protocol mechanisms caught by the verdict', () => {
  let emulators: LocalEmulators;
  const seed = (n: number, o: Omit<ChaosOptions, 'seeds' | 'emulators'>) => runSeed(n, emulators, { prefixTag: '-mx', records: 80, ...o });

  beforeAll(async () => {
    emulators = await startEmulators();
  }, 120_000);

  afterAll(async () => {
    await emulators?.stop();
  });

  // The fence on the lease's pointer and position writes. Zombies of the keyed stage stall right
  // before they point the lease at their snapshot, past the invocation timeout; the batch is retried
  // elsewhere, which takes the lease over and checkpoints on. Most environments are recycled between
  // invocations, so restores read the lease often, and faults stay on for three more checkpoints so
  // that late zombies land before the quiet phase. Without the fence a zombie's late, older pointer
  // replaces the owner's and later restores read it: the seed stalls (no checkpoint completes again).
  it('the fence on pointer and position writes: a zombie\'s late pointer is refused, never restored', async () => {
    const r = await seed(401, {
      variant: 'two-stage',
      records: 100,
      input: { bursts: 16, gapMs: 1_000, keys: 4 },
      rates: { zombie: 0.25, 'env-recycled': 0.6 },
      faultCheckpoints: 3,
      hookOptions: { zombieStages: ['s1'], zombiePoints: ['publishSnapshot'], zombieOverrunMs: 4_000 },
      // a stall (a restored pointer naming a collected delta) must end as a verdict, not a timeout
      quietTimeoutMs: 60_000,
    });
    expectClean(r);
    expect(r.faults.get('zombie') ?? 0, seedLine(r)).toBeGreaterThan(0);
  }, 240_000);
});
