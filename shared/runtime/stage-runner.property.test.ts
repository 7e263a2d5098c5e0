/**
 * Protocol tests of the real StageRunner / StageInstance on the in-memory twins: seeded scenarios
 * of faults (fast-check), each checked against the oracle the driver computes from the input alone
 * (stage-runner-sim.test-support.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectSink } from '../api/index.js';
import { StageRunner } from './stage-runner.js';
import { totals, Sim, sim, type SimOptions } from './stage-runner-sim.test-support.js';

interface Scenario {
  seed: number;
  sourceShards: number;
  parallelism: number;
  maxParallelism: number;
  envsPerStage: number;
  records: number;
  maxBatch: number;
  pageSize: number;
  putRejectP: number;
  crashP: number;
  throttleP: number;
  envLossP: number;
  redeliverP: number;
  zombieP: number;
  checkpointEvery: number;
  abortAfter: number;
  maxHeldRecords: number;
  maxCachedKeys: number;
  maxDirtyKeys: number;
  focus: string;
}

/** Crash points biased toward the hazards (docs/guarantees.md): uniform faults find them in too few seeds. */
const FOCUS = [
  '',
  'after:writer.putAll',
  'before:control.writeDelta',
  'after:control.writeDelta',
  'after:control.publishSnapshot',
  'before:state.applyRows',
  'after:state.applyRows',
  'before:control.ack',
  'after:control.commitPosition',
  'after:upsertSink.write',
  'after:collectSink.stage',
  'before:reader.read',
];

const scenario: fc.Arbitrary<Scenario> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  sourceShards: fc.integer({ min: 1, max: 3 }),
  parallelism: fc.integer({ min: 1, max: 4 }),
  maxParallelism: fc.constantFrom(4, 16, 128),
  envsPerStage: fc.integer({ min: 1, max: 3 }),
  records: fc.integer({ min: 0, max: 250 }),
  maxBatch: fc.integer({ min: 1, max: 12 }),
  pageSize: fc.constantFrom(1, 3, 1000),
  putRejectP: fc.constantFrom(0, 0.1, 0.4),
  crashP: fc.constantFrom(0, 0.01, 0.04),
  throttleP: fc.constantFrom(0, 0.05),
  envLossP: fc.constantFrom(0, 0.05, 0.2),
  redeliverP: fc.constantFrom(0, 0.05, 0.2),
  zombieP: fc.constantFrom(0, 0.03, 0.1),
  checkpointEvery: fc.integer({ min: 3, max: 40 }),
  abortAfter: fc.integer({ min: 20, max: 200 }),
  maxHeldRecords: fc.constantFrom(1, 4, 50_000),
  maxCachedKeys: fc.constantFrom(1, 3, 100_000),
  // dirty keys past it go to the spill store until the snapshot
  maxDirtyKeys: fc.constantFrom(1, 4, 200_000),
  focus: fc.constantFrom(...FOCUS),
});

async function runScenario(sc: Scenario, zombieKind: (s: Sim) => ZombieSchedule = safeZombie, extra: Partial<SimOptions> = {}): Promise<Sim> {
  const s = sim({
    ...extra,
    seed: sc.seed,
    sourceShards: sc.sourceShards,
    parallelism: sc.parallelism,
    maxParallelism: sc.maxParallelism,
    envsPerStage: sc.envsPerStage,
    maxBatch: sc.maxBatch,
    pageSize: sc.pageSize,
    putRejectP: sc.putRejectP,
    crashP: sc.crashP,
    throttleP: sc.throttleP,
    runner: { maxHeldRecords: sc.maxHeldRecords, maxCachedKeys: sc.maxCachedKeys, maxDirtyKeys: sc.maxDirtyKeys },
    ...(sc.focus && sc.crashP > 0 ? { focus: sc.focus } : {}),
  });
  let lastCheckpoint = 0;
  for (let step = 0; step < 3_000 && !s.errors.length; step++) {
    const r = s.rand();
    if (s.produced.length < sc.records && r < 0.3) {
      const k = 1 + Math.floor(s.rand() * 4);
      for (let i = 0; i < k && s.produced.length < sc.records; i++) s.produce();
      continue;
    }
    // the coordinator
    if (s.inFlight) {
      if (await s.tryCommit()) lastCheckpoint = step;
      else if (step - s.inFlight.since > sc.abortAfter) {
        await s.abortInFlight();
        lastCheckpoint = step;
      }
    } else if (step - lastCheckpoint >= sc.checkpointEvery) {
      await s.startCheckpoint(step);
      continue;
    }
    if (s.rand() < sc.envLossP / 10) {
      s.loseEnv(s.pick([...s.envs.values()].flat()));
      continue;
    }
    const pending = s.pendingShards();
    if (!pending.length) {
      if (s.produced.length >= sc.records && !s.inFlight) break;
      continue;
    }
    let { stage, shardId } = s.pick(pending);
    if (s.rand() < sc.zombieP) {
      // zombies around barriers: where a takeover meets a snapshot
      const near = pending.filter((p) => s.barrierAhead(p.stage, p.shardId, sc.maxBatch));
      if (near.length && s.rand() < 0.7) ({ stage, shardId } = s.pick(near));
      const z = zombieKind(s);
      await s.zombie(stage, shardId, z.gateA, z.gateB, z.releaseAFirst);
    } else {
      await s.esmStep(stage, shardId, { redeliverP: sc.redeliverP });
    }
  }
  while (s.produced.length < sc.records) s.produce();
  if (!s.errors.length) await s.finish();
  return s;
}

interface ZombieSchedule {
  gateA: number;
  gateB: number | undefined;
  releaseAFirst: boolean;
}

/**
 * Zombie schedules except the one that hits the stale-takeover bug (B blocked right before its
 * takeOver while A publishes a snapshot): gate B before its first call, or past its takeover.
 */
function safeZombie(s: Sim): ZombieSchedule {
  const gateA = 1 + Math.floor(s.rand() * 14);
  const r = s.rand();
  const gateB = r < 0.5 ? undefined : r < 0.6 ? 0 : 2 + Math.floor(s.rand() * 10);
  return { gateA, gateB, releaseAFirst: s.rand() < 0.5 };
}

/** The retry B read the lease and blocks before takeOver; A, still running, goes on first. */
function staleTakeoverZombie(s: Sim): ZombieSchedule {
  return { gateA: 2 + Math.floor(s.rand() * 14), gateB: 1, releaseAFirst: true };
}

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
      { seed: 20_261_129, numRuns: 30, endOnFailure: true },
    );
    // the faults must actually have happened
    expect(totals.crashes).toBeGreaterThan(0);
    expect(totals.zombies).toBeGreaterThan(0);
    expect(totals.retried).toBeGreaterThan(0);
    expect(totals.completed).toBeGreaterThan(runs);
    console.log(`property: ${runs} runs in ${Date.now() - started} ms`, totals);
  });

  // ENGINE BUG (see 'restores the snapshot current at takeover'): the same property, with zombies
  // scheduled so the ESM's retry reads the lease, then the timed-out invocation publishes a
  // snapshot, then the retry takes over with the fence it read and restores the older snapshot.
  it('keeps every invariant when a retry reads the lease before the old invocation snapshots', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        const s = await runScenario({ ...sc, zombieP: 0.3, parallelism: Math.max(1, sc.parallelism) }, staleTakeoverZombie);
        if (s.errors.length) throw new Error(`scenario ${JSON.stringify(sc)}:\n${s.errors.slice(0, 4).join('\n\n')}`);
      }),
      { seed: 42, numRuns: 30, endOnFailure: true },
    );
  });

  it('keeps every invariant with barriers at the sources\' read position', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        const s = await runScenario({ ...sc, zombieP: Math.max(sc.zombieP, 0.1) }, safeZombie, { sourceBarriers: true });
        if (s.errors.length) throw new Error(`scenario ${JSON.stringify(sc)}:\n${s.errors.slice(0, 4).join('\n\n')}`);
      }),
      { seed: 3, numRuns: 30, endOnFailure: true },
    );
  });
});
