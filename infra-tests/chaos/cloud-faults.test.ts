/**
 * Targeted chaos tests for faults that real clouds make beyond the protocol's crash points: a hard
 * Lambda timeout that abandons an invocation mid-write, SDK calls that hang, a user function that
 * fails for one key forever, a broken KPL aggregate on the source. Each names the mechanism that
 * handles its fault; each was run once with that mechanism removed and failed (noted as "without it").
 */
import { PutRecordsCommand } from '@aws-sdk/client-kinesis';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { useEmulators } from '../emulators-fixture.js';
import { FaultSchedule, type FaultRates } from '../../local/chaos/faults.js';
import { ChaosRun, inputRecord, type InputRecord } from './harness.js';
import { brokenAggregate, kplAggregate } from './kpl.js';
import { SOURCE_NAME, type ChaosJobOptions } from './job.js';
import { idInDeadLetter } from './oracle.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The write that points an instance's lease at its new snapshot (its rows are applied after it). */
const isPointerWrite = (command: object) => command instanceof UpdateCommand && /#snapshot\b/.test(command.input.UpdateExpression ?? '');

describe('chaos: faults real clouds make', () => {
  const emulators = useEmulators();

  /** Starts the chaos job (two stages, faults from `rates` only), produces `bursts` and returns the run. */
  async function start(s: number, rates: FaultRates, extra: { job?: Omit<ChaosJobOptions, 'variant'>; hookOptions?: Parameters<typeof ChaosRun.start>[0]['hookOptions'] } = {}) {
    const schedule = new FaultSchedule({ seed: s, rates, ensure: false });
    const run = await ChaosRun.start({ seed: s, emulators: emulators(), variant: 'two-stage', prefix: `chaos-${s}-cf`, schedule, ...extra });
    const rec = (i: number) => inputRecord({ id: `c${s}-${String(i).padStart(5, '0')}`, key: `k${i % 3}`, value: 1 + (i % 7) }, `pk-${i}`);
    return { run, schedule, rec };
  }

  /** Faults off, then two checkpoints, then the oracle's verdict: nothing lost, duplicated or mismatched. */
  async function expectExact(run: ChaosRun, outputs: number): Promise<void> {
    const since = run.faultsOff();
    const q = await run.quiet(since, 90_000);
    const v = await run.verdict();
    const msg = JSON.stringify({ q, verdict: v.verdict, faults: [...run.schedule.counts], observed: [...run.schedule.observed] });
    expect(q.live, msg).toBe(true);
    expect(v.verdict.lost + v.verdict.duplicated + v.verdict.mismatched, msg).toBe(0);
    expect(v.verdict.problems, msg).toEqual([]);
    expect(v.verdict.outputs, msg).toBe(outputs);
    expect(v.deadLettered, msg).toBe(v.poison);
  }

  // A hard timeout: Lambda ends the invocation wherever it is, no catch or finally runs, its
  // environment starts cold, the ESM retries the batch. Here the cut comes right after a write was
  // applied and before its response was read: the source stage's PutRecords (its records are on the
  // keyed stage's stream; the retry sends them again under the same (producer, epoch, seq)), and
  // the keyed stage's lease pointer write (the next owner finds a pointer
  // whose rows were never applied and redoes the delta). Without the dedupe set, the re-sent records
  // are counted twice (duplicated outputs, wrong sums); without the redo, a restore reads the rows of
  // the checkpoint before (wrong sums).
  it('a hard timeout cutting an invocation off after a write: the dedupe set drops re-sent records, the next owner redoes the pointed-at delta', async () => {
    const { run, schedule, rec } = await start(321, { 'hard-timeout': 0.35 }, {
      hookOptions: { hardTimeoutAt: (stage, command) => ((stage === 's0' && command instanceof PutRecordsCommand) || (stage === 's1' && isPointerWrite(command)) ? 'after' : undefined) },
    });
    try {
      for (let b = 0; b < 4; b++) {
        await run.produce(Array.from({ length: 12 }, (_, i) => rec(b * 12 + i)));
        await sleep(700);
      }
      const deadline = Date.now() + 45_000;
      const cuts = () => [schedule.observed.get('hard-timeout@PutRecordsCommand:after') ?? 0, schedule.observed.get('hard-timeout@UpdateCommand:after') ?? 0];
      while (cuts().some((n) => n === 0) && Date.now() < deadline) await sleep(250);
      expect(Math.min(...cuts()), seedLineOf(run)).toBeGreaterThan(0);
      await expectExact(run, 48);
    } finally {
      await run.stop();
    }
  }, 180_000);

  // An SDK call that never gets its response (a half-open connection, a stuck load balancer): the
  // first attempt goes to a server that accepts and never answers. The clients' request timeout must
  // fail it (throwOnRequestTimeout) so the SDK retries it; every hung connection is given up by the
  // client. Without throwOnRequestTimeout the request timeout only logs a warning: the call hangs
  // forever, its invocation times out and stays a zombie holding its environment, and the run never
  // stops (the test times out with hung connections still open).
  it('an SDK call that hangs ends at the request timeout and is retried (throwOnRequestTimeout)', async () => {
    const { run, schedule, rec } = await start(322, { 'sdk-hang': 0.03 });
    try {
      for (let b = 0; b < 3; b++) {
        await run.produce(Array.from({ length: 12 }, (_, i) => rec(b * 12 + i)));
        await sleep(700);
      }
      const deadline = Date.now() + 45_000;
      while ((schedule.observed.get('sdk-hang-connections') ?? 0) < 2 && Date.now() < deadline) await sleep(250);
      await expectExact(run, 36);
      const hung = schedule.observed.get('sdk-hang-connections') ?? 0;
      expect(hung, seedLineOf(run)).toBeGreaterThanOrEqual(2);
      // a connection that hung last may still be waiting for its request timeout
      for (const until = Date.now() + 30_000; (schedule.observed.get('sdk-hang-given-up') ?? 0) < hung && Date.now() < until; ) await sleep(250);
      expect(schedule.observed.get('sdk-hang-given-up') ?? 0, `hung connections the client never gave up: ${seedLineOf(run)}`).toBe(hung);
    } finally {
      await run.stop();
    }
  }, 180_000);

  // A bug in the user's keyed function that hits one key, every time: it updates the key's state,
  // emits, then throws. Every record of that key must be dead-lettered with the function's error as
  // its reason and its position, its state change and output undone, and the shard must go on (no
  // batch retried forever); every other key's outputs stay exact. Without the outbox's record undo,
  // the failing key's outputs are published (mismatched).
  it('a keyed function that throws for one key forever: each record dead-lettered with its reason, its state and outputs undone (record undo), the shard goes on', async () => {
    const { run, rec } = await start(323, { 'env-recycled': 0.3 }, { job: { failingKey: 'k1' } });
    try {
      const positions = new Map<string, string>();
      for (let b = 0; b < 3; b++) {
        const batch = Array.from({ length: 12 }, (_, i) => rec(b * 12 + i));
        const at = await run.produce(batch);
        batch.forEach((r, i) => positions.set(JSON.parse(r.produced.text).id as string, at[i]!.sequenceNumber));
        await sleep(700);
      }
      await expectExact(run, 24);
      const letters = await run.runner.readDeadLetters();
      expect(letters.length).toBe(12);
      for (const l of letters) {
        const id = idInDeadLetter(l.data);
        expect(l.reason, JSON.stringify(l)).toMatch(/^user function failed: .*"running-sum".*the running sum of key k1 always fails \(record c323-\d+\)$/);
        expect(l.stage, JSON.stringify(l)).toBe('s1');
        expect(l.sequenceNumber, JSON.stringify(l)).toMatch(/^\d+$/);
        expect(id !== undefined && positions.has(id), JSON.stringify(l)).toBe(true);
      }
    } finally {
      await run.stop();
    }
  }, 180_000);

  // The coordinator execution fails right after Allocate opened checkpoint n (a function crash, an
  // expired task), and the status-change event that would restart it at once is lost. Only the
  // scheduled watchdog notices that no execution runs and starts one; its Allocate aborts n, left in
  // flight past its timeout, and checkpoints complete again. Without the watchdog no execution is
  // ever started again: no checkpoint completes, nothing more is published.
  it('a coordinator execution that fails unheard of: the scheduled watchdog starts a new one, which aborts the checkpoint left in flight', async () => {
    const lines: string[] = [];
    const s = 325;
    const schedule = new FaultSchedule({ seed: s, rates: {}, ensure: false });
    const run = await ChaosRun.start({ seed: s, emulators: emulators(), variant: 'two-stage', prefix: `chaos-${s}-cf`, schedule, hookOptions: { watchdogIntervalMs: 2_000 }, engineLog: (l) => lines.push(l) });
    const rec = (i: number) => inputRecord({ id: `c${s}-${String(i).padStart(5, '0')}`, key: `k${i % 3}`, value: 1 + (i % 7) }, `pk-${i}`);
    try {
      await run.produce(Array.from({ length: 15 }, (_, i) => rec(i)));
      await run.runner.awaitCheckpoints(1, new Date(0), 90_000);
      (schedule.rates as Record<string, number>)['coordinator-left-to-watchdog'] = 1;
      const opened = () => [...schedule.observed.keys()].find((k) => k.startsWith('left-to-watchdog:checkpoint-'));
      for (let i = 0; !opened(); i++) {
        if (i > 1200) throw new Error('Allocate never ran again');
        if (schedule.counts.get('coordinator-left-to-watchdog')) schedule.narrowTo([]);
        await sleep(50);
      }
      schedule.narrowTo([]);
      const left = Number(opened()!.slice('left-to-watchdog:checkpoint-'.length));
      await run.produce(Array.from({ length: 15 }, (_, i) => rec(15 + i)));
      await expectExact(run, 30);
      const after = (await run.checkpoints()).find((c) => c.checkpointId === left);
      expect(after?.status, JSON.stringify({ left, after, observed: [...schedule.observed] })).toBe("ABORTED");
      // the restart rule never started one (its event was lost); whether it noticed the failed
      // execution before the watchdog replaced it depends on which of the two timers ran first
      expect(lines.filter((l) => l.includes('starting a new one')).length, lines.join('\n')).toBe(0);
      expect(lines.filter((l) => l.includes('status event was lost')).length, lines.join('\n')).toBeLessThanOrEqual(1);
      expect(lines.filter((l) => l.includes('no coordinator execution was running')).length, lines.join('\n')).toBeGreaterThanOrEqual(1);
    } finally {
      await run.stop();
    }
  }, 180_000);

  // KPL aggregates on the source: a good one is de-aggregated into its user records; one whose MD5
  // checksum is wrong and one whose protobuf is cut short are each dead-lettered whole, with the
  // aggregate's sequence number and the reason, and nothing around them is lost. Without the
  // per-record catch around de-aggregation, the source shard's batch fails forever (no checkpoint
  // completes after it).
  it('a malformed KPL aggregate is dead-lettered whole with its position and reason; good aggregates and the records around it are exact', async () => {
    const s = 324;
    const { run, schedule, rec } = await start(s, {}, { job: { sourceShards: 1 } });
    try {
      await run.produce(Array.from({ length: 6 }, (_, i) => rec(i)));
      const good = [rec(6), rec(7), rec(8)];
      const broken = (records: InputRecord[], how: 'checksum' | 'truncated') => brokenAggregate(records, schedule, how).record;
      const mixed = [rec(9), broken([rec(10), rec(11)], 'checksum'), rec(12), broken([rec(13)], 'truncated'), rec(14)];
      const at = await run.produce(mixed);
      // the good aggregate's user records, one by one, for the oracle
      await run.runner.produce(SOURCE_NAME, [new Uint8Array(kplAggregate(good))], { partitionKey: () => 'pk-agg' });
      run.produced.push(...good.map((r) => r.produced));
      await run.produce(Array.from({ length: 6 }, (_, i) => rec(15 + i)));
      await expectExact(run, 21 - 3);
      const letters = await run.runner.readDeadLetters();
      expect(letters.map((l) => l.sequenceNumber).sort()).toEqual([at[1]!.sequenceNumber, at[3]!.sequenceNumber].sort());
      for (const l of letters) {
        expect(l.reason, JSON.stringify(l)).toMatch(/^cannot de-aggregate KPL record: /);
        expect(l.stage).toBe('s0');
      }
    } finally {
      await run.stop();
    }
  }, 180_000);
});

function seedLineOf(run: ChaosRun): string {
  return `faults ${run.schedule.describe()} observed ${JSON.stringify([...run.schedule.observed])}`;
}
