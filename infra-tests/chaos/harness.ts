/**
 * The chaos harness: runs the chaos job on the emulated AWS stack under a seeded fault schedule and
 * checks what the sinks hold against the oracle.
 *
 * Per seed: a LocalJobRunner on shared emulators (its own resource prefix), then
 * 1. a fault phase: the input is produced in several bursts while faults fire;
 * 2. a quiet phase: faults off, until two checkpoints that started after the last record was
 *    produced (and after the faults stopped) have completed — by then every record's effects are
 *    committed;
 * 3. the verdict: lost / duplicated / mismatched outputs, dead letters vs poison records, upsert rows
 *    that moved backwards while the job ran, and liveness (checkpoints kept completing).
 */
import type { KinesisStreamEvent } from 'aws-lambda';
import aggModule from 'aws-kinesis-agg';
import type { LocalEmulators } from '../../local/emulators.js';
import { startEmulators } from '../../local/emulators.js';
import { LocalJobRunner, type LocalRunOptions, type RecordPosition } from '../../local/runner.js';
import { deleteJobStreams } from '../../local/chaos/check.js';
import { DynamoControlStore } from '../../shared/adapters/aws/dynamo-control-store.js';
import { listAllShards } from '../../shared/adapters/aws/kinesis.js';
import { chaosHooks, FaultSchedule, prng, type ChaosHookOptions, type ChaosHooks, type FaultKind, type FaultRates } from '../../local/chaos/faults.js';
import { slowedHandler, startCpuHogs, type ChaosLoad } from './load.js';
import { chaosJob, OUTPUTS_SINK, SOURCE_NAME, TOTALS_SINK, type ChaosJobOptions, type ChaosVariant } from './job.js';
import { expectedFrom, idInDeadLetter, judge, type ProducedRecord, type PublishedOutput, type UpsertRow, type Verdict } from './oracle.js';

/**
 * Checkpoint timeout of the chaos job: checkpoints on the emulators take 1.5–3 s on an idle machine
 * (every hop is an ESM poll, a lease read, often a restore and replay), 3–5 s on a busy one.
 */
export const CHAOS_CHECKPOINT_TIMEOUT_MS = 8_000;
/** Invocation timeout of the simulated Lambda: above a slow ack (which must not turn into a zombie). */
export const CHAOS_INVOCATION_TIMEOUT_MS = 10_000;
/** The SDK clients' request timeout: a hung call is retried well within the invocation timeout. */
export const CHAOS_REQUEST_TIMEOUT_MS = 4_000;

export interface ChaosOptions {
  readonly seeds: readonly number[];
  /** reshard a running stream on a third of the seeds; @default true */
  readonly rescale?: boolean;
  /** @default 'alternate' (even seeds two-stage, odd seeds three-stage) */
  readonly variant?: ChaosVariant | 'alternate';
  /** input records per seed (poison included), ±25 % per seed; @default 160 */
  readonly records?: number;
  /** only this fault kind */
  readonly onlyKind?: FaultKind;
  /** force a profile for every seed */
  readonly profile?: string;
  /** running emulators to share; started (and stopped) here when omitted */
  readonly emulators?: LocalEmulators;
  /** seeds run at the same time on the shared emulators; @default 1 */
  readonly concurrency?: number;
  /** after the last burst, faults stay on until this many checkpoints started after it have ended; @default 1 */
  readonly faultCheckpoints?: number;
  /** bound of the fault phase after the last burst; @default 30 s */
  readonly faultPhaseMaxMs?: number;
  /** how long the quiet phase may wait for its two checkpoints; @default 120 s */
  readonly quietTimeoutMs?: number;
  /** appended to resource prefixes (to run a seed twice on the same emulators) */
  readonly prefixTag?: string;
  /** called with one line per finished seed */
  readonly onSeed?: (result: SeedResult, line: string) => void;
  /** engine log lines (warn and above), for debugging a seed */
  readonly engineLog?: (line: string) => void;
  /** job options (shards) */
  readonly job?: Omit<ChaosJobOptions, 'variant'>;
  /** explicit fault rates (targeted tests) */
  readonly rates?: FaultRates;
  /** every kind with a rate fires at least once per seed; @default true */
  readonly ensure?: boolean;
  /** the input's shape (records overrides its `records`) */
  readonly input?: InputShape;
  /** called once the runner is up (targeted tests watch or poke it) */
  readonly onRunner?: (runner: LocalJobRunner, schedule: FaultSchedule) => void;
  /** extra runner options / hook options, for targeted tests */
  readonly runnerOptions?: Partial<LocalRunOptions>;
  readonly hookOptions?: Partial<ChaosHookOptions>;
  /** run under load (see load.ts) */
  readonly load?: ChaosLoad;
}

export interface SeedResult {
  readonly seed: number;
  readonly variant: ChaosVariant;
  readonly profile: string;
  /** shards of the source stream and of each inner stream */
  readonly shards: string;
  readonly records: number;
  /** poison records produced */
  readonly poison: number;
  /** dead letters found (objects) */
  readonly deadLettered: number;
  readonly faults: ReadonlyMap<FaultKind, number>;
  readonly totalFaults: number;
  readonly observed: ReadonlyMap<string, number>;
  readonly verdict: Verdict;
  /** upsert rows seen moving backwards while the job ran */
  readonly regressions: number;
  readonly checkpoints: { completed: number; aborted: number; quietCompleted: number };
  /** the quiet phase got its checkpoints */
  readonly live: boolean;
  readonly cacheHitRate: number;
  readonly durationMs: number;
  /** time to start the runner, of the fault phase, of the quiet phase */
  readonly phasesMs: { start: number; fault: number; quiet: number };
  /** set when the seed could not run to the end */
  readonly error?: string;
}

export interface ChaosSummary {
  readonly seeds: number;
  readonly faults: number;
  readonly kinds: number;
  readonly outputs: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly mismatched: number;
  readonly deadLettered: number;
  readonly poison: number;
  readonly stalled: number;
  readonly results: SeedResult[];
  readonly faultsByKind: Map<FaultKind, number>;
  /** `chaos: seeds=N faults=F kinds=K outputs=O lost=L duplicated=D mismatched=M dead-lettered=X poison=P` */
  readonly line: string;
  readonly ok: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface GeneratedInput {
  readonly bursts: Array<Array<{ payload: unknown; produced: ProducedRecord }>>;
  readonly gapsMs: number[];
  readonly pinned: boolean;
  /** distinct keys */
  readonly keys: number;
  readonly records: number;
  readonly poison: number;
}

export interface InputShape {
  /** records, ±25 %; @default 160 */
  readonly records?: number;
  /** distinct keys; @default 3–8 */
  readonly keys?: number;
  /** source partition keys: the record's key (one source shard per key), random, or one for all; @default pinned or random by seed */
  readonly partitioning?: 'pinned' | 'random' | 'single';
  /** bursts; @default 3–5 */
  readonly bursts?: number;
  /** gap after each burst; @default 300–1200 ms */
  readonly gapMs?: number;
  /** ballast per record, in bytes; @default 0 */
  readonly padBytes?: number;
  /** poison records: at least one of each kind, plus this share; @default 0.04 (0: none at all) */
  readonly poisonRate?: number;
}

/** The seed's input: records with a few poison ones of every kind, split into bursts. */
export function generateInput(seed: number, shape: InputShape = {}): GeneratedInput {
  const rnd = prng(seed * 7919 + 17);
  const int = (n: number) => Math.floor(rnd() * n);
  const approx = shape.records ?? 160;
  const n = Math.max(12, Math.round(approx * (0.75 + 0.5 * rnd())));
  const keys = shape.keys ?? 3 + int(6);
  const pinnedDraw = rnd() < 0.5;
  const partitioning = shape.partitioning ?? (pinnedDraw ? 'pinned' : 'random');
  const poisonRate = shape.poisonRate ?? 0.04;
  const poisonKinds = ['malformed', 'map', 'process'] as const;
  // at least one poison record of each kind, at random places; then a few more
  const forced = new Map<number, (typeof poisonKinds)[number]>();
  if (poisonRate > 0) {
    for (const k of poisonKinds) {
      let at = int(n);
      while (forced.has(at)) at = int(n);
      forced.set(at, k);
    }
  }
  const pad = shape.padBytes ? 'x'.repeat(shape.padBytes) : undefined;
  const all: Array<{ payload: unknown; produced: ProducedRecord }> = [];
  let poison = 0;
  for (let i = 0; i < n; i++) {
    const id = `c${seed}-${String(i).padStart(5, '0')}`;
    const key = `k${int(keys)}`;
    const value = 1 + int(9);
    const kind = forced.get(i) ?? (poisonRate > 0 && rnd() < poisonRate ? poisonKinds[int(3)] : undefined);
    const partitionKey = partitioning === 'pinned' ? key : partitioning === 'single' ? 'one' : `pk-${int(1000)}`;
    let text: string;
    if (kind === 'malformed') text = `{"id":"${id}","key":"${key}","value":`;
    else text = JSON.stringify({ id, key, value, ...(kind ? { poison: kind } : {}), ...(pad ? { pad } : {}) });
    if (kind) poison++;
    all.push({ payload: new TextEncoder().encode(text), produced: { text, partitionKey } });
  }
  const nBursts = Math.min(n, shape.bursts ?? 3 + int(3));
  const bursts: GeneratedInput['bursts'] = [];
  const cuts = new Set<number>();
  while (cuts.size < nBursts - 1) cuts.add(1 + int(n - 1));
  const sorted = [0, ...[...cuts].sort((a, b) => a - b), n];
  for (let b = 0; b < nBursts; b++) bursts.push(all.slice(sorted[b], sorted[b + 1]));
  const gapsMs = bursts.map(() => shape.gapMs ?? 300 + int(900));
  return { bursts, gapsMs, pinned: partitioning !== 'random', keys, records: n, poison };
}

/** Generated records in the form `ChaosRun.produce` takes. */
export type InputRecord = { payload: unknown; produced: ProducedRecord };

/** Builds one input record (targeted tests). */
export function inputRecord(r: { id: string; key: string; value: number; poison?: 'map' | 'process' | 'malformed'; pad?: number }, partitionKey = r.key): InputRecord {
  const text =
    r.poison === 'malformed'
      ? `{"id":"${r.id}","key":"${r.key}","value":`
      : JSON.stringify({ id: r.id, key: r.key, value: r.value, ...(r.poison ? { poison: r.poison } : {}), ...(r.pad ? { pad: 'x'.repeat(r.pad) } : {}) });
  return { payload: new TextEncoder().encode(text), produced: { text, partitionKey } };
}

export interface ChaosRunOptions {
  readonly seed: number;
  readonly emulators: LocalEmulators;
  readonly variant?: ChaosVariant;
  readonly job?: Omit<ChaosJobOptions, 'variant'>;
  readonly schedule?: FaultSchedule;
  readonly hookOptions?: Partial<ChaosHookOptions>;
  readonly runnerOptions?: Partial<LocalRunOptions>;
  /** resource prefix; @default chaos-<seed>-<a|b> */
  readonly prefix?: string;
  readonly engineLog?: (line: string) => void;
  /** run under load (see load.ts; a `cpu` load's hogs are started by runChaos) */
  readonly load?: ChaosLoad;
}

export interface RunVerdict {
  readonly verdict: Verdict;
  readonly poison: number;
  readonly deadLettered: number;
  readonly regressions: number;
  readonly checkpoints: { completed: number; aborted: number };
  readonly cacheHitRate: number;
}

/**
 * One job on the emulated stack with a fault schedule wired in: produce, switch faults off, wait for
 * the quiet phase's checkpoints, judge. `runSeed` drives it through a whole seed; targeted tests
 * drive it step by step.
 */
export class ChaosRun {
  readonly produced: ProducedRecord[] = [];
  private monitoring = false;
  private monitor: Promise<void> | undefined;
  private regressions = 0;
  private readonly regressionNotes: string[] = [];

  private constructor(
    readonly runner: LocalJobRunner,
    readonly schedule: FaultSchedule,
    readonly variant: ChaosVariant,
    private readonly hooks: ChaosHooks,
    /** the key the job's keyed function always fails for */
    readonly failingKey: string | undefined,
  ) {}

  static async start(o: ChaosRunOptions): Promise<ChaosRun> {
    const variant = o.variant ?? 'two-stage';
    const schedule = o.schedule ?? new FaultSchedule({ seed: o.seed, rates: {} });
    const hooks = chaosHooks(schedule, {
      invocationTimeoutMs: CHAOS_INVOCATION_TIMEOUT_MS,
      checkpointTimeoutMs: CHAOS_CHECKPOINT_TIMEOUT_MS,
      ...o.hookOptions,
    });
    const rnd = prng(o.seed * 31 + 5);
    const runner = await LocalJobRunner.start(chaosJob({ variant, checkpointTimeoutMs: CHAOS_CHECKPOINT_TIMEOUT_MS, ...o.job }), {
      emulators: o.emulators,
      prefix: o.prefix ?? `chaos-${o.seed}-${variant === 'two-stage' ? 'a' : 'b'}`,
      seed: o.seed,
      environments: 3,
      batchSize: 25 + Math.floor(rnd() * 76),
      checkpointIntervalMs: 300,
      requestTimeoutMs: CHAOS_REQUEST_TIMEOUT_MS,
      ...(o.engineLog ? { log: o.engineLog } : {}),
      ...hooks.options,
      ...o.runnerOptions,
      ...(o.load?.kind === 'slow' ? { wrapHandler: (h, ctx) => hooks.options.wrapHandler!(slowedHandler(h, (o.load as { factor: number }).factor), ctx) } : {}),
    });
    hooks.attach(runner);
    return new ChaosRun(runner, schedule, variant, hooks, o.job?.failingKey);
  }

  /**
   * Puts records on the source stream with their partition keys (and remembers them for the oracle).
   * The schedule may pack a few of them into a broken KPL aggregate (`malformed-kpl-aggregate`).
   */
  async produce(input: readonly InputRecord[]): Promise<RecordPosition[]> {
    if (!input.length) return [];
    let records = input;
    if (this.schedule.chance('malformed-kpl-aggregate')) {
      const n = 1 + this.schedule.int(Math.min(3, input.length));
      const at = this.schedule.int(input.length - n + 1);
      const broken = brokenAggregate(input.slice(at, at + n), this.schedule);
      this.schedule.count('malformed-kpl-aggregate');
      this.schedule.observe(`malformed-kpl-aggregate:${broken.how}`);
      records = [...input.slice(0, at), broken.record, ...input.slice(at + n)];
    }
    if (this.failingKey !== undefined) {
      const failing = records.filter((x) => !x.produced.brokenAggregateOf && keyOf(x.produced.text) === this.failingKey).length;
      if (failing) this.schedule.count('key-throws-forever', failing);
    }
    const keys = records.map((x) => x.produced.partitionKey);
    this.produced.push(...records.map((x) => x.produced));
    return this.runner.produce(
      SOURCE_NAME,
      records.map((x) => x.payload),
      { partitionKey: (_v, i) => keys[i]! },
    );
  }

  /** Upsert rows must never move backwards: scans the table every 400 ms until the verdict. */
  startMonitor(): void {
    if (this.monitoring) return;
    this.monitoring = true;
    const last = new Map<string, { count: number; epoch: number; seq: number; producer: string }>();
    this.monitor = (async () => {
      while (this.monitoring) {
        try {
          const rows = await this.runner.readUpsertSink<UpsertRow & { _sluice_epoch?: number; _sluice_seq?: number; _sluice_producer?: string }>(TOTALS_SINK);
          for (const row of rows) {
            const cur = { count: row.count ?? 0, epoch: row._sluice_epoch ?? 0, seq: row._sluice_seq ?? 0, producer: row._sluice_producer ?? '' };
            const prev = last.get(row.pk);
            // a reshard hands a key to another producer in the middle of an epoch: its sequence
            // numbers start again, so only one producer's own sequence must never go back
            const sameProducer = prev !== undefined && cur.producer === prev.producer;
            if (prev && (cur.count < prev.count || cur.epoch < prev.epoch || (cur.epoch === prev.epoch && sameProducer && cur.seq < prev.seq && cur.count !== prev.count))) {
              this.regressions++;
              if (this.regressionNotes.length < 5) this.regressionNotes.push(`upsert row ${row.pk} moved back: ${JSON.stringify(prev)} -> ${JSON.stringify(cur)}`);
            }
            last.set(row.pk, cur);
          }
        } catch {
          // a scan failing under load is not a finding
        }
        await sleep(400);
      }
    })();
  }

  private async stopMonitor(): Promise<void> {
    this.monitoring = false;
    await this.monitor?.catch(() => undefined);
  }

  /** Ends the fault phase; returns the time the quiet phase starts from. */
  faultsOff(): Date {
    if (this.schedule.enabled) {
      this.schedule.enabled = false;
      const recycled = this.runner.telemetry.get('EnvironmentsRecycled');
      if (recycled) this.schedule.count('env-recycled', recycled);
    }
    return new Date();
  }

  /** Checkpoints in the coordinator's table. */
  checkpoints() {
    return this.runner.coordinator.list();
  }

  /** Waits for `count` checkpoints that started after `since` to complete; false if they did not in time. */
  async quiet(since: Date, timeoutMs = 120_000, count = 2): Promise<{ live: boolean; completed: number }> {
    try {
      return { live: true, completed: (await this.runner.awaitCheckpoints(count, since, timeoutMs)).length };
    } catch {
      const done = (await this.checkpoints()).filter((c) => c.status === 'COMPLETED' && Date.parse(c.startedAt) > since.getTime()).length;
      return { live: false, completed: done };
    }
  }

  /** Judges the sinks and the dead letters against the oracle. */
  async verdict(options: { orderedKeys?: boolean } = {}): Promise<RunVerdict> {
    await this.stopMonitor();
    const r = this.runner;
    const exp = expectedFrom(this.produced, { ...(this.failingKey !== undefined ? { failingKey: this.failingKey } : {}) });
    const published = r.collected.published<PublishedOutput>(OUTPUTS_SINK);
    const rows = await r.readUpsertSink<UpsertRow>(TOTALS_SINK);
    const letters = await r.readDeadLetters();
    const stats = await r.stats();
    const verdict = judge(exp, published, rows, options);
    if (r.collected.conflicts) {
      verdict.mismatched += r.collected.conflicts;
      verdict.problems.push(`${r.collected.conflicts} staged outputs were re-staged with different content (non-determinism)`);
    }
    if (this.regressions) {
      verdict.mismatched += this.regressions;
      verdict.problems.push(...this.regressionNotes);
    }
    for (const c of stats.checkpoints) {
      if (c.status === 'COMPLETED' && (c.complete === false || c.acks < c.expected)) {
        verdict.mismatched++;
        verdict.problems.push(`checkpoint ${c.checkpointId} COMPLETED with ${c.acks} of ${c.expected} acks${c.missing?.length ? ` (missing: ${c.missing.join(', ')})` : ''}`);
      }
    }
    // dead letters: exactly the poison records, once each
    const perId = new Map<string, number>();
    let anonymous = 0;
    for (const l of letters) {
      const id = idInDeadLetter(l.data);
      if (id) perId.set(id, (perId.get(id) ?? 0) + 1);
      else anonymous++;
    }
    for (const [id, n] of perId) {
      if (!exp.poisonIds.has(id)) verdict.problems.push(`dead letter for ${id}, which is not poison`);
      else if (n > 1) verdict.problems.push(`poison record ${id} dead-lettered ${n} times`);
    }
    if (anonymous) verdict.problems.push(`${anonymous} dead letters name no record id`);
    const missingLetters = [...exp.poisonIds].filter((id) => !perId.has(id));
    if (missingLetters.length) verdict.problems.push(`poison records without a dead letter: ${missingLetters.slice(0, 5).join(', ')}`);
    const tele = r.telemetry;
    for (const name of ['CacheMiss', 'CacheHit', 'PutRecordsRetried', 'InvocationErrors', 'RecordsReplayed']) {
      const n = tele.get(name);
      if (n) this.schedule.observe(name, n);
    }
    return {
      verdict,
      poison: exp.poisonIds.size + exp.anonymousPoison,
      deadLettered: letters.length,
      regressions: this.regressions,
      checkpoints: { completed: stats.completed, aborted: stats.aborted },
      cacheHitRate: stats.cacheHitRate,
    };
  }

  /** Stops the job and deletes its streams (many seeds share one emulator). */
  async stop(): Promise<void> {
    await this.stopMonitor();
    await this.runner.stop().catch(() => undefined);
    await this.hooks.dispose();
    await deleteJobStreams(this.runner);
  }
}

/** A record produced after the input while missing kinds wait for data (ids above the input's). */
function extraRecord(seed: number, n: number, i: number, keys: number, pinned: boolean): InputRecord {
  const key = `k${(n + i) % keys}`;
  return inputRecord({ id: `c${seed}-${String(90_000 + n).padStart(5, '0')}`, key, value: 1 + (n % 9) }, pinned ? key : `pk-x${n}`);
}

/** The key of a produced record's text (undefined for a line that is not JSON). */
function keyOf(text: string): string | undefined {
  try {
    const o = JSON.parse(text) as { key?: unknown };
    return typeof o?.key === 'string' ? o.key : undefined;
  } catch {
    return undefined;
  }
}

const kpl = aggModule as unknown as {
  RecordAggregator: new () => { addUserRecord(r: { partitionKey: string; data: Buffer }): void; build(): { partitionKey: string; data: Buffer } };
};

/** A KPL aggregate of the records' payloads, made by the KPL's own aggregation library. */
export function kplAggregate(records: readonly InputRecord[]): Buffer {
  const agg = new kpl.RecordAggregator();
  for (const r of records) agg.addUserRecord({ partitionKey: r.produced.partitionKey, data: Buffer.from(r.payload as Uint8Array) });
  return Buffer.from(agg.build().data);
}

/**
 * A KPL aggregate of `records`, then broken: its MD5 checksum flipped, or its end cut off (a
 * truncated protobuf); `how` is drawn by the schedule unless given.
 */
export function brokenAggregate(records: readonly InputRecord[], schedule: FaultSchedule, forced?: 'checksum' | 'truncated'): { record: InputRecord; how: 'checksum' | 'truncated' } {
  const data = kplAggregate(records);
  const how = forced ?? (schedule.random() < 0.5 ? 'checksum' : 'truncated');
  // the checksum is the last 16 bytes; a cut of 17–20 bytes also takes the end of the last record
  let bytes: Buffer = data;
  if (how === 'checksum') {
    const at = data.length - 1 - schedule.int(16);
    data[at] = data[at]! ^ 0x5a;
  } else bytes = data.subarray(0, data.length - 17 - schedule.int(4));
  const first = records[0]!.produced;
  return {
    record: { payload: new Uint8Array(bytes), produced: { text: first.text, partitionKey: first.partitionKey, brokenAggregateOf: records.map((r) => r.produced.text) } },
    how,
  };
}

/** Runs one seed. */
export async function runSeed(seed: number, emulators: LocalEmulators, options: Omit<ChaosOptions, 'seeds' | 'emulators'> = {}): Promise<SeedResult> {
  const started = Date.now();
  const variant: ChaosVariant =
    options.variant && options.variant !== 'alternate' ? options.variant : seed % 2 === 0 ? 'two-stage' : 'three-stage';
  const schedule = new FaultSchedule({
    seed,
    ...(options.profile ? { profile: options.profile } : {}),
    ...(options.onlyKind ? { onlyKind: options.onlyKind } : {}),
    ...(options.rates ? { rates: options.rates } : {}),
    ...(options.ensure !== undefined ? { ensure: options.ensure } : {}),
  });
  const input = generateInput(seed, { ...(options.records !== undefined ? { records: options.records } : {}), ...options.input });
  // half the seeds run with tiny engine limits, so rarely used paths run under faults too: held-back
  // records past the bound are re-read from the shard (the log as overflow buffer), clean state is
  // evicted between batches and read back
  const limitsRng = prng(seed * 131 + 7);
  const tight = limitsRng() < 0.5;
  const engineLimits = tight ? { maxHeldRecords: 1 + Math.floor(limitsRng() * 4), maxCachedKeys: 1 + Math.floor(limitsRng() * 3) } : undefined;
  // shards per stream: 2 by default, 1–3 on a third of the seeds
  const shardsDrawn = limitsRng() < 0.33 ? { sourceShards: 1 + Math.floor(limitsRng() * 3), innerShards: 1 + Math.floor(limitsRng() * 3) } : {};
  const job: Omit<ChaosJobOptions, 'variant'> & { failingKey?: string } = { ...shardsDrawn, ...options.job };
  // a third of the seeds reshard a running stream in the middle of the input (an inner stage's or
  // the source's), within Kinesis' half-to-double step; tight seeds also keep only 2 dirty keys in
  // memory (the rest waits in the spill store)
  const reshardRoll = limitsRng();
  // the keyed stage (with timers due around the reshard), the source, or (three-stage) the stateless middle stage
  const keyedStage = variant === 'two-stage' ? 's1' : 's2';
  const stageRoll = reshardRoll < 0.33 && options.rescale !== false ? limitsRng() : undefined;
  const stageToRescale = stageRoll === undefined ? undefined : variant === 'two-stage' ? (stageRoll < 0.7 ? 's1' : 's0') : stageRoll < 0.4 ? 's2' : stageRoll < 0.7 ? 's1' : 's0';
  const from = stageToRescale === 's0' ? (job.sourceShards ?? 2) : (job.innerShards ?? 2);
  const rescaleTo = stageToRescale ? (from === 1 ? 2 : limitsRng() < 0.5 ? from - 1 : from + 1) : 0;
  const limits: { maxHeldRecords: number; maxCachedKeys: number; maxDirtyKeys?: number } | undefined =
    engineLimits && reshardRoll > 0.8 ? { ...engineLimits, maxDirtyKeys: 2 } : engineLimits;
  const shards = `${job.sourceShards ?? 2}x${job.innerShards ?? 2}`;
  const timerStage = stageToRescale === keyedStage;
  // the keyed function fails forever for the key of one record of the input
  const inputKeys = input.bursts.flat().map((x) => keyOf(x.produced.text)).filter((k): k is string => k !== undefined);
  const failingKey = inputKeys.length && schedule.chance('key-throws-forever') ? inputKeys[schedule.int(inputKeys.length)] : undefined;
  if (failingKey !== undefined) job.failingKey = failingKey;
  let run: ChaosRun | undefined;
  const childHold = timerStage ? holdNewShards(seed, stageToRescale, from, () => run?.runner) : undefined;
  const profile =
    schedule.profile + (tight ? '+tight' : '') + (limits?.maxDirtyKeys ? '+spill' : '') + (stageToRescale ? `+rescale(${stageToRescale}:${from}→${rescaleTo}${timerStage ? `,timers,${childHold!.order}` : ''})` : '');
  const base = { seed, variant, profile, shards, records: input.records, poison: input.poison };
  const phases = { t: Date.now(), start: 0, fault: 0, quiet: 0 };
  try {
    run = await ChaosRun.start({
      seed,
      emulators,
      variant,
      schedule,
      job: timerStage ? { ...job, timers: true } : job,
      ...(options.hookOptions || childHold ? { hookOptions: { ...(childHold ? { beforeInvocation: childHold.before } : {}), ...options.hookOptions } } : {}),
      ...(options.runnerOptions || limits ? { runnerOptions: { ...(limits ? { runner: limits } : {}), ...options.runnerOptions } } : {}),
      ...(options.prefixTag ? { prefix: `chaos-${seed}-${variant === 'two-stage' ? 'a' : 'b'}${options.prefixTag}` } : {}),
      ...(options.engineLog ? { engineLog: options.engineLog } : {}),
      ...(options.load ? { load: options.load } : {}),
    });
    const r = run;
    options.onRunner?.(r.runner, schedule);
    phases.start = Date.now() - phases.t;
    phases.t = Date.now();
    r.startMonitor();

    // ---- fault phase: the input in bursts (a reshard starting half-way, while bursts go on)
    let rescaling: Promise<unknown> | undefined;
    for (let b = 0; b < input.bursts.length; b++) {
      if (stageToRescale && b === Math.floor(input.bursts.length / 2)) {
        rescaling = r.runner.rescaleInPlace(stageToRescale, rescaleTo, { timeoutMs: 90_000 }).catch((err: unknown) => err);
      }
      await r.produce(input.bursts[b]!);
      await sleep(input.gapsMs[b]!);
    }
    // keep the faults on while the input flows through the stages: until a checkpoint that started
    // after the last burst has ended, one has committed, and every kind of the schedule has fired
    // (some only get a chance at a commit or an ack) — within a bound
    const lastBurst = Date.now();
    const faultUntil = lastBurst + (options.faultPhaseMaxMs ?? 30_000);
    let narrowed = false;
    let extra = 0;
    let lastExtra = 0;
    for (;;) {
      await sleep(250);
      // kinds still missing once narrowed may need data to fire on (a snapshot with dirty rows, a
      // PutRecords call): on a busy machine the input can be through before they got a chance
      if (narrowed && schedule.missing().length && Date.now() - lastExtra > 2_000) {
        lastExtra = Date.now();
        await r.produce(Array.from({ length: 4 }, (_, i) => extraRecord(seed, extra++, i, input.keys, input.pinned)));
      }
      // half-way through the bound, only the kinds still missing fire (they may need a commit that the others keep aborting)
      if (!narrowed && options.ensure !== false && Date.now() > lastBurst + (faultUntil - lastBurst) / 2 && schedule.missing().length) {
        narrowed = true;
        schedule.observe(`narrowed-to:${schedule.missing().join('+')}`);
        schedule.narrowTo(schedule.missing());
      }
      const list = await r.checkpoints();
      const ended = list.filter((c) => c.status !== 'IN_FLIGHT' && Date.parse(c.startedAt) > lastBurst).length;
      const committed = list.some((c) => c.status === 'COMPLETED');
      const ensured = options.ensure === false || schedule.missing().length === 0;
      if ((ended >= (options.faultCheckpoints ?? 1) && committed && ensured) || Date.now() > faultUntil) break;
    }
    const since = r.faultsOff();
    // a reshard needs a checkpoint to complete; some schedules abort nearly all of them while faults are on
    const rescaleError = rescaling ? await rescaling : undefined;
    phases.fault = Date.now() - phases.t;
    phases.t = Date.now();

    // ---- quiet phase
    const q = await r.quiet(since, options.quietTimeoutMs ?? 120_000);
    phases.quiet = Date.now() - phases.t;

    // ---- verdict
    // one source shard per key and one channel to the keyed stage: per key, outputs follow produce
    // order — unless a partial PutRecords failure reordered a channel (allowed: §3 dedupe by set)
    const reordering = (schedule.counts.get('putrecords-partial') ?? 0) + (schedule.counts.get('putrecords-partial-barrier') ?? 0);
    const v = await r.verdict({ orderedKeys: input.pinned && variant === 'two-stage' && reordering === 0 });
    if (!q.live) v.verdict.problems.push(await stallVerdict(r, q.completed, v.checkpoints));
    return {
      ...base,
      ...(rescaleError instanceof Error ? { error: `rescale of ${stageToRescale} to ${rescaleTo} shards: ${rescaleError.message}` } : {}),
      deadLettered: v.deadLettered,
      // what the oracle counts as poison: the generated poison, a failing key's records, broken aggregates
      poison: v.poison,
      faults: new Map(schedule.counts),
      totalFaults: schedule.total,
      observed: new Map(schedule.observed),
      verdict: v.verdict,
      regressions: v.regressions,
      checkpoints: { ...v.checkpoints, quietCompleted: q.completed },
      live: q.live,
      cacheHitRate: v.cacheHitRate,
      durationMs: Date.now() - started,
      phasesMs: { start: phases.start, fault: phases.fault, quiet: phases.quiet },
    };
  } catch (err) {
    const exp = expectedFrom(input.bursts.flat().map((x) => x.produced), { ...(job.failingKey !== undefined ? { failingKey: job.failingKey } : {}) });
    return {
      ...base,
      deadLettered: 0,
      faults: new Map(schedule.counts),
      totalFaults: schedule.total,
      observed: new Map(schedule.observed),
      verdict: { outputs: 0, lost: exp.records.length, duplicated: 0, mismatched: 0, problems: [`seed failed to run: ${(err as Error)?.stack ?? String(err)}`] },
      regressions: 0,
      checkpoints: { completed: 0, aborted: 0, quietCompleted: 0 },
      live: false,
      cacheHitRate: 0,
      durationMs: Date.now() - started,
      phasesMs: { start: phases.start, fault: phases.fault, quiet: phases.quiet },
      error: String((err as Error)?.message ?? err),
    };
  } finally {
    await run?.stop();
  }
}

/**
 * The verdict on a seed whose quiet phase got no checkpoints: a stall named by the coordinator
 * ("stalled at checkpoint n: instance … waits for barrier k …", the words of its CheckpointStalled
 * alarm) when the last checkpoint ended without some instance's ack; else what is known.
 */
export async function stallVerdict(run: ChaosRun, quietCompleted: number, checkpoints: { completed: number; aborted: number }): Promise<string> {
  const counts = `${quietCompleted} checkpoints completed in the quiet phase (completed ${checkpoints.completed}, aborted ${checkpoints.aborted})`;
  try {
    const stall = await run.runner.coordinator.stalled(1);
    if (stall) return `${stall.message} — ${counts}`;
    const last = (await run.checkpoints()).at(-1);
    const open = last?.status === 'IN_FLIGHT' && last.missing?.length ? `; checkpoint ${last.checkpointId} in flight waits for ${last.missing.join(', ')}` : '';
    return `liveness: ${counts}${open}`;
  } catch (err) {
    return `liveness: ${counts} (the stall could not be named: ${String(err)})`;
  }
}

/**
 * Children of a reshard invoked in a seeded order: the first invocation of a held new shard of
 * `stage` (shard number ≥ the shards it had) waits until a sibling has snapshotted past the reshard
 * (its lease points at a snapshot), within a bound below the invocation timeout. Across seeds each
 * child runs first, or only after its sibling has already checkpointed on the new layout.
 */
export function holdNewShards(
  seed: number,
  stage: string,
  initialShards: number,
  runner: () => LocalJobRunner | undefined,
): { order: string; before: (stageId: string, event: KinesisStreamEvent) => Promise<void> } {
  const rnd = prng(seed * 977 + 13);
  const held = Array.from({ length: 8 }, () => rnd() < 0.5);
  const seen = new Set<number>();
  const order = `hold[${held.slice(0, 4).map((h) => (h ? 'H' : '-')).join('')}]`;
  const shardOf = (eventId: string) => Number(/shardId-0*(\d+)/.exec(eventId)?.[1] ?? -1);
  return {
    order,
    before: async (stageId, event) => {
      const r = runner();
      if (!r || stageId !== stage || !event.Records.length) return;
      const shard = shardOf(event.Records[0]!.eventID);
      if (shard < initialShards || seen.has(shard)) return;
      seen.add(shard);
      if (!held[(shard - initialShards) % held.length]) return;
      const control = new DynamoControlStore(r.clients, r.names.controlTable, r.names.bucket);
      const siblings = (await listAllShards(r.clients, r.names.streamOf(r.plan.stages.find((s) => s.id === stage)!)))
        .filter((s) => s.endingSequenceNumber === undefined && shardOf(s.shardId) !== shard)
        .map((s) => `${stage}:${s.shardId}`);
      const until = Date.now() + CHAOS_INVOCATION_TIMEOUT_MS - 2_000;
      while (Date.now() < until) {
        for (const id of siblings) if ((await control.readLease(id)).snapshot) return;
        await sleep(200);
      }
    },
  };
}

/** The line printed for a seed. */
export function seedLine(r: SeedResult): string {
  const faults = [...r.faults].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}=${n}`).join(' ');
  const obs = [...r.observed].filter(([k]) => /fenced|zombie@|barrier|entries|lost-response|hard-timeout@|sdk-hang|kpl|narrowed|CacheMiss|PutRecordsRetried|InvocationErrors/.test(k)).map(([k, n]) => `${k}=${n}`).join(' ');
  const v = r.verdict;
  const bad = v.lost || v.duplicated || v.mismatched || r.deadLettered !== r.poison || !r.live || r.error !== undefined;
  return (
    `seed=${r.seed} ${r.variant} shards=${r.shards} profile=${r.profile} records=${r.records} faults=${r.totalFaults} [${faults}]` +
    ` observed[${obs}] checkpoints=${r.checkpoints.completed}/${r.checkpoints.aborted}aborted hit=${r.cacheHitRate.toFixed(2)}` +
    ` outputs=${v.outputs} lost=${v.lost} duplicated=${v.duplicated} mismatched=${v.mismatched} dead-lettered=${r.deadLettered} poison=${r.poison}` +
    ` ${(r.durationMs / 1000).toFixed(1)}s (start ${(r.phasesMs.start / 1000).toFixed(1)} fault ${(r.phasesMs.fault / 1000).toFixed(1)} quiet ${(r.phasesMs.quiet / 1000).toFixed(1)})${bad ? ' FAIL' : ''}` +
    (bad || v.problems.length ? `\n  ${[...(r.error !== undefined ? [`error: ${r.error}`] : []), ...v.problems].join('\n  ')}` : '')
  );
}

/** Runs every seed and sums up. */
export async function runChaos(options: ChaosOptions): Promise<ChaosSummary> {
  const own = !options.emulators;
  const emulators = options.emulators ?? (await startEmulators());
  const results: SeedResult[] = [];
  const stopHogs = startCpuHogs(options.load);
  try {
    const queue = [...options.seeds];
    const worker = async () => {
      for (let seed = queue.shift(); seed !== undefined; seed = queue.shift()) {
        const r = await runSeed(seed, emulators, options);
        results.push(r);
        options.onSeed?.(r, seedLine(r));
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency ?? 1, options.seeds.length)) }, worker));
  } finally {
    await stopHogs();
    if (own) await emulators.stop();
  }
  results.sort((a, b) => a.seed - b.seed);
  return summarize(results);
}

export function summarize(results: SeedResult[]): ChaosSummary {
  const faultsByKind = new Map<FaultKind, number>();
  for (const r of results) for (const [k, n] of r.faults) if (n > 0) faultsByKind.set(k, (faultsByKind.get(k) ?? 0) + n);
  const sum = (f: (r: SeedResult) => number) => results.reduce((a, r) => a + f(r), 0);
  const s = {
    seeds: results.length,
    faults: sum((r) => r.totalFaults),
    kinds: faultsByKind.size,
    outputs: sum((r) => r.verdict.outputs),
    lost: sum((r) => r.verdict.lost),
    duplicated: sum((r) => r.verdict.duplicated),
    mismatched: sum((r) => r.verdict.mismatched),
    deadLettered: sum((r) => r.deadLettered),
    poison: sum((r) => r.poison),
    stalled: results.filter((r) => !r.live).length,
  };
  const line = `chaos: seeds=${s.seeds} faults=${s.faults} kinds=${s.kinds} outputs=${s.outputs} lost=${s.lost} duplicated=${s.duplicated} mismatched=${s.mismatched} dead-lettered=${s.deadLettered} poison=${s.poison}`;
  const ok = s.lost === 0 && s.duplicated === 0 && s.mismatched === 0 && s.deadLettered === s.poison && s.stalled === 0 && results.every((r) => r.error === undefined);
  return { ...s, results, faultsByKind, line, ok };
}
