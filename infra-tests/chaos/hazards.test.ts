/**
 * Targeted chaos tests: one per hazard of the protocol (docs/guarantees.md) (the comment on each names it). Each drives the
 * chaos job on the emulated stack with faults aimed at one mechanism and checks the result against
 * the oracle; each was also run against a copy of the engine with that mechanism removed, and failed
 * there (noted as "without it").
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { useEmulators } from '../emulators-fixture.js';
import type { CheckpointRecord } from '../../shared/coordinator/coordinator.js';
import { ChaosCrash, FaultSchedule, trimmedReplayFault, type FaultKind } from '../../local/chaos/faults.js';
import { CHAOS_CHECKPOINT_TIMEOUT_MS, ChaosRun, inputRecord, runSeed, seedLine, type ChaosOptions, type SeedResult } from './harness.js';
import { OUTPUTS_SINK, type ChaosOutput } from './job.js';
import { expectCleanSeed } from './expect-seed.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function expectFired(r: SeedResult, ...kinds: FaultKind[]): void {
  for (const k of kinds) expect(r.faults.get(k) ?? 0, `${k} never fired: ${seedLine(r)}`).toBeGreaterThan(0);
}

describe('chaos: the protocol\'s hazards on the emulated stack', () => {
  const emulators = useEmulators();
  const seed = (n: number, o: Omit<ChaosOptions, 'seeds' | 'emulators'>) => runSeed(n, emulators(), { prefixTag: '-hz', records: 80, ...o });

  // §6 "two environments processing the same shard (a timed-out invocation still running)".
  // Zombies stall right before making their snapshot the lease's current one, for longer than the
  // invocation timeout; the ESM retries the batch in another environment, which takes the lease over
  // and goes on checkpointing. The zombie's pointer write must be refused. Without the fence
  // condition on lease writes, the zombie's older pointer replaces the newer owner's: a later restore
  // mixes rows of two checkpoints (wrong sums), or names a delta already garbage-collected (stall).
  it('a zombie that finishes after a takeover is fenced', async () => {
    const r = await seed(301, {
      variant: 'two-stage',
      records: 100,
      input: { bursts: 10, gapMs: 1_500, keys: 4 },
      rates: { zombie: 0.3, 'env-recycled': 0.3 },
      // the keyed stage: its snapshots hold the running sums
      hookOptions: { zombieStages: ['s1'], zombiePoints: ['publishSnapshot'], zombieOverrunMs: 5_000 },
    });
    expectCleanSeed(r);
    expectFired(r, 'zombie');
    expect(r.observed.get('fenced-write-rejected') ?? 0, seedLine(r)).toBeGreaterThan(0);
  }, 240_000);

  // A lost response: a PutRecords call or a conditional DynamoDB write is applied, its response is
  // lost, and the SDK sends the same request again. The PutRecords entries land twice on the keyed
  // stage's stream, under the same (producer, epoch, seq): the keyed stage's dedupe set drops the
  // second copies. A conditional write's retry that meets its own earlier write knows it by its write
  // token and succeeds (lost-response.test.ts). Without the dedupe set: every
  // re-sent record is counted twice (duplicated outputs, wrong sums).
  it('a lost response re-sent by the SDK: PutRecords entries land twice and the dedupe set by (producer, epoch, seq) drops the copies', async () => {
    const r = await seed(311, { variant: 'two-stage', records: 80, input: { bursts: 6, gapMs: 600, keys: 4 }, rates: { 'lost-response': 0.3 } });
    expectCleanSeed(r);
    expectFired(r, 'lost-response');
    expect(r.observed.get('lost-response:PutRecordsCommand') ?? 0, seedLine(r)).toBeGreaterThan(0);
  }, 240_000);

  // §6 "a PutRecords call with partial failure (retried records land after later ones, or after the
  // barrier)". Large records make one batch of the source stage fill two packets for the keyed
  // stage's shard; the barrier travels in the second. The coordinator's next barrier is held back
  // until the batch is in the shard, so it lands in the same ESM batch; then the first packet's
  // PutRecords entry fails and the second (with the barrier) lands first. The barrier's count makes
  // the keyed stage wait for the retried packet. Without barrier counts, the snapshot is taken early
  // and the late records (an older epoch) are dropped: 5 lost.
  it('a PutRecords partial failure right before a barrier still aligns (barrier counts)', async () => {
    let holdAllocate = false;
    let blocked = false;
    let release: () => void = () => undefined;
    let released = Promise.resolve();
    const s = 302;
    const schedule = new FaultSchedule({ seed: s, rates: { 'putrecords-partial-barrier': 1 }, ensure: false });
    const tiny = inputRecord({ id: `c${s}-00000`, key: 'k0', value: 1 }, 'one');
    const run = await ChaosRun.start({
      seed: s,
      emulators: emulators(),
      variant: 'two-stage',
      prefix: `chaos-${s}-hz`,
      job: { sourceShards: 1, innerShards: 1 },
      schedule,
      hookOptions: {
        // the case is a barrier met at the tail (an idle shard's, or one whose source missed the
        // announcement): the source sees no announcement here, else barrier n goes out at its read
        // position, right after the tiny record, and shares no call with the large ones
        clientFault: (service, cmd) => {
          const input = (cmd as { input?: { Key?: { sk?: unknown }; TableName?: string } }).input;
          if (service === 'doc' && cmd instanceof GetCommand && input?.Key?.sk === 'source-barriers') {
            return new GetCommand({ TableName: input.TableName, Key: { pk: 'coordinator', sk: 'no-announcement' } });
          }
        },
        // the batch holding only the tiny record is slow: the large ones and the barrier queue behind it
        slowHandlerMs: (stage, ev) => (stage === 's0' && ev.Records.length === 1 && Buffer.from(ev.Records[0]!.kinesis.data, 'base64').toString().includes(`c${s}-00000`) ? 6_000 : 0),
        beforeCoordinatorTask: async (input) => {
          if (input.action !== 'allocate' || !holdAllocate) return;
          blocked = true;
          await released;
          blocked = false;
        },
      },
      runnerOptions: { environments: 1, recycleProbability: 0, batchSize: 100 },
    });
    try {
      await run.runner.awaitCheckpoints(1, new Date(0), 90_000);
      holdAllocate = true;
      released = new Promise<void>((res) => (release = res));
      for (let i = 0; !blocked; i++) {
        if (i > 600) throw new Error('the coordinator never came back to allocate');
        await sleep(50);
      }
      await run.produce([tiny]);
      await sleep(400);
      // 6 × 110 KB: the source stage's outbox closes a 512 KB packet after the fifth
      await run.produce(Array.from({ length: 6 }, (_, i) => inputRecord({ id: `c${s}-${String(i + 1).padStart(5, '0')}`, key: 'k0', value: i + 2, pad: 110_000 }, 'one')));
      holdAllocate = false;
      release();
      const deadline = Date.now() + 60_000;
      while (!schedule.observed.get('entries-before-barrier-failed') && Date.now() < deadline) await sleep(200);
      expect(schedule.observed.get('entries-before-barrier-failed') ?? 0, 'the barrier never shared a PutRecords call with earlier packets of its shard').toBeGreaterThan(0);
      const since = run.faultsOff();
      const q = await run.quiet(since, 90_000);
      const v = await run.verdict();
      const msg = JSON.stringify({ q, verdict: v.verdict, observed: [...schedule.observed] });
      expect(q.live, msg).toBe(true);
      expect(v.verdict.lost, msg).toBe(0);
      expect(v.verdict.duplicated, msg).toBe(0);
      expect(v.verdict.mismatched, msg).toBe(0);
      expect(v.verdict.outputs, msg).toBe(7);
    } finally {
      release();
      await run.stop();
    }
  }, 240_000);

  // §6 "a crash between writing state rows and writing the manifest". The engine writes the delta,
  // then points the lease at it, then applies the rows; crashes hit after the delta (the pointer
  // still names the previous snapshot) and in the middle of the apply (rows of n and n-1 mixed).
  // Recovery must restore exactly one checkpoint: redo the pointed-at delta, then read rows. Without
  // the redo, a restore after a mid-apply crash reads a mix and the running sums go wrong.
  it('a crash between delta and pointer, or mid-apply, restores exactly one checkpoint', async () => {
    const r = await seed(303, {
      variant: 'two-stage',
      input: { keys: 3 },
      rates: { 'crash-after-delta': 0.3, 'crash-mid-apply': 0.4, 'env-recycled': 0.3 },
    });
    expectCleanSeed(r);
    expectFired(r, 'crash-after-delta', 'crash-mid-apply');
  }, 240_000);

  // §6 "a coordinator that dies between COMPLETED and the sink commit". The fault marks the
  // checkpoint COMPLETED and returns without publishing (as if a new execution took over without
  // retrying the commit). The next commit must publish every unpublished epoch below it; publishing
  // only epoch n-1 at commit n loses the skipped epochs' outputs.
  it('a coordinator that dies between COMPLETED and the commit: a later commit publishes every epoch below it', async () => {
    const r = await seed(304, { variant: 'three-stage', rates: { 'coordinator-skips-commit': 0.5 } });
    expectCleanSeed(r);
    expectFired(r, 'coordinator-skips-commit');
  }, 240_000);

  // §4 (abort) and §6 "an idle shard while a checkpoint waits on it": the coordinator's inject
  // reaches one source shard and fails; the workflow aborts the checkpoint, and the abort must still
  // deliver barrier n to every source shard. Without that, the shard that missed barrier n never
  // sends it downstream and no later checkpoint aligns (liveness).
  it('a coordinator failing mid-injection: the abort still delivers the barrier everywhere', async () => {
    const r = await seed(305, { variant: 'two-stage', job: { sourceShards: 2 }, rates: { 'coordinator-partial-inject': 0.5, 'coordinator-task-failure': 0.15 } });
    expectCleanSeed(r);
    expectFired(r, 'coordinator-partial-inject');
    expect(r.checkpoints.aborted, seedLine(r)).toBeGreaterThan(0);
  }, 240_000);

  // §4: "A timeout aborts n (the next checkpoint covers its data)" — acks delayed past the
  // checkpoint timeout, and acks lost with the invocation that should have sent them (the restored
  // instance acks its snapshot again; the ack set makes that idempotent). Aborted checkpoints must
  // not lose or duplicate anything, and later checkpoints must complete.
  it('checkpoint timeouts abort; later checkpoints cover their data', async () => {
    const r = await seed(306, { variant: 'three-stage', rates: { 'slow-ack': 0.15, 'crash-before-ack': 0.1 } });
    expectCleanSeed(r);
    expectFired(r, 'slow-ack', 'crash-before-ack');
    expect(r.checkpoints.aborted, seedLine(r)).toBeGreaterThan(0);
  }, 240_000);

  // §6 "an idle shard while a checkpoint waits on it". Every record goes to one source shard and
  // one key (one shard of the keyed stage): the other shard of each stream sees only barriers, and
  // checkpoints must still complete (barriers are records; an idle shard still checkpoints).
  it('idle shards still checkpoint', async () => {
    const r = await seed(307, {
      variant: 'three-stage',
      job: { sourceShards: 2, innerShards: 2 },
      input: { partitioning: 'single', keys: 1, poisonRate: 0 },
      rates: { 'env-recycled': 0.2 },
    });
    expectCleanSeed(r);
    expect(r.checkpoints.completed, seedLine(r)).toBeGreaterThanOrEqual(3);
  }, 240_000);

  // §6 "an empty source stream": no record at all, only barriers; checkpoints complete and the sinks
  // stay empty.
  it('an empty source stream still completes checkpoints', async () => {
    const run = await ChaosRun.start({ seed: 308, emulators: emulators(), variant: 'three-stage', prefix: 'chaos-308-hz' });
    try {
      const q = await run.quiet(new Date(), 90_000, 3);
      const v = await run.verdict();
      expect(q.live, JSON.stringify(q)).toBe(true);
      expect(v.verdict.outputs).toBe(0);
      expect(v.verdict.problems).toEqual([]);
    } finally {
      await run.stop();
    }
  }, 180_000);

  // §6 "BatchWriteItem returning UnprocessedItems; throttling (ProvisionedThroughputExceeded)
  // anywhere". Throttling errors from DynamoDB, Kinesis and S3 before a call is sent, and BatchGetItem
  // answering only part of its keys. Everything is retried, nothing dropped: an adapter that swallowed
  // a throttle, or a state read that ignored UnprocessedKeys, would lose updates or state.
  it('throttling anywhere is retried, never dropped; UnprocessedKeys are read again', async () => {
    const r = await seed(309, {
      variant: 'two-stage',
      // data all along the fault phase and frequent restores: state reads of keys that have rows
      input: { bursts: 8, gapMs: 1_000, keys: 3 },
      rates: { 'throttle-dynamodb': 0.08, 'throttle-kinesis': 0.08, 'throttle-s3': 0.4, 'unprocessed-keys': 0.8, 'env-recycled': 0.5 },
    });
    expectCleanSeed(r);
    expectFired(r, 'throttle-dynamodb', 'throttle-kinesis', 'throttle-s3', 'unprocessed-keys');
  }, 240_000);

  // §6 "an ESM retry of a half-processed batch (outputs already written, state not flushed)".
  // Writes succeed and then the invocation dies, whole batches succeed and are delivered again,
  // state reads fail before any update. The retries re-emit the same ids with the same content;
  // dedupe by (producer, epoch, seq) must drop them. Without dedupe, outputs are duplicated.
  it('an ESM retry of a half-processed batch adds nothing twice', async () => {
    const r = await seed(310, {
      variant: 'three-stage',
      rates: { 'crash-after-emit': 0.2, 'duplicate-delivery': 0.2, 'crash-before-state-update': 0.1, 'env-recycled': 0.2 },
    });
    expectCleanSeed(r);
    expectFired(r, 'crash-after-emit', 'duplicate-delivery', 'crash-before-state-update');
  }, 240_000);

  // §4 "allocate n (conditional write: at most one checkpoint in flight)" and liveness: the
  // coordinator's Allocate fails after writing `inFlight = n` (in AWS: its second write throttled
  // past the SDK's retries, a timeout between its writes, a lost response). Allocate has no Catch, so
  // the execution fails with checkpoint n IN_FLIGHT; a new execution is started (the stack's
  // EventBridge rule; the local runner does the same). Its Allocate must abort the checkpoint left
  // open past its timeout and go on; an allocate that only refuses while `inFlight` is set stops
  // checkpointing for good (found by this test, fixed in 793ae52).
  it('a coordinator execution that dies with a checkpoint in flight: the next execution aborts it and goes on', async () => {
    let arm = false;
    let fired = 0;
    const s = 312;
    const run = await ChaosRun.start({
      seed: s,
      emulators: emulators(),
      variant: 'two-stage',
      prefix: `chaos-${s}-hz`,
      hookOptions: {
        afterCoordinatorTask: async (input) => {
          if (!arm || input.action !== 'allocate') return;
          arm = false;
          fired++;
          throw new ChaosCrash('coordinator-task-failure', 'allocate, after writing inFlight');
        },
      },
    });
    const rec = (i: number) => inputRecord({ id: `c${s}-${String(i).padStart(5, '0')}`, key: `k${i % 3}`, value: 1 + (i % 5) }, `pk-${i}`);
    try {
      await run.produce(Array.from({ length: 20 }, (_, i) => rec(i)));
      await run.runner.awaitCheckpoints(1, new Date(0), 90_000);
      arm = true;
      for (let i = 0; !fired; i++) {
        if (i > 600) throw new Error('Allocate never ran again');
        await sleep(50);
      }
      const left = (await run.checkpoints()).at(-1)!;
      await run.produce(Array.from({ length: 20 }, (_, i) => rec(20 + i)));
      const since = run.faultsOff();
      // the restarted execution waits the stale checkpoint's timeout out before it can allocate
      const q = await run.quiet(since, 2 * CHAOS_CHECKPOINT_TIMEOUT_MS + 90_000);
      const v = await run.verdict();
      const after = (await run.checkpoints()).find((c) => c.checkpointId === left.checkpointId);
      const msg = JSON.stringify({ q, left, after, verdict: v.verdict });
      expect(q.live, msg).toBe(true);
      expect(after?.status, msg).toBe('ABORTED');
      expect(v.verdict.lost + v.verdict.duplicated + v.verdict.mismatched, msg).toBe(0);
      expect(v.verdict.outputs, msg).toBe(40);
    } finally {
      await run.stop();
    }
  }, 240_000);

  // The hazard "a crash between 'n is open' and 'n's record exists'". Allocate opens n in the
  // coordinator's state, then writes n's record; it dies in between (a Lambda timeout; on AWS also an
  // SDK retry of the first write that fails its own condition). The next allocate finds n open with
  // no record and aborts it: barrier n must still reach every source shard, or inner instances wait
  // for barrier n forever while sources go on to n+1. Without the record written for the abort
  // (the idempotent allocate sequence), every later checkpoint aborts with 2 of 4 acks.
  it('allocate dying between its two writes: barrier n is still delivered and checkpoints complete again (idempotent allocate)', async () => {
    let arm = false;
    let fired = 0;
    const s = 314;
    const run = await ChaosRun.start({
      seed: s,
      emulators: emulators(),
      variant: 'two-stage',
      prefix: `chaos-${s}-hz`,
      hookOptions: {
        coordinatorWriteCrash: (w) => {
          if (!arm || w.task !== 'allocate' || w.command !== 'UpdateCommand') return undefined;
          arm = false;
          fired++;
          return 'after'; // the state item says n is open; its record is never written
        },
      },
    });
    const rec = (i: number) => inputRecord({ id: `c${s}-${String(i).padStart(5, '0')}`, key: `k${i % 3}`, value: 1 + (i % 5) }, `pk-${i}`);
    try {
      await run.produce(Array.from({ length: 20 }, (_, i) => rec(i)));
      await run.runner.awaitCheckpoints(1, new Date(0), 90_000);
      arm = true;
      for (let i = 0; !fired; i++) {
        if (i > 600) throw new Error('Allocate never ran again');
        await sleep(50);
      }
      await run.produce(Array.from({ length: 20 }, (_, i) => rec(20 + i)));
      const since = run.faultsOff();
      const q = await run.quiet(since, 90_000, 3);
      const v = await run.verdict();
      const stall = q.live ? undefined : await run.runner.coordinator.stalled(1);
      const msg = JSON.stringify({ q, stall: stall?.message, verdict: v.verdict });
      expect(q.live, msg).toBe(true);
      expect(v.verdict.lost + v.verdict.duplicated + v.verdict.mismatched, msg).toBe(0);
      expect(v.verdict.outputs, msg).toBe(40);
    } finally {
      await run.stop();
    }
  }, 240_000);

  // §6 "a key whose state outgrows a DynamoDB item (400 KB) — chunk it or spill to S3". The keyed
  // function keeps each key's last 420 KB ballast in its state; snapshots, restores (environments
  // recycled often) and redone applies (crashes mid-apply) must carry it. A state store that wrote the
  // value into the row as is would be refused by DynamoDB (and by dynalite) forever: a stall.
  it('a key whose state outgrows a DynamoDB item still checkpoints and restores', async () => {
    const s = 313;
    const schedule = new FaultSchedule({ seed: s, rates: { 'env-recycled': 0.5, 'crash-mid-apply': 0.3, 'crash-after-delta': 0.2 } });
    const run = await ChaosRun.start({
      seed: s,
      emulators: emulators(),
      variant: 'two-stage',
      prefix: `chaos-${s}-hz`,
      schedule,
      job: { keepPadInState: true, sourceShards: 1, innerShards: 1 },
    });
    const rec = (i: number, pad?: number) => inputRecord({ id: `c${s}-${String(i).padStart(5, '0')}`, key: `k${i % 2}`, value: 1 + i, ...(pad ? { pad } : {}) }, 'one');
    try {
      await run.produce([rec(0, 420_000), rec(1), rec(2)]);
      await sleep(1_500);
      await run.produce([rec(3), rec(4, 420_000), rec(5)]);
      await sleep(1_500);
      await run.produce([rec(6), rec(7), rec(8, 420_000), rec(9)]);
      await run.runner.awaitCheckpoints(1, new Date(), 90_000);
      const since = run.faultsOff();
      const q = await run.quiet(since, 90_000);
      const v = await run.verdict();
      const msg = JSON.stringify({ q, verdict: v.verdict, faults: [...schedule.counts] });
      expect(q.live, msg).toBe(true);
      expect(v.verdict.lost + v.verdict.duplicated + v.verdict.mismatched, msg).toBe(0);
      expect(v.verdict.outputs, msg).toBe(10);
    } finally {
      await run.stop();
    }
  }, 240_000);

  // §6 "dirty state larger than the function's memory: clean entries are evicted, dirty ones must go
  // somewhere durable or trigger an earlier checkpoint". With room for 2 dirty keys per instance,
  // every batch moves the excess to the spill store (S3); snapshots take it back into their delta,
  // and environments recycled or crashing mid-flush lose nothing. Without the spill, dirty keys
  // would pile up in memory (the count checked below), a crash loop.
  it('dirty state larger than memory waits in the spill store: bounded memory, nothing lost', async () => {
    const s = 317;
    const schedule = new FaultSchedule({ seed: s, rates: { 'env-recycled': 0.3, 'crash-mid-apply': 0.2, 'crash-after-delta': 0.2 } });
    const run = await ChaosRun.start({
      seed: s,
      emulators: emulators(),
      variant: 'two-stage',
      prefix: `chaos-${s}-hz`,
      schedule,
      job: { sourceShards: 1, innerShards: 1 },
      runnerOptions: { runner: { maxDirtyKeys: 2 } },
    });
    const rec = (i: number) => inputRecord({ id: `c${s}-${String(i).padStart(5, '0')}`, key: `k${i % 23}`, value: 1 + i }, 'one');
    try {
      for (let b = 0; b < 3; b++) {
        await run.produce(Array.from({ length: 40 }, (_, i) => rec(b * 40 + i)));
        await sleep(800);
      }
      await run.runner.awaitCheckpoints(1, new Date(), 90_000);
      const since = run.faultsOff();
      const q = await run.quiet(since, 90_000);
      const v = await run.verdict();
      const spilled = run.runner.telemetry.get('DirtyKeysSpilled');
      const msg = JSON.stringify({ q, verdict: v.verdict, spilled, faults: [...schedule.counts] });
      expect(q.live, msg).toBe(true);
      expect(v.verdict.lost + v.verdict.duplicated + v.verdict.mismatched, msg).toBe(0);
      expect(v.verdict.outputs, msg).toBe(120);
      expect(spilled, msg).toBeGreaterThan(0);
    } finally {
      await run.stop();
    }
  }, 240_000);

  // §6 "a replay point older than the stream's retention (a job stalled > 24 h): fail loudly, never
  // skip silently". Kinesis raises no error for a trimmed position: the iterator starts at the oldest
  // record still retained. Every invocation restores and replays (environments always recycled);
  // while the record each replay starts from reads as trimmed (the stream answers from the record
  // after it), every batch that replays must fail with REPLAY_TRIMMED and nothing after the snapshot
  // may be published. Once the data is readable again the job goes on, and nothing was skipped. A
  // reader that trusted the iterator would replay from whatever came back and never fail: without
  // the check that the first record is the one asked for, no REPLAY_TRIMMED and records lost.
  it('a replay point older than the retention fails loudly (REPLAY_TRIMMED) and skips nothing', async () => {
    let trimmed = false;
    let served = 0;
    const codes = new Map<string, number>();
    const s = 311;
    const run = await ChaosRun.start({
      seed: s,
      emulators: emulators(),
      variant: 'two-stage',
      prefix: `chaos-${s}-hz`,
      hookOptions: { clientFault: trimmedReplayFault(() => trimmed, () => served++) },
      runnerOptions: {
        recycleProbability: 1,
        batchSize: 10,
        onInvocation: (_stage, info) => {
          if (info.outcome !== 'error') return;
          const e = info.error as { code?: string; name?: string };
          const code = e?.code ?? e?.name ?? 'unknown';
          codes.set(code, (codes.get(code) ?? 0) + 1);
        },
      },
    });
    const rec = (i: number) => inputRecord({ id: `c${s}-${String(i).padStart(5, '0')}`, key: `k${i % 3}`, value: 1 + (i % 7) }, `pk-${i}`);
    try {
      await run.produce(Array.from({ length: 20 }, (_, i) => rec(i)));
      await run.runner.awaitCheckpoints(1, new Date(), 90_000);
      trimmed = true;
      for (let b = 0; b < 3; b++) {
        await run.produce(Array.from({ length: 10 }, (_, i) => rec(20 + 10 * b + i)));
        await sleep(300);
      }
      const deadline = Date.now() + 30_000;
      while ((codes.get('REPLAY_TRIMMED') ?? 0) < 3 && Date.now() < deadline) await sleep(200);
      expect(codes.get('REPLAY_TRIMMED') ?? 0, JSON.stringify({ codes: [...codes], served })).toBeGreaterThanOrEqual(3);
      // the window watched: until three more replays have failed and the barriers of a checkpoint
      // after the last completed one are out (it cannot complete while an instance cannot replay)
      const failed = codes.get('REPLAY_TRIMMED')!;
      const completed = (list: CheckpointRecord[]) => list.filter((c) => c.status === 'COMPLETED');
      const lastCompleted = Math.max(...completed(await run.checkpoints()).map((c) => c.checkpointId));
      const watched = async () => (codes.get('REPLAY_TRIMMED') ?? 0) >= failed + 3 && (await run.checkpoints()).some((c) => c.checkpointId > lastCompleted && c.injected);
      for (const until = Date.now() + 30_000; !(await watched()) && Date.now() < until; ) await sleep(200);
      expect(await watched(), JSON.stringify({ codes: [...codes], checkpoints: await run.checkpoints() })).toBe(true);
      const during = run.runner.collected.published<ChaosOutput>(OUTPUTS_SINK).filter((o) => Number(o.id.slice(o.id.indexOf('-') + 1)) >= 20);
      expect(during, 'records after the snapshot were published while the replay could not read').toEqual([]);
      expect(Math.max(...completed(await run.checkpoints()).map((c) => c.checkpointId)), 'a checkpoint completed while an instance could not replay').toBe(lastCompleted);
      trimmed = false;
      const since = run.faultsOff();
      const q = await run.quiet(since, 90_000);
      const v = await run.verdict();
      const msg = JSON.stringify({ q, verdict: v.verdict });
      expect(q.live, msg).toBe(true);
      expect(v.verdict.lost + v.verdict.duplicated + v.verdict.mismatched, msg).toBe(0);
      expect(v.verdict.outputs).toBe(50);
    } finally {
      trimmed = false;
      await run.stop();
    }
  }, 240_000);
});
