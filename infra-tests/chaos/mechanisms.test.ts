/**
 * Targeted end-to-end tests of protocol mechanisms that seeded chaos rarely puts to work: each
 * arranges the one interleaving where the mechanism matters (docs/guarantees.md, "Protocol
 * mechanisms and the end-to-end test that catches each"), on the chaos job, the emulated stack and
 * the real wire, and judges the sinks with the chaos oracle. Each test names its mechanism; each
 * was run once against a copy of the engine without it and failed there (noted as "without it").
 *
 * The zombie-shaped ones share one shape: a zombie of the keyed stage is held at a named write
 * until the new owner has completed a later snapshot (a zombie's late write only does harm then),
 * is released, and an instance is made to restore before anything replaces what the zombie wrote.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { KinesisStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { ChaosCrash, type StalledZombie, type ZombiePoint } from '../../local/chaos/faults.js';
import { DynamoControlStore } from '../../shared/adapters/aws/dynamo-control-store.js';
import { listAllShards } from '../../shared/adapters/aws/kinesis.js';
import { ChaosRun, inputRecord, type InputRecord } from './harness.js';
import { TOTALS_SINK } from './job.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Waits for a condition, polling; fails naming it after a generous bound (never a timing assumption). */
async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(150);
  }
}

/**
 * The invocation timeout of these tests: a zombie must outlive it before the batch is retried
 * elsewhere. Shorter than the harness's (the zombie is held by a condition here, not by time); a
 * slow invocation that runs past it only becomes one more retried batch, which the engine handles.
 */
const INVOCATION_TIMEOUT_MS = 6_000;

describe.concurrent('chaos: protocol mechanisms caught end to end', () => {
  let emulators: LocalEmulators;

  beforeAll(async () => {
    emulators = await startEmulators();
  }, 120_000);

  afterAll(async () => {
    await emulators?.stop();
  });

  /**
   * Two-stage chaos job with one shard per stream. A zombie of the keyed stage (s1) stalls at
   * `point` and is held until s1's lease points at a snapshot taken after the new owner had folded
   * later records of the same keys into its state, and after one more snapshot without them; then
   * it is released, and once its invocation has ended the next s1 invocation runs in a recycled
   * environment (a restore from the lease). Returns the verdict of the whole run.
   */
  async function zombieAheadThenRestore(seed: number, point: ZombiePoint, when: (z: StalledZombie) => boolean) {
    let armed = false;
    let held: StalledZombie | undefined;
    let ended: { z: StalledZombie; error: unknown } | undefined;
    let recycle = false;
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    const run = await ChaosRun.start({
      seed,
      emulators,
      variant: 'two-stage',
      prefix: `chaos-${seed}-mx`,
      job: { sourceShards: 1, innerShards: 1 },
      hookOptions: {
        zombieAt: (stage: string) => (armed && stage === 's1' ? point : undefined),
        zombieWhen: when,
        zombieHold: async (z) => {
          armed = false;
          held = z;
          await released;
        },
        zombieEnded: (z, error) => (ended = { z, error }),
        recycleBefore: (stage: string, _ev: KinesisStreamEvent) => {
          if (stage !== 's1' || !recycle) return false;
          recycle = false;
          return true;
        },
      },
      runnerOptions: { environments: 3, recycleProbability: 0, invocationTimeoutMs: INVOCATION_TIMEOUT_MS },
    });
    const r = run.runner;
    let next = 0;
    // two keys, several records each per step: every step changes both keys' sums
    const step = (): InputRecord[] =>
      Array.from({ length: 4 }, () => {
        const i = next++;
        return inputRecord({ id: `c${seed}-${String(i).padStart(5, '0')}`, key: `k${i % 2}`, value: 1 + (i % 7) }, 'one');
      });
    try {
      const control = new DynamoControlStore(r.clients, r.names.controlTable, r.names.bucket);
      const [shard] = await listAllShards(r.clients, r.names.streamOf(r.plan.stages.find((s) => s.id === 's1')!));
      const s1 = `s1:${shard!.shardId}`;
      const pointedAt = async () => (await control.readLease(s1)).snapshot?.checkpointId ?? 0;

      await run.produce(step());
      await r.awaitCheckpoints(1, new Date(0), 120_000);
      // the keys' records before the zombie's barrier: its snapshot writes their rows
      armed = true;
      await run.produce(step());
      await until(`a zombie of s1 held at ${point}`, () => held !== undefined);
      // the same keys again, taken by the new owner after it took the lease over
      await run.produce(step());
      const covering = await r.awaitCheckpoints(1, new Date(), 180_000);
      const k = Math.max(...covering.map((c) => c.checkpointId));
      // one more snapshot of s1 after the one holding the later rows (its delta has none of them)
      await until(`s1's lease past checkpoint ${k}`, async () => (await pointedAt()) > k);
      const ahead = await pointedAt();
      release();
      await until('the zombie\'s invocation to end', () => ended !== undefined);
      recycle = true;
      await run.produce(step());
      const since = run.faultsOff();
      const q = await run.quiet(since, 120_000);
      const v = await run.verdict();
      const msg = JSON.stringify({
        q,
        zombie: held,
        ahead,
        zombieError: String((ended?.error as Error | undefined)?.message ?? ended?.error),
        verdict: v.verdict,
        observed: [...run.schedule.observed],
      });
      console.log(msg);
      return { q, v, held: held!, ahead, ended: ended!, msg, observed: run.schedule.observed, produced: next };
    } finally {
      release();
      await run.stop();
    }
  }

  // Fence on pointer and position writes (`fence = :fence` in DynamoControlStore). A zombie of the
  // keyed stage stalls right before pointing s1's lease at its snapshot n; the new owner takes the
  // lease over (fence + 1), redoes n, folds later records into the same keys and snapshots past
  // them. The zombie's late pointer (and then its position) must be refused. Without the fence the
  // lease points back at n and its position moves back: the next batch restores n, whose replay
  // reads rows written by a later checkpoint.
  it('fence on pointer and position writes: a zombie\'s late snapshot pointer is refused after the new owner is ahead', async () => {
    const { q, v, held, ahead, msg, observed, produced } = await zombieAheadThenRestore(401, 'publishSnapshot', () => true);
    expect(held.checkpointId, msg).toBeLessThan(ahead);
    expect(q.live, msg).toBe(true);
    expect(v.verdict.lost, msg).toBe(0);
    expect(v.verdict.duplicated, msg).toBe(0);
    expect(v.verdict.mismatched, msg).toBe(0);
    expect(v.verdict.problems, msg).toEqual([]);
    expect(v.verdict.outputs, msg).toBe(produced);
    expect(observed.get('fenced-write-rejected') ?? 0, msg).toBeGreaterThan(0);
    expect(observed.get('recycled-before-invocation') ?? 0, msg).toBeGreaterThan(0);
  }, 300_000);

  // Packed state's "later checkpoint wins" (`item.ckpt > n` in PackedStateStore.plan). A zombie of
  // the keyed stage stalls right before applying its snapshot n's rows to the state table (its
  // pointer is already published, so it is not fenced there); the new owner restores n, folds later
  // records into the same keys, snapshots them at k > n, then once more without them. The zombie's
  // late rows of n must be dropped item by item. Without it they overwrite the later rows; the
  // restore of the lease's snapshot redoes only its own delta (none of those keys), so the keys
  // read back their n values and later sums go wrong.
  it('packed state "later checkpoint wins": a zombie\'s late rows of an older checkpoint leave a later one\'s in place', async () => {
    const { q, v, held, ahead, msg, produced } = await zombieAheadThenRestore(402, 'applyRows', (z) => (z.rows ?? 0) > 0);
    expect(held.checkpointId, msg).toBeLessThan(ahead);
    expect(q.live, msg).toBe(true);
    expect(v.verdict.lost, msg).toBe(0);
    expect(v.verdict.duplicated, msg).toBe(0);
    expect(v.verdict.mismatched, msg).toBe(0);
    expect(v.verdict.problems, msg).toEqual([]);
    expect(v.verdict.outputs, msg).toBe(produced);
  }, 300_000);

  // Later barriers in the replay point (`futureBarriers` in BarrierBook.complete). Two source shards
  // feed the keyed stage's one shard. Source shard 1 is held (a slow invocation) while checkpoint n
  // waits for it; n is aborted at its timeout and n+1 begins, so shard 0, idle, sends barrier n+1
  // on its channel before shard 1's barrier n arrives. Once shard 1 goes on, the keyed instance
  // completes n and snapshots; its invocation then crashes (before the ack), and the retry restores
  // n. Its replay must start no later than shard 0's barrier n+1, which it has not completed yet.
  // Without it the replay starts at the frontier, after that barrier: barrier n+1 of shard 0 is
  // never read again and no checkpoint completes after n.
  // The job runs at-least-once: exactly-once holds shard 0's tick of epoch n back (every source
  // barrier follows one), and a held record pulls the replay point back before barrier n+1 anyway;
  // at-least-once holds nothing, so only the later barrier's position does. The oracle's verdict is
  // read as at-least-once promises: no output lost, checkpoints completing.
  it('later barriers in the replay point: a barrier of the next checkpoint that arrived early is read again after a restore', async () => {
    const seed = 403;
    const held = 'shardId-000000000001';
    let armed = false;
    let holding = false;
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    // the first checkpoint the keyed stage snapshots after shard 1 went on: its ack crashes
    let crashFrom = Number.POSITIVE_INFINITY;
    let crashed: number | undefined;
    const run = await ChaosRun.start({
      seed,
      emulators,
      variant: 'two-stage',
      prefix: `chaos-${seed}-mx`,
      // a short progress window: checkpoint n aborts soon once shard 1 is held
      job: { sourceShards: 2, innerShards: 1, checkpointTimeoutMs: 4_000, mode: 'at-least-once' },
      hookOptions: {
        beforeInvocation: async (stage: string, ev: KinesisStreamEvent) => {
          if (!armed || stage !== 's0' || !ev.Records[0]?.eventID.includes(held)) return;
          armed = false;
          holding = true;
          await released;
          holding = false;
        },
        clientFault: (service, cmd, ctx) => {
          const input = (cmd as { input?: { Key?: { pk?: unknown; sk?: unknown }; UpdateExpression?: string } }).input;
          if (service !== 'doc' || ctx.stage.id !== 's1' || !(cmd instanceof UpdateCommand) || input?.Key?.pk !== 'checkpoint' || !input.UpdateExpression?.startsWith('ADD acks')) return;
          const n = Number(input.Key.sk);
          if (crashed !== undefined || n < crashFrom) return;
          crashed = n;
          throw new ChaosCrash('crash-before-ack', `s1 ack(${n}) right after its snapshot`);
        },
      },
      // the held invocation is not a zombie: it outlasts the abort of checkpoint n
      runnerOptions: { environments: 2, recycleProbability: 0, invocationTimeoutMs: 180_000 },
    });
    const r = run.runner;
    let next = 0;
    const step = (): InputRecord[] =>
      Array.from({ length: 8 }, () => {
        const i = next++;
        return inputRecord({ id: `c${seed}-${String(i).padStart(5, '0')}`, key: `k${i % 3}`, value: 1 + (i % 5) }, `pk-${i}`);
      });
    try {
      const control = new DynamoControlStore(r.clients, r.names.controlTable, r.names.bucket);
      const pointedAt = async (shard: string) => (await control.readLease(`s0:${shard}`)).snapshot?.checkpointId ?? 0;
      const shards = new Set((await run.produce(step())).map((p) => p.shardId));
      expect([...shards].sort(), 'the input reaches both source shards').toEqual(['shardId-000000000000', held]);
      await r.awaitCheckpoints(1, new Date(0), 120_000);
      armed = true;
      await until('source shard 1 held', () => holding);
      // shard 0 snapshots (so forwards) two barriers past the last one shard 1 forwarded
      let gap = { a: 0, b: 0 };
      await until('checkpoint n aborted and shard 0 past barrier n+1', async () => {
        gap = { a: await pointedAt('shardId-000000000000'), b: await pointedAt(held) };
        return gap.a >= gap.b + 2;
      }, 180_000);
      crashFrom = gap.b + 1;
      release();
      await until('the keyed stage\'s ack after its snapshot crashed', () => crashed !== undefined);
      await run.produce(step());
      const since = run.faultsOff();
      const q = await run.quiet(since, 120_000);
      const v = await run.verdict();
      const stall = q.live ? undefined : await r.coordinator.stalled(1);
      const msg = JSON.stringify({ q, gap, crashed, stall: stall?.message, verdict: v.verdict });
      console.log(msg);
      expect(crashed, msg).toBeGreaterThanOrEqual(gap.b + 1);
      // at-least-once's own guarantee: nothing lost and checkpoints go on (a batch failing for
      // another reason on a loaded machine may replay records after a snapshot: duplicates allowed)
      expect(q.live, msg).toBe(true);
      expect(v.verdict.lost, msg).toBe(0);
      expect(v.verdict.outputs, msg).toBeGreaterThanOrEqual(next);
    } finally {
      release();
      await run.stop();
    }
  }, 300_000);

  // Upsert write generations (`#g <= :g` in DynamoUpsertSinkWriter). The keyed stage is rescaled in
  // place (one shard split in two). Between the checkpoint n that announces the reshard and the
  // next one, records of key k0 land first in the parent shard, then (after the split) in a child:
  // all of epoch n. The parent's invocation of its tail stalls before its upsert write (a zombie);
  // its retry writes k0 and ends the parent shard; the child takes k0 over (generation 1) and writes
  // its later total, still in epoch n (the next checkpoint is held back until then). Then the
  // zombie's write of the earlier total arrives: same epoch, another producer, a lower generation —
  // it must lose. Without the generation condition it wins: the row moves back and stays behind.
  it('upsert write generations: a resharded parent\'s zombie write loses to the child\'s later write of the same epoch', async () => {
    const seed = 404;
    const parent = 'shardId-000000000000';
    let armed = false;
    let held: StalledZombie | undefined;
    let ended: { z: StalledZombie; error: unknown } | undefined;
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    let splitAllowed = false;
    let nextAllowed = false;
    let run: ChaosRun | undefined;
    const gate = async (open: () => boolean) => {
      for (let i = 0; !open(); i++) {
        if (i > 1_200) throw new Error('an allocate held past its bound');
        await sleep(150);
      }
    };
    run = await ChaosRun.start({
      seed,
      emulators,
      variant: 'two-stage',
      prefix: `chaos-${seed}-mx`,
      job: { sourceShards: 1, innerShards: 1 },
      hookOptions: {
        zombieAt: (stage: string, ev: KinesisStreamEvent) => (armed && stage === 's1' && ev.Records[0]?.eventID.includes(parent) ? 'upsert' : undefined),
        zombieHold: async (z) => {
          armed = false;
          held = z;
          await released;
        },
        zombieEnded: (z, error) => (ended = { z, error }),
        // the allocate that would split the stream waits for the zombie; the one that would start
        // the next checkpoint (on the new shards) waits for the child's write
        beforeCoordinatorTask: async (input) => {
          if (input.action !== 'allocate' || !run) return;
          const c = run.runner.coordinator;
          const r = await c.rescales.get();
          if (!r || r.phase === 'requested') return;
          if (r.phase === 'draining' && r.checkpointId !== undefined && (await c.get(r.checkpointId))?.status === 'COMPLETED') await gate(() => splitAllowed);
          if (r.phase === 'resharding' || r.phase === 'done') await gate(() => nextAllowed);
        },
      },
      runnerOptions: { environments: 3, recycleProbability: 0, invocationTimeoutMs: INVOCATION_TIMEOUT_MS },
    });
    const r = run.runner;
    let next = 0;
    const step = (count: number): InputRecord[] =>
      Array.from({ length: count }, () => {
        const i = next++;
        return inputRecord({ id: `c${seed}-${String(i).padStart(5, '0')}`, key: 'k0', value: 1 + (i % 7) }, 'one');
      });
    const k0 = async () => (await r.readUpsertSink<{ pk: string; count?: number; _sluice_gen?: number; _sluice_epoch?: number }>(TOTALS_SINK)).find((x) => x.pk === 'k0');
    let rescaling: Promise<unknown> | undefined;
    try {
      run.startMonitor();
      await run.produce(step(4));
      await r.awaitCheckpoints(1, new Date(0), 120_000);
      rescaling = r.rescaleInPlace('s1', 2, { timeoutMs: 240_000 }).catch((err: unknown) => err);
      // checkpoint n announcing the reshard has completed: the split waits
      await until('the reshard announced and its checkpoint completed', async () => {
        const x = await r.coordinator.rescales.get();
        return x?.phase === 'draining' && x.checkpointId !== undefined && (await r.coordinator.get(x.checkpointId))?.status === 'COMPLETED';
      });
      armed = true;
      await run.produce(step(4));
      await until('the parent shard\'s invocation held before its upsert write', () => held !== undefined);
      splitAllowed = true;
      const stream = r.names.streamOf(r.plan.stages.find((s) => s.id === 's1')!);
      await until('the stream split', async () => (await listAllShards(r.clients, stream)).filter((s) => s.endingSequenceNumber === undefined).length === 2);
      await run.produce(step(4));
      await until('the child\'s write of k0 (generation ≥ 1)', async () => ((await k0())?._sluice_gen ?? 0) >= 1, 180_000);
      const child = await k0();
      release();
      await until('the zombie\'s invocation to end', () => ended !== undefined);
      nextAllowed = true;
      const rescaled = await rescaling;
      const since = run.faultsOff();
      const q = await run.quiet(since, 120_000);
      const v = await run.verdict();
      const msg = JSON.stringify({ q, zombie: held, child, rescaled: rescaled instanceof Error ? rescaled.message : 'done', verdict: v.verdict, regressions: v.regressions });
      console.log(msg);
      expect(q.live, msg).toBe(true);
      expect(v.verdict.lost, msg).toBe(0);
      expect(v.verdict.duplicated, msg).toBe(0);
      expect(v.verdict.mismatched, msg).toBe(0);
      expect(v.verdict.problems, msg).toEqual([]);
      expect(v.verdict.outputs, msg).toBe(next);
    } finally {
      splitAllowed = nextAllowed = true;
      release();
      await rescaling;
      await run.stop();
    }
  }, 300_000);
});
