/**
 * The seeded scenarios of the StageRunner property tests (stage-runner*.property.test.ts): a random
 * job shape, input, batching and faults (fast-check arbitraries), played by the driver
 * (stage-runner-sim.test-support.ts) and checked against its oracle.
 */
import fc from 'fast-check';
import { sim, type Sim, type SimOptions } from './stage-runner-sim.test-support.js';
import { StalledZombie, zombie } from './stage-runner-sim-zombies.test-support.js';

export interface Scenario {
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
  /** snapshots between applications of the rows to the state table (changelog.ts) */
  materializeEvery: number;
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

export const scenario: fc.Arbitrary<Scenario> = fc.record({
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
  materializeEvery: fc.constantFrom(1, 2, 3, 5),
  focus: fc.constantFrom(...FOCUS),
});

export async function runScenario(
  sc: Scenario,
  zombieKind: (s: Sim) => ZombieSchedule = safeZombie,
  extra: Partial<SimOptions> = {},
  stalls?: StallPlan,
): Promise<Sim> {
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
    materializeEvery: sc.materializeEvery,
    ...(sc.focus && sc.crashP > 0 ? { focus: sc.focus } : {}),
  });
  let lastCheckpoint = 0;
  const stalled: StalledZombie[] = [];
  const woken: StalledZombie[] = [];
  for (let step = 0; step < 3_000 && !s.errors.length; step++) {
    if (stalls && stalled.length && s.rand() < stalls.wakeP) {
      const z = stalled.splice(Math.floor(s.rand() * stalled.length), 1)[0]!;
      await z.wake();
      woken.push(z);
      continue;
    }
    const r = s.rand();
    if (s.produced.length < sc.records && r < 0.3) {
      const k = 1 + Math.floor(s.rand() * 4);
      for (let i = 0; i < k && s.produced.length < sc.records; i++) s.produce();
      continue;
    }
    // the coordinator
    if (s.inFlight) {
      if (await s.tryCommit()) {
        lastCheckpoint = step;
        // what a commit collects now and then: deltas no retained checkpoint needs, old records
        if (stalls && s.rand() < stalls.gcP) await s.coord.gc();
      } else if (step - s.inFlight.since > sc.abortAfter) {
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
    if (stalls && stalled.length < stalls.maxStalled && s.rand() < stalls.startP) {
      const near = pending.filter((p) => s.barrierAhead(p.stage, p.shardId, sc.maxBatch));
      if (near.length && s.rand() < 0.5) ({ stage, shardId } = s.pick(near));
      const z = await StalledZombie.start(s, stage, shardId, 1 + Math.floor(s.rand() * stalls.maxGate));
      if (z) stalled.push(z);
    } else if (s.rand() < sc.zombieP) {
      // zombies around barriers: where a takeover meets a snapshot
      const near = pending.filter((p) => s.barrierAhead(p.stage, p.shardId, sc.maxBatch));
      if (near.length && s.rand() < 0.7) ({ stage, shardId } = s.pick(near));
      const z = zombieKind(s);
      await zombie(s, stage, shardId, z.gateA, z.gateB, z.releaseAFirst);
    } else {
      await s.esmStep(stage, shardId, { redeliverP: sc.redeliverP });
    }
  }
  // woken at the latest before the end (in the order they stalled)
  for (let z = stalled.shift(); z && !s.errors.length; z = stalled.shift()) {
    await z.wake();
    woken.push(z);
  }
  while (s.produced.length < sc.records) s.produce();
  if (!s.errors.length) await s.finish();
  if (!s.errors.length) for (const z of woken) z.checkReemitted();
  return s;
}

export interface ZombieSchedule {
  gateA: number;
  gateB: number | undefined;
  releaseAFirst: boolean;
}

/**
 * Zombie schedules except the one that hits the stale-takeover bug (B blocked right before its
 * takeOver while A publishes a snapshot): gate B before its first call, or past its takeover.
 */
export function safeZombie(s: Sim): ZombieSchedule {
  const gateA = 1 + Math.floor(s.rand() * 14);
  const r = s.rand();
  const gateB = r < 0.5 ? undefined : r < 0.6 ? 0 : 2 + Math.floor(s.rand() * 10);
  return { gateA, gateB, releaseAFirst: s.rand() < 0.5 };
}

/** The retry B read the lease and blocks before takeOver; A, still running, goes on first. */
export function staleTakeoverZombie(s: Sim): ZombieSchedule {
  return { gateA: 2 + Math.floor(s.rand() * 14), gateB: 1, releaseAFirst: true };
}

/**
 * Zombies that stall for long (StalledZombie): per step, one starts with `startP` (up to
 * `maxStalled` at once, blocked at one of its first `maxGate` port calls) and one is woken with
 * `wakeP`; after a commit the coordinator collects garbage with `gcP`.
 */
export interface StallPlan {
  startP: number;
  wakeP: number;
  maxStalled: number;
  maxGate: number;
  gcP: number;
}

export const stallPlan: fc.Arbitrary<StallPlan> = fc.record({
  startP: fc.constantFrom(0.02, 0.05, 0.15),
  wakeP: fc.constantFrom(0.003, 0.01, 0.05),
  maxStalled: fc.integer({ min: 1, max: 3 }),
  maxGate: fc.constantFrom(4, 10, 20),
  gcP: fc.constantFrom(0, 0.5, 1),
});
