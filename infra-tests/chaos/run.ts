/**
 * `ChaosRun`: one chaos job on the emulated stack with a fault schedule wired in, and the timeouts
 * the simulated Lambda runs under.
 */
import type { LocalEmulators } from '../../local/emulators.js';
import { LocalJobRunner, type LocalRunOptions, type RecordPosition } from '../../local/runner.js';
import { deleteJobStreams, deleteJobTables } from '../../local/chaos/check.js';
import { sleep } from '../../shared/adapters/throttling.js';
import { chaosHooks, FaultSchedule, prng, type ChaosHookOptions, type ChaosHooks } from '../../local/chaos/faults.js';
import { EndpointOutages } from '../../local/chaos/endpoint-outage.js';
import { CLOCK_SKEW_MAX_MS } from '../../local/chaos/clock-skew.js';
import { brokenAggregate } from './kpl.js';
import { slowedHandler, type ChaosLoad } from './load.js';
import { chaosJob, OUTPUTS_SINK, SOURCE_NAME, TOTALS_SINK, type ChaosJobOptions, type ChaosVariant } from './job.js';
import { keyOf, type InputRecord } from './input.js';
import { expectedFrom, idInDeadLetter, judge, type Expected, type ProducedRecord, type PublishedOutput, type UpsertRow, type Verdict } from './oracle.js';

/**
 * Checkpoint timeout of the chaos job: checkpoints on the emulators take 1.5–3 s on an idle machine
 * (every hop is an ESM poll, a lease read, often a restore and replay), 3–5 s on a busy one.
 */
export const CHAOS_CHECKPOINT_TIMEOUT_MS = 8_000;
/** Invocation timeout of the simulated Lambda: above a slow ack (which must not turn into a zombie). */
export const CHAOS_INVOCATION_TIMEOUT_MS = 10_000;
/** The stage functions' SDK request timeout: below the invocation timeout, above a busy emulator's slowest answers. */
export const CHAOS_REQUEST_TIMEOUT_MS = 8_000;

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
    private readonly outages: EndpointOutages | undefined,
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
    // the stage functions reach the emulators through proxies that go dark now and then
    const e = o.emulators;
    const outages =
      schedule.rates['endpoint-outage'] > 0
        ? await EndpointOutages.start(e.endpoints, { region: e.region, credentials: e.credentials, maxAttempts: 3, requestTimeoutMs: CHAOS_REQUEST_TIMEOUT_MS }, schedule)
        : undefined;
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
      ...(outages ? { wrapClients: (clients, ctx) => hooks.options.wrapClients!(outages.through(clients), ctx) } : {}),
      ...o.runnerOptions,
      ...(o.load?.kind === 'slow' ? { wrapHandler: (h, ctx) => hooks.options.wrapHandler!(slowedHandler(h, (o.load as { factor: number }).factor), ctx) } : {}),
    }).catch(async (err: unknown) => {
      await outages?.stop();
      throw err;
    });
    hooks.attach(runner);
    outages?.begin();
    return new ChaosRun(runner, schedule, variant, hooks, o.job?.failingKey, outages);
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
    // a checkpoint opened by a coordinator whose clock ran ahead carries a start time later than
    // its real one: the quiet phase counts only checkpoints that started after the skew's reach
    return new Date(Date.now() + (this.schedule.rates['clock-skew'] > 0 ? CLOCK_SKEW_MAX_MS : 0));
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
    const verdict = await judgeSinks(r, exp, options);
    const letters = await r.readDeadLetters();
    const stats = await r.stats();
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
    for (const name of ['CacheMiss', 'CacheHit', 'PutRecordsRetried', 'InvocationErrors', 'RecordsReplayed', 'BatchAlreadyProcessed']) {
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

  /** Stops the job and deletes its streams and tables (many seeds share one emulator); call it after the verdict. */
  async stop(): Promise<void> {
    await this.stopMonitor();
    await this.runner.stop().catch(() => undefined);
    await this.outages?.stop();
    await this.hooks.dispose();
    await Promise.all([deleteJobStreams(this.runner), deleteJobTables(this.runner)]);
  }
}

/**
 * The chaos job's two sinks on a local run judged against the oracle's expectation; a staged output
 * re-staged with other content counts as mismatched.
 */
export async function judgeSinks(runner: LocalJobRunner, exp: Expected, options: { orderedKeys?: boolean } = {}): Promise<ReturnType<typeof judge>> {
  const published = runner.collected.published<PublishedOutput>(OUTPUTS_SINK);
  const rows = await runner.readUpsertSink<UpsertRow>(TOTALS_SINK);
  const verdict = judge(exp, published, rows, options);
  if (runner.collected.conflicts) {
    verdict.mismatched += runner.collected.conflicts;
    verdict.problems.push(`${runner.collected.conflicts} staged outputs were re-staged with different content (non-determinism)`);
  }
  return verdict;
}
