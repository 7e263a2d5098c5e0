/**
 * The soak: the chaos job on the emulated stack with light faults on, for N minutes.
 *
 * 1. catch-up: `preloadSeconds` of input (at the steady rate) is on the source stream before the
 *    job's functions and coordinator start; catch-up ends when every pre-loaded record's output is
 *    published (a committed checkpoint covers it);
 * 2. steady input at `ratePerSecond` until N minutes have passed since the start;
 * 3. faults off, two more checkpoints, and the verdict against the chaos oracle (written apart from
 *    the engine): lost, duplicated, mismatched outputs and dead letters.
 *
 * Sampled every few seconds: heap of the process (after a GC when node runs with --expose-gc) and
 * what each simulated execution environment caches, DynamoDB items and bytes of the job's tables,
 * S3 objects in its bucket, every checkpoint's duration and outcome, commit latency (from a
 * record's PutRecords to its output being published by a commit), and how long barriers wait in
 * each stage's input stream next to that stream's backlog (barrier-travel.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeHeapSnapshot } from 'node:v8';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { startEmulators } from '../../local/emulators.js';
import type { LocalJobRunner } from '../../local/runner.js';
import { FilePublishedOutputs } from '../../local/published-outputs-file.js';
import type { PublishedOutputs } from '../../shared/adapters/memory/collect-registry.js';
import type { CheckpointRecord } from '../../shared/coordinator/coordinator.js';
import { FaultSchedule, prng, type FaultKind, type FaultRates } from '../../local/chaos/faults.js';
import { ChaosRun, inputRecord, type InputRecord } from '../chaos/harness.js';
import { OUTPUTS_SINK, SOURCE_NAME, type ChaosVariant } from '../chaos/job.js';
import type { KinesisStreamEvent } from 'aws-lambda';
import { BarrierTravel, dataRecords, type StreamWaits } from './barrier-travel.js';
import type { PublishedOutput } from '../chaos/oracle.js';

/** Light faults for a long run: every kind that does not need a quiet machine to end. */
export const SOAK_RATES: FaultRates = {
  'crash-after-emit': 0.01,
  'crash-after-delta': 0.01,
  'crash-mid-apply': 0.01,
  'crash-after-ack': 0.01,
  zombie: 0.003,
  'putrecords-partial': 0.03,
  'putrecords-partial-barrier': 0.05,
  'throttle-dynamodb': 0.01,
  'throttle-kinesis': 0.01,
  'throttle-s3': 0.01,
  'duplicate-delivery': 0.01,
  'coordinator-task-failure': 0.02,
  'env-recycled': 0.05,
};

/** A fault schedule that also notes when each fault fired, to tell which checkpoints a fault slowed down. */
class TimedFaultSchedule extends FaultSchedule {
  /** when a zombie stalled, and when any other fault fired (ms since the epoch) */
  readonly zombies: number[] = [];
  readonly others: number[] = [];
  override count(kind: FaultKind, n = 1): void {
    if (this.enabled) (kind === 'zombie' ? this.zombies : this.others).push(Date.now());
    super.count(kind, n);
  }
}

/**
 * The heap's warm-up after catch-up: for a minute or two after the last pre-loaded record's output
 * is published, the backlog's records are still in flight and the heap is several MB above where it
 * settles (measured: 67–69 MB, then 59–60 MB); growth measured from that peak would hide a leak.
 */
const HEAP_WARM_UP_MS = 150_000;

/** The most an inner invocation is slowed down (--inner-delay, --inner-record-ms): below the chaos invocation timeout. */
const INNER_SLOWNESS_CAP_MS = 8_000;

export interface SoakOptions {
  readonly minutes: number;
  /** steady input, records per second; @default 20 */
  readonly ratePerSecond?: number;
  /** seconds of input (at the steady rate) on the source before the job starts; @default 60 */
  readonly preloadSeconds?: number;
  readonly seed?: number;
  readonly variant?: ChaosVariant;
  /** checkpoint timeoutMs (the progress window); @default 8000 */
  readonly checkpointTimeoutMs?: number;
  /** faults off: a clean baseline */
  readonly noFaults?: boolean;
  /** every invocation of an inner stage first waits this long: a backlog builds up between stages */
  readonly innerDelayMs?: number;
  /** every invocation of an inner stage also waits this long per data record it is handed: an inner stage slower than the source */
  readonly innerRecordMs?: number;
  /** a directory to write two heap snapshots to: at the warm-up sample and at the end of the input (compare them in Chrome DevTools) */
  readonly heapSnapshotDir?: string;
  /** the job's checkpoint.maxInFlightRecords (a source shard's credit window); @default the engine's */
  readonly maxInFlightRecords?: number;
  /** one line per sample period */
  readonly progress?: (line: string) => void;
  readonly engineLog?: (line: string) => void;
}

export interface SoakSample {
  readonly atMs: number;
  readonly phase: 'catch-up' | 'steady' | 'quiet';
  readonly heapMb: number;
  readonly environments: Array<{ id: string; instances: number; keys: number }>;
  readonly dynamo: Record<string, { items: number; bytes: number }>;
  readonly s3Objects: number;
  /** objects per first key segment */
  readonly s3ByPrefix: Record<string, number>;
  readonly produced: number;
  readonly published: number;
  /**
   * what grows with the input by design: the collect sink's published outputs (the emulated
   * downstream's contents, kept in a file outside the heap), outputs staged but not published yet,
   * and the records whose output the soak still waits for (it keeps their PutRecords time; poison
   * records stay there)
   */
  readonly retained: { publishedOutputs: number; stagedOutputs: number; awaitingOutput: number };
}

export interface SoakResult {
  readonly minutes: number;
  readonly events: number;
  readonly catchUpMs: number | undefined;
  readonly checkpoints: { catchUp: number[]; steady: number[]; aborted: number; completed: number; reasons: string[] };
  /** steady checkpoint durations by the faults that fired while each was open: 'zombie' (an invocation stalled past its timeout), 'other' faults, 'none' */
  readonly steadyByFault: Record<'zombie' | 'other' | 'none', number[]>;
  /** every finished checkpoint: start (ms after the job started), duration, status */
  readonly timeline: Array<{ id: number; startMs: number; durationMs: number; status: string }>;
  readonly commitLatencyMs: { p50: number; p99: number; max: number };
  /** per stage's input stream and phase: barrier waits and backlog ages (barrier-travel.ts) */
  readonly barrierTravel: ReadonlyMap<string, ReadonlyMap<string, StreamWaits>>;
  readonly heapGrowthPct: number;
  /**
   * the heap the growth is measured between (MB, after a GC with --expose-gc): the median of the
   * samples of the first minute after warm-up, and of the last minute of the input (one sample moves
   * by several MB with what is in flight at that moment)
   */
  readonly heapWarmMb: number;
  readonly heapEndMb: number;
  /** the first and the last sample of those two windows */
  readonly heapWindows: { warm: [SoakSample, SoakSample]; end: [SoakSample, SoakSample] };
  /** the heap snapshots written (--heap-snapshots) */
  readonly heapSnapshots: string[];
  readonly s3ObjectsEnd: number;
  /** steady minutes in which no checkpoint completed */
  readonly deadMinutes: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly mismatched: number;
  readonly problems: string[];
  readonly samples: SoakSample[];
  readonly line: string;
  readonly ok: boolean;
}

/**
 * Heap growth over a run: the median heap of the first minute of samples from `warmAtMs` on (the
 * first steady one) against the median of the last minute. Medians, because one sample moves by
 * several MB with what is in flight when it is taken.
 */
export function heapGrowth(samples: readonly Pick<SoakSample, 'atMs' | 'phase' | 'heapMb'>[], warmAtMs: number) {
  const last = samples.at(-1)!;
  const warmFrom = samples.findIndex((s) => s.phase === 'steady' && s.atMs >= warmAtMs);
  const warmWindow = samples.slice(Math.max(0, warmFrom)).filter((s, _, xs) => s.atMs <= xs[0]!.atMs + 60_000);
  const endWindow = samples.filter((s) => s.atMs >= last.atMs - 60_000 && s.atMs >= warmWindow[0]!.atMs);
  const heapWarmMb = percentile(warmWindow.map((s) => s.heapMb), 50);
  const heapEndMb = percentile(endWindow.map((s) => s.heapMb), 50);
  return { heapWarmMb, heapEndMb, heapGrowthPct: ((heapEndMb - heapWarmMb) / heapWarmMb) * 100, warmWindow, endWindow };
}

type FinishedCheckpoint = Pick<CheckpointRecord, 'checkpointId' | 'status' | 'startedAt' | 'endedAt' | 'durationMs' | 'reason'>;
const finished = ({ checkpointId, status, startedAt, endedAt, durationMs, reason }: CheckpointRecord): FinishedCheckpoint => ({
  checkpointId,
  status,
  startedAt,
  ...(endedAt !== undefined ? { endedAt } : {}),
  ...(durationMs !== undefined ? { durationMs } : {}),
  ...(reason !== undefined ? { reason } : {}),
});

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function percentile(xs: readonly number[], p: number): number {
  if (!xs.length) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/** Approximate stored size of a DynamoDB item: attribute names plus values. */
function itemBytes(item: Record<string, unknown>): number {
  const size = (v: unknown): number => {
    if (v === null || v === undefined) return 1;
    if (typeof v === 'string') return Buffer.byteLength(v);
    if (typeof v === 'number' || typeof v === 'bigint') return 8;
    if (typeof v === 'boolean') return 1;
    if (v instanceof Uint8Array) return v.length;
    if (v instanceof Set) return [...v].reduce((a: number, x) => a + size(x), 0);
    if (Array.isArray(v)) return v.reduce((a: number, x) => a + size(x) + 1, 3);
    if (typeof v === 'object') return Object.entries(v as Record<string, unknown>).reduce((a, [k, x]) => a + Buffer.byteLength(k) + size(x) + 1, 3);
    return 8;
  };
  return Object.entries(item).reduce((a, [k, v]) => a + Buffer.byteLength(k) + size(v), 0);
}

async function tableStats(runner: LocalJobRunner, table: string): Promise<{ items: number; bytes: number }> {
  let items = 0;
  let bytes = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const r = await runner.clients.doc.send(new ScanCommand({ TableName: table, ...(start ? { ExclusiveStartKey: start } : {}) }));
    for (const it of r.Items ?? []) {
      items++;
      bytes += itemBytes(it);
    }
    start = r.LastEvaluatedKey;
  } while (start);
  return { items, bytes };
}

/** Objects in the job's bucket, in all and per first key segment (deltas/, dead letters, …). */
async function s3Objects(runner: LocalJobRunner): Promise<{ total: number; byPrefix: Record<string, number> }> {
  const byPrefix: Record<string, number> = {};
  let total = 0;
  let token: string | undefined;
  do {
    const r = await runner.clients.s3.send(new ListObjectsV2Command({ Bucket: runner.names.bucket, ...(token ? { ContinuationToken: token } : {}) }));
    for (const o of r.Contents ?? []) {
      const prefix = `${(o.Key ?? '').split('/')[0]}/`;
      byPrefix[prefix] = (byPrefix[prefix] ?? 0) + 1;
      total++;
    }
    token = r.IsTruncated ? r.NextContinuationToken : undefined;
  } while (token);
  return { total, byPrefix };
}

function heapMb(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

/**
 * The soak's input, record after record: the same seed always gives the same records, so the oracle
 * needs only their count while the input runs (it gets them back for the verdict).
 */
export function soakInput(seed: number): (n: number) => InputRecord[] {
  const rnd = prng(seed * 7 + 3);
  let seq = 0;
  return (n) =>
    Array.from({ length: n }, () => {
      // the chaos oracle finds an id in a dead letter by this shape, even inside an inner packet
      if (seq > 99_999) throw new Error('the soak numbers records with 5 digits: lower --rate or --minutes');
      const id = `c${900 + seed}-${String(seq++).padStart(5, '0')}`;
      const roll = rnd();
      const poison = roll < 0.002 ? 'malformed' : roll < 0.004 ? 'map' : roll < 0.006 ? 'process' : undefined;
      return inputRecord({ id, key: `k${Math.floor(rnd() * 24)}`, value: 1 + Math.floor(rnd() * 9), ...(poison ? { poison } : {}) }, `pk-${Math.floor(rnd() * 1000)}`);
    });
}

export async function runSoak(o: SoakOptions): Promise<SoakResult> {
  const rate = o.ratePerSecond ?? 20;
  const preloadN = Math.round(rate * (o.preloadSeconds ?? 60));
  const seed = o.seed ?? 1;
  const say = o.progress ?? (() => undefined);
  const input = soakInput(seed);
  let seq = 0;
  const nextRecords = (n: number): InputRecord[] => {
    const batch = input(n);
    seq += batch.length;
    return batch;
  };
  const producedAt = new Map<string, number>();
  const idOf = (r: InputRecord) => /"id":"([^"]+)"/.exec(r.produced.text)![1]!;

  const emulators = await startEmulators();
  // the emulated downstream keeps what the job publishes in a file, outside the heap the soak
  // measures (in memory it would grow the heap with the input by design: ~6.5 MB over 20 minutes)
  const downstreamDir = mkdtempSync(join(tmpdir(), 'sluice-soak-outputs-'));
  const downstream = new FilePublishedOutputs(downstreamDir);
  // the ids of outputs published since the last look (latency, catch-up's end)
  let newlyPublished: string[] = [];
  const publishedOutputs: PublishedOutputs = {
    append: (sink, values) => {
      downstream.append(sink, values);
      if (sink === OUTPUTS_SINK) for (const v of values) newlyPublished.push((v as PublishedOutput).id);
    },
    values: (sink) => downstream.values(sink),
  };
  const preload = nextRecords(preloadN);
  const schedule = new TimedFaultSchedule({ seed, rates: o.noFaults ? {} : SOAK_RATES, ensure: false });
  let run: ChaosRun | undefined;
  let phase: SoakSample['phase'] = 'catch-up';
  const travel = new BarrierTravel();
  try {
    run = await ChaosRun.start({
      seed,
      emulators,
      variant: o.variant ?? 'three-stage',
      schedule,
      prefix: `soak-${seed}`,
      job: { checkpointTimeoutMs: o.checkpointTimeoutMs ?? 8_000, ...(o.maxInFlightRecords !== undefined ? { maxInFlightRecords: o.maxInFlightRecords } : {}) },
      hookOptions: {
        ...(o.innerDelayMs || o.innerRecordMs
          ? {
              // at most 8 s a batch: below the invocation timeout (a batch that never ends is another hazard)
              slowHandlerMs: (stage: string, event: KinesisStreamEvent) =>
                stage === 's0' ? 0 : Math.min(INNER_SLOWNESS_CAP_MS, (o.innerDelayMs ?? 0) + (o.innerRecordMs ? o.innerRecordMs * dataRecords(event) : 0)),
            }
          : {}),
        beforeInvocation: async (stage, event) => travel.observe(stage, event, phase),
      },
      ...(o.engineLog ? { engineLog: o.engineLog } : {}),
      runnerOptions: {
        publishedOutputs,
        beforeStart: async (runner) => {
          const keys = preload.map((r) => r.produced.partitionKey);
          say(`catch-up: putting ${preloadN} records (${o.preloadSeconds ?? 60} s of input) on the source before the job starts`);
          await runner.produce(SOURCE_NAME, preload.map((r) => r.payload), { partitionKey: (_v, i) => keys[i]! });
        },
      },
    });
    const jobStart = Date.now();
    // the oracle's records are the input's count until the verdict (soakInput gives them back):
    // the heap figures are the job's, not a copy of every record
    for (const r of preload) producedAt.set(idOf(r), jobStart);
    const runner = run.runner;
    run.startMonitor();

    // only what the figures need: the records themselves carry every instance's replay point
    const ckpts = new Map<number, FinishedCheckpoint>();
    const latencies: number[] = [];
    const samples: SoakSample[] = [];
    const heapSnapshots: string[] = [];
    // the heap is compared from the first steady sample HEAP_WARM_UP_MS after catch-up
    const warmAtMs = () => (catchUpEnd === undefined ? Infinity : catchUpEnd + HEAP_WARM_UP_MS - jobStart);
    let publishedSeen = 0;
    let catchUpEnd: number | undefined;
    // catch-up ends when every pre-loaded record that has an output (poison has none) is published
    const preloadIds = new Set(preload.filter((r) => !/"poison"|"value":$/.test(r.produced.text)).map(idOf));
    const tables = [runner.names.controlTable, runner.names.stateTable];

    const observe = async () => {
      for (const c of await runner.coordinator.list()) if (c.status !== 'IN_FLIGHT' && !ckpts.has(c.checkpointId)) ckpts.set(c.checkpointId, finished(c));
      const published = newlyPublished;
      newlyPublished = [];
      const now = Date.now();
      publishedSeen += published.length;
      for (const id of published) {
        const t = producedAt.get(id);
        if (t !== undefined) {
          latencies.push(now - t);
          producedAt.delete(id);
        }
        preloadIds.delete(id);
      }
      if (catchUpEnd === undefined && preloadIds.size === 0) {
        catchUpEnd = now;
        if (phase === 'catch-up') phase = 'steady';
        say(`catch-up done after ${((now - jobStart) / 1000).toFixed(1)} s`);
      }
    };
    const sample = async () => {
      await observe();
      const dynamo: SoakSample['dynamo'] = {};
      for (const t of tables) dynamo[t] = await tableStats(runner, t).catch(() => ({ items: -1, bytes: -1 }));
      const s: SoakSample = {
        atMs: Date.now() - jobStart,
        phase,
        heapMb: heapMb(),
        environments: runner.environments(),
        dynamo,
        ...(await s3Objects(runner).then(
          (o) => ({ s3Objects: o.total, s3ByPrefix: o.byPrefix }),
          () => ({ s3Objects: -1, s3ByPrefix: {} }),
        )),
        produced: seq,
        published: publishedSeen,
        retained: { publishedOutputs: downstream.count(OUTPUTS_SINK), stagedOutputs: runner.collected.pending(), awaitingOutput: producedAt.size },
      };
      samples.push(s);
      if (o.heapSnapshotDir && (heapSnapshots.length === 0 ? s.phase === 'steady' && s.atMs >= warmAtMs() : false)) heapSnapshots.push(writeHeapSnapshot(join(o.heapSnapshotDir, `soak-warm-${process.pid}.heapsnapshot`)));
      return s;
    };

    // steady input until N minutes after the start, sampling every 10 s
    const endAt = jobStart + o.minutes * 60_000;
    let nextSample = Date.now();
    let nextMinute = jobStart + 60_000;
    while (Date.now() < endAt) {
      const tick = Date.now();
      const batch = nextRecords(rate);
      await run.produce(batch);
      // ChaosRun.produce keeps what it put; the soak's faults never repack records (no broken KPL aggregates), so that is the batch
      const kept = run.produced.splice(0);
      if (kept.length !== batch.length || kept.some((p, i) => p !== batch[i]!.produced)) throw new Error('soak: the chaos run put other records than the soak input (a fault that repacks records?)');
      const at = Date.now();
      for (const r of batch) producedAt.set(idOf(r), at);
      if (Date.now() >= nextSample) {
        const s = await sample();
        nextSample = Date.now() + 10_000;
        if (Date.now() >= nextMinute) {
          nextMinute += 60_000;
          const done = [...ckpts.values()];
          const d = Object.values(s.dynamo);
          say(
            `[${(s.atMs / 60_000).toFixed(1)} min] ${s.phase} produced=${s.produced} published=${s.published} checkpoints completed=${done.filter((c) => c.status === 'COMPLETED').length} aborted=${done.filter((c) => c.status === 'ABORTED').length} heap=${s.heapMb.toFixed(1)}MB ddb items=${d.reduce((a, x) => a + x.items, 0)} bytes=${d.reduce((a, x) => a + x.bytes, 0)} s3=${s.s3Objects} env keys=${s.environments.map((e) => e.keys).join('/')}`,
          );
        } else await observe();
      }
      const rest = 1000 - (Date.now() - tick);
      if (rest > 0) await sleep(rest);
    }
    const steadyEnd = Date.now();
    const last = await sample();
    if (o.heapSnapshotDir) heapSnapshots.push(writeHeapSnapshot(join(o.heapSnapshotDir, `soak-end-${process.pid}.heapsnapshot`)));
    phase = 'quiet';
    say(`input stopped after ${((steadyEnd - jobStart) / 60_000).toFixed(1)} min (${seq} records); faults off, waiting for two checkpoints`);
    const since = run.faultsOff();
    const quiet = await run.quiet(since, 180_000);
    await observe();
    // the whole input again, for the oracle (after the last heap sample)
    run.produced.push(...soakInput(seed)(seq).map((r) => r.produced));
    const verdict = await run.verdict();

    const all = [...ckpts.values()].sort((a, b) => a.checkpointId - b.checkpointId);
    const started = (c: FinishedCheckpoint) => Date.parse(c.startedAt);
    const warm = (catchUpEnd ?? steadyEnd) + 10_000;
    const done = all.filter((c) => c.status === 'COMPLETED' && c.durationMs !== undefined);
    const catchUp = done.filter((c) => catchUpEnd === undefined || started(c) < catchUpEnd).map((c) => c.durationMs!);
    const steadyDone = done.filter((c) => started(c) >= warm && started(c) < steadyEnd);
    const steady = steadyDone.map((c) => c.durationMs!);
    const steadyByFault: SoakResult['steadyByFault'] = { zombie: [], other: [], none: [] };
    for (const c of steadyDone) {
      const within = (at: number) => at >= started(c) && at <= started(c) + c.durationMs!;
      steadyByFault[schedule.zombies.some(within) ? 'zombie' : schedule.others.some(within) ? 'other' : 'none'].push(c.durationMs!);
    }
    const aborted = all.filter((c) => c.status === 'ABORTED');
    // liveness: every steady minute (after catch-up) has a completed checkpoint
    let deadMinutes = 0;
    for (let m = catchUpEnd ?? steadyEnd; m + 60_000 <= steadyEnd; m += 60_000) {
      if (!done.some((c) => Date.parse(c.endedAt ?? c.startedAt) >= m && Date.parse(c.endedAt ?? c.startedAt) < m + 60_000)) deadMinutes++;
    }
    const { heapWarmMb, heapEndMb, heapGrowthPct, warmWindow, endWindow } = heapGrowth(samples, (catchUpEnd ?? steadyEnd) + HEAP_WARM_UP_MS - jobStart);
    const p99 = (xs: number[]) => (xs.length ? String(Math.round(percentile(xs, 99))) : 'none');
    const line =
      `soak: minutes=${o.minutes} events=${seq} steady_ckpt_p99_ms=${p99(steady)} catchup_ckpt_p99_ms=${p99(catchUp)} aborted=${aborted.length} ` +
      `heap_growth_pct=${heapGrowthPct.toFixed(1)} s3_objects_end=${last.s3Objects} lost=${verdict.verdict.lost} duplicated=${verdict.verdict.duplicated}`;
    const problems = [...verdict.verdict.problems];
    if (!quiet.live) problems.push('the quiet phase did not get its two checkpoints');
    return {
      minutes: o.minutes,
      events: seq,
      catchUpMs: catchUpEnd === undefined ? undefined : catchUpEnd - jobStart,
      checkpoints: {
        catchUp,
        steady,
        aborted: aborted.length,
        completed: done.length,
        reasons: [...new Set(aborted.map((c) => c.reason ?? '?'))].slice(0, 8),
      },
      steadyByFault,
      timeline: all.map((c) => ({ id: c.checkpointId, startMs: started(c) - jobStart, durationMs: c.durationMs ?? -1, status: c.status })),
      commitLatencyMs: { p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: Math.max(0, ...latencies) },
      barrierTravel: travel.waits,
      heapGrowthPct,
      heapWarmMb,
      heapEndMb,
      heapWindows: { warm: [warmWindow[0] as SoakSample, warmWindow.at(-1) as SoakSample], end: [endWindow[0] as SoakSample, endWindow.at(-1) as SoakSample] },
      heapSnapshots,
      s3ObjectsEnd: last.s3Objects,
      deadMinutes,
      lost: verdict.verdict.lost,
      duplicated: verdict.verdict.duplicated,
      mismatched: verdict.verdict.mismatched,
      problems,
      samples,
      line,
      ok: verdict.verdict.lost === 0 && verdict.verdict.duplicated === 0 && verdict.verdict.mismatched === 0 && quiet.live && deadMinutes === 0 && problems.length === 0,
    };
  } finally {
    await run?.stop().catch(() => undefined);
    await emulators.stop().catch(() => undefined);
    rmSync(downstreamDir, { recursive: true, force: true });
  }
}
