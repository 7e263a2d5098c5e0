/**
 * Targeted chaos tests for three faults of the environment around the job: coordinator
 * environments whose wall clocks disagree, the source stream resharded by someone else while the
 * job runs, and an endpoint that is unreachable for a while and then answers with its data intact.
 * Each names the mechanisms that handle its fault; the fault table of docs/guarantees.md says what
 * each test did with its mechanism removed. The three run side by side on one set of emulators.
 */
import { DescribeStreamSummaryCommand, MergeShardsCommand, SplitShardCommand } from '@aws-sdk/client-kinesis';
import { describe, expect, it } from 'vitest';
import type { LocalEmulators } from '../../local/emulators.js';
import { useEmulators } from '../emulators-fixture.js';
import { LocalJobRunner } from '../../local/runner.js';
import { chaosHooks, FaultSchedule, type ChaosHooks } from '../../local/chaos/faults.js';
import { listAllShards } from '../../shared/adapters/aws/kinesis.js';
import { collectSink, job, type Job, type KeyedProcessFunction } from '../../shared/api/index.js';
import { CHAOS_CHECKPOINT_TIMEOUT_MS, CHAOS_INVOCATION_TIMEOUT_MS, runSeed, type SeedResult } from './harness.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Tick {
  readonly user: string;
  readonly seq: number;
}
interface Seen extends Tick {
  /** the processing time the keyed function saw for the record */
  readonly pt: number;
}

/** source (2 shards) → keyBy(user) → each record with the processing time its function saw. */
function processingTimeJob(): Job {
  const seen: KeyedProcessFunction<string, Tick, Seen> = {
    processElement(t, ctx, out) {
      out.collect({ ...t, pt: ctx.timerService.currentProcessingTime() });
    },
  };
  const j = job('skewed', { maxParallelism: 16, checkpoint: { intervalMs: 300, timeoutMs: CHAOS_CHECKPOINT_TIMEOUT_MS, retained: 2 } });
  j.source<Tick>({ name: 'ticks', shards: 2 })
    .keyBy((t) => t.user, { parallelism: 2 })
    .process(seen, { name: 'seen' })
    .sinkTo(collectSink<Seen>('seen'));
  return j;
}

interface SkewOutcome {
  readonly produced: number;
  readonly seen: Seen[];
  readonly skewed: number;
  /** a barrier was injected with an earlier time than one injected before it */
  readonly barrierWentBack: boolean;
}

/** The processing-time job with nearly every coordinator task in an environment whose clock is off by up to ±3 s. */
async function skewedRun(emulators: LocalEmulators): Promise<SkewOutcome> {
  const schedule = new FaultSchedule({ seed: 41, rates: { 'clock-skew': 0.9 } });
  // the time each inject task's clock read at its start: about the time its barrier carries
  const injected: number[] = [];
  const wentBack = () => injected.some((t, i) => i > 0 && t < Math.max(...injected.slice(0, i)) - 100);
  /*
   * A barrier goes back only when two injections' skews differ by more than the time between them,
   * and on a loaded machine injections are seconds apart: the schedule's skews alone may never make
   * one. So if none went back by the fourth injection, that one's clock reads a second before the
   * latest time injected so far (once; the schedule's skews go on around it).
   */
  let forceBack = false;
  let forced = false;
  const clock = (): Date => {
    const t = hooks.options.coordinatorClock!();
    return forceBack ? new Date(Math.min(t.getTime(), Math.max(...injected) - 1_000)) : t;
  };
  const hooks: ChaosHooks = chaosHooks(schedule, {
    invocationTimeoutMs: CHAOS_INVOCATION_TIMEOUT_MS,
    checkpointTimeoutMs: CHAOS_CHECKPOINT_TIMEOUT_MS,
    clockSkewMaxMs: 10_000,
    beforeCoordinatorTask: async (input) => {
      forceBack = false;
      if (input.action !== 'inject') return;
      if (!forced && injected.length >= 3 && !wentBack()) forceBack = forced = true;
      injected.push(clock().getTime());
    },
    afterCoordinatorTask: async () => {
      forceBack = false;
    },
  });
  const runner = await LocalJobRunner.start(processingTimeJob(), {
    emulators,
    prefix: 'skew',
    environments: 2,
    checkpointIntervalMs: 300,
    seed: 41,
    batchSize: 10,
    ...hooks.options,
    coordinatorClock: clock,
  });
  hooks.attach(runner);
  let produced = 0;
  try {
    const users = ['u0', 'u1', 'u2', 'u3'];
    // records keep coming until a barrier went back in time, and two more checkpoints after it (90 s at most)
    const until = Date.now() + 90_000;
    let after = 0;
    for (let burst = 0; burst < 6 || (after < 2 && Date.now() < until); burst++) {
      if (wentBack()) after++;
      const batch = Array.from({ length: 8 }, (_, i) => ({ user: users[i % users.length]!, seq: burst * 2 + Math.floor(i / users.length) }));
      await runner.produce('ticks', batch, { partitionKey: (t) => (t as Tick).user });
      produced += batch.length;
      await sleep(500);
    }
    schedule.enabled = false;
    await runner.awaitCheckpoints(2, new Date(Date.now() + 3_000), 120_000);
    return { produced, seen: runner.collected.published<Seen>('seen'), skewed: schedule.counts.get('clock-skew') ?? 0, barrierWentBack: wentBack() };
  } finally {
    await runner.stop();
    await hooks.dispose();
  }
}

interface ReshardOutcome {
  readonly produced: number;
  readonly seen: Seen[];
  /** the checkpoint whose injection the reshard came before (its barrier went out after it) */
  readonly reshardedAt: number | undefined;
  readonly completedAfter: number;
}

interface ReshardRun {
  readonly seed: number;
  readonly prefix: string;
  readonly users: number;
  /** records per burst */
  readonly perBurst: number;
  /** what someone outside the job does to the source stream before the armed injection */
  readonly reshard: (runner: LocalJobRunner, checkpointId: number, stream: string, burst: (n: number) => Promise<void>) => Promise<void>;
}

/**
 * The processing-time job; once a checkpoint completed, the next checkpoint's injection is preceded
 * once by `reshard` (the stream ACTIVE again after it); bursts of records keep coming meanwhile, and
 * the run ends once two checkpoints started after the bursts completed.
 */
async function reshardBeforeInjectRun(emulators: LocalEmulators, o: ReshardRun): Promise<ReshardOutcome> {
  const schedule = new FaultSchedule({ seed: o.seed, rates: {} });
  let armed = false;
  let reshardedAt: number | undefined;
  let runner: LocalJobRunner | undefined;
  let produced = 0;
  const users = Array.from({ length: o.users }, (_, i) => `u${i}`);
  const burst = async (n: number) => {
    const batch = Array.from({ length: o.perBurst }, (_, i) => ({ user: users[i % users.length]!, seq: n * 2 + Math.floor(i / users.length) }));
    await runner!.produce('ticks', batch, { partitionKey: (t) => (t as Tick).user });
    produced += batch.length;
  };
  const hooks: ChaosHooks = chaosHooks(schedule, {
    invocationTimeoutMs: CHAOS_INVOCATION_TIMEOUT_MS,
    checkpointTimeoutMs: CHAOS_CHECKPOINT_TIMEOUT_MS,
    beforeCoordinatorTask: async (input) => {
      if (!armed || input.action !== 'inject' || !runner) return;
      armed = false;
      const stream = runner.names.sourceStream(runner.plan.sources[0]!);
      await o.reshard(runner, input.checkpointId, stream, burst);
      while ((await runner.clients.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: stream }))).StreamDescriptionSummary?.StreamStatus !== 'ACTIVE') await sleep(100);
      reshardedAt = input.checkpointId;
    },
  });
  runner = await LocalJobRunner.start(processingTimeJob(), { emulators, prefix: o.prefix, environments: 2, checkpointIntervalMs: 300, seed: o.seed, batchSize: 10, ...hooks.options });
  hooks.attach(runner);
  try {
    await burst(0);
    await runner.awaitCheckpoints(1, new Date(Date.now() - 60_000), 120_000);
    armed = true;
    for (let n = 1; n < 8; n++) {
      await burst(n);
      await sleep(300);
    }
    const after = new Date();
    await runner.awaitCheckpoints(2, after, 90_000);
    return { produced, seen: runner.collected.published<Seen>('seen'), reshardedAt, completedAfter: (await runner.coordinator.list()).filter((c) => c.status === 'COMPLETED' && Date.parse(c.startedAt) > after.getTime()).length };
  } finally {
    await runner.stop();
    await hooks.dispose();
  }
}

/**
 * The next checkpoint's first injection fixes its topology (two source shards), marks it injected
 * and dies before its barriers; someone merges the two shards, and the retried injection reaches
 * only the merged shard: the closed shards never send that barrier.
 */
const mergedBeforeInjectRun = (emulators: LocalEmulators) =>
  reshardBeforeInjectRun(emulators, {
    seed: 43,
    prefix: 'mergeinj',
    users: 6,
    perBurst: 12,
    reshard: async (runner, n, stream) => {
      // the first injection's writes, as a task that died right after them (before its barriers) left them
      const { store } = runner.coordinator.ports;
      const ck = (await store.getCheckpoint(n))!;
      const fixed = (await store.fixInjection(n, { members: (await store.membersOf(n))!, topology: ck.topology }))!;
      await store.markInjected(n, fixed.listing);
      const [a, b] = (await listAllShards(runner.clients, stream)).filter((x) => x.endingSequenceNumber === undefined);
      await runner.clients.kinesis.send(new MergeShardsCommand({ StreamName: stream, ShardToMerge: a!.shardId, AdjacentShardToMerge: b!.shardId }));
    },
  });

/**
 * Someone splits one of the two source shards between the allocate of the next checkpoint (which
 * counts two source shards) and its inject (which reaches three), and records go into the children
 * before the barrier: an inner instance that aligned the barrier before the third shard sent it
 * would drop that shard's records.
 */
const splitBeforeInjectRun = (emulators: LocalEmulators) =>
  reshardBeforeInjectRun(emulators, {
    seed: 47,
    prefix: 'splitinj',
    users: 8,
    perBurst: 16,
    reshard: async (runner, _n, stream, burst) => {
      const [parent] = (await listAllShards(runner.clients, stream)).filter((x) => x.endingSequenceNumber === undefined);
      const middle = ((BigInt(parent!.startingHashKey) + BigInt(parent!.endingHashKey)) / 2n).toString();
      await runner.clients.kinesis.send(new SplitShardCommand({ StreamName: stream, ShardToSplit: parent!.shardId, NewStartingHashKey: middle }));
      while ((await runner.clients.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: stream }))).StreamDescriptionSummary?.StreamStatus !== 'ACTIVE') await sleep(100);
      // records of the epoch before the barrier, in both children
      await burst(100);
    },
  });

const oneKind = (s: number, kind: 'source-resharded-outside' | 'endpoint-outage', emulators: LocalEmulators) =>
  runSeed(s, emulators, { onlyKind: kind, variant: 'two-stage', rescale: false, records: 60, job: { sourceShards: 2, innerShards: 2 }, prefixTag: '-fk' });

const summary = (r: SeedResult) => `seed ${r.seed}: ${[...r.faults].map(([k, n]) => `${k}=${n}`).join(' ')} observed ${[...r.observed].map(([k, n]) => `${k}=${n}`).join(' ')}`;

// the three run side by side (each on its own resources)
describe.concurrent('chaos: clock skew, a source resharded outside the job, an endpoint outage', () => {
  const emulators = useEmulators();

  it('clock skew: processing time only moves forward at an instance (a barrier carrying an older coordinator time is ignored), and every record is seen once', async () => {
    const skew = await skewedRun(emulators());
    expect(skew.skewed).toBeGreaterThan(0);
    expect(skew.barrierWentBack).toBe(true);
    const byRecord = new Map<string, number>();
    for (const s of skew.seen) byRecord.set(`${s.user}#${s.seq}`, (byRecord.get(`${s.user}#${s.seq}`) ?? 0) + 1);
    expect([...byRecord.values()].filter((n) => n !== 1)).toEqual([]);
    expect(byRecord.size).toBe(skew.produced);
    // per key, in input order, the processing time the function saw never went back
    const backwards: string[] = [];
    for (const user of new Set(skew.seen.map((s) => s.user))) {
      const mine = skew.seen.filter((s) => s.user === user).sort((a, b) => a.seq - b.seq);
      for (let i = 1; i < mine.length; i++) if (mine[i]!.pt < mine[i - 1]!.pt) backwards.push(`${user}#${mine[i]!.seq}: ${mine[i - 1]!.pt} → ${mine[i]!.pt}`);
    }
    expect(backwards).toEqual([]);
  }, 240_000);

  it('a source resharded outside the job: each child rebuilds its parents’ final state (shard inheritance) — nothing lost, duplicated or mismatched', async () => {
    const reshard = await oneKind(3, 'source-resharded-outside', emulators());
    console.log(`fault-kinds ${summary(reshard)}`);
    expect(reshard.faults.get('source-resharded-outside') ?? 0).toBeGreaterThan(0);
    expect(reshard.error).toBeUndefined();
    expect(reshard.verdict.problems).toEqual([]);
    expect({ lost: reshard.verdict.lost, duplicated: reshard.verdict.duplicated, mismatched: reshard.verdict.mismatched }).toEqual({ lost: 0, duplicated: 0, mismatched: 0 });
    expect(reshard.live).toBe(true);
  }, 240_000);

  it('source shards merged outside the job after a checkpoint’s first injection fixed its topology, before its barrier went out: the closed shards never send that barrier, later checkpoints still complete (hash-range alignment, or `superseded` where producers are counted: either one alone passes), and every record is seen once', async () => {
    const merged = await mergedBeforeInjectRun(emulators());
    expect(merged.reshardedAt).toBeGreaterThan(1);
    expect(merged.completedAfter).toBeGreaterThanOrEqual(2);
    const byRecord = new Map<string, number>();
    for (const s of merged.seen) byRecord.set(`${s.user}#${s.seq}`, (byRecord.get(`${s.user}#${s.seq}`) ?? 0) + 1);
    expect([...byRecord.values()].filter((n) => n !== 1)).toEqual([]);
    expect(byRecord.size).toBe(merged.produced);
  }, 240_000);

  it('a source shard split outside the job between a checkpoint’s allocate and its inject: inner instances wait for the barrier of every child (hash-range alignment, or the topology the first injection fixes where producers are counted: either one alone passes), and every record is seen once', async () => {
    const split = await splitBeforeInjectRun(emulators());
    expect(split.reshardedAt).toBeGreaterThan(1);
    expect(split.completedAfter).toBeGreaterThanOrEqual(2);
    const byRecord = new Map<string, number>();
    for (const s of split.seen) byRecord.set(`${s.user}#${s.seq}`, (byRecord.get(`${s.user}#${s.seq}`) ?? 0) + 1);
    expect([...byRecord.values()].filter((n) => n !== 1)).toEqual([]);
    expect(byRecord.size).toBe(split.produced);
  }, 240_000);

  it('an endpoint outage: SDK retries, the mapping’s retry of the failed batch, and an instance restored from its lease that replays its shard up to the batch — nothing lost, duplicated or mismatched', async () => {
    const outage = await oneKind(14, 'endpoint-outage', emulators());
    console.log(`fault-kinds ${summary(outage)}`);
    expect(outage.faults.get('endpoint-outage') ?? 0).toBeGreaterThan(0);
    expect(outage.error).toBeUndefined();
    expect(outage.verdict.problems).toEqual([]);
    expect({ lost: outage.verdict.lost, duplicated: outage.verdict.duplicated, mismatched: outage.verdict.mismatched }).toEqual({ lost: 0, duplicated: 0, mismatched: 0 });
    expect(outage.live).toBe(true);
    // the outage reached the engine: invocations failed and were retried
    expect(outage.observed.get('InvocationErrors') ?? 0).toBeGreaterThan(0);
  }, 240_000);
});
