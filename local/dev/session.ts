/**
 * A `sluice dev` session: one set of emulators that stays up, the job deployed into it and kept
 * running, redeployed when its module changes — through a savepoint when the new plan can restore
 * it, from scratch under a new resource prefix when it cannot — and a snapshot of everything the
 * web UI shows, refreshed in the background.
 */
import type { Job } from '../../shared/api/job.js';
import { sleep } from '../../shared/adapters/aws/clients.js';
import { createAwsPorts } from '../../shared/adapters/aws/ports.js';
import { readManifest, restoreIncompatibility } from '../../shared/adapters/aws/savepoints.js';
import { CountingTelemetry } from '../../shared/adapters/telemetry.js';
import type { CheckpointRecord } from '../../shared/coordinator/coordinator.js';
import type { Plan } from '../../shared/plan/plan.js';
import { planJob } from '../../shared/plan/planner.js';
import { defaultPrefix, ENV } from '../../shared/plan/resources.js';
import { QueryableState } from '../../shared/query/queryable-state.js';
import { materializeEvery } from '../../shared/runtime/changelog.js';
import { startEmulators, type LocalEmulators } from '../emulators.js';
import type { LocatedDeadLetter, LocalJobRunner } from '../runner.js';
import { DevObserver, type StageView } from './observer.js';

export interface DevSessionOptions {
  readonly jobPath: string;
  /** loads the job module; `version` > 0 loads it again after a change (past the module cache) */
  readonly load: (version: number) => Promise<Job>;
  readonly inputs: ReadonlyArray<{ source: string; file: string }>;
  readonly environments?: number;
  readonly seed?: number;
  /** time between checkpoints; @default the job's */
  readonly checkpointIntervalMs?: number;
  readonly progress?: (line: string) => void;
}

/** Everything the UI shows at one moment. */
export interface DevSnapshot {
  readonly job: string;
  readonly generation: number;
  readonly prefix: string;
  readonly at: number;
  readonly stages: StageView[];
  readonly sources: Array<{ name: string; stream: string; shards: number }>;
  readonly sinks: Array<{ name: string; kind: string; guarantee: string; stage: string | undefined }>;
  /** the highest watermark of any stage: how far event time has come */
  readonly eventTime: number | null;
  readonly checkpoints: CheckpointRecord[];
  readonly deadLetters: LocatedDeadLetter[];
  readonly keyedOperators: Array<{ id: string; name: string; state: string[] }>;
  /** every how many checkpoints the state table, which the state lookup reads, is written */
  readonly stateTableEvery: number;
}

const MAX_CHECKPOINTS = 40;

export class DevSession {
  readonly observer = new DevObserver();
  private emulators!: LocalEmulators;
  private runnerRef!: LocalJobRunner;
  private query!: QueryableState;
  private generation = 1;
  private latest: DevSnapshot | undefined;
  private deadLetters: LocatedDeadLetter[] = [];
  private stopped = false;
  private refreshLoop: Promise<void> | undefined;
  /** redeploys run one after the other */
  private deploying: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<(s: DevSnapshot) => void>();

  private constructor(private readonly o: DevSessionOptions) {}

  static async start(o: DevSessionOptions): Promise<DevSession> {
    const s = new DevSession(o);
    try {
      s.emulators = await startEmulators();
      const job = await o.load(0);
      s.runnerRef = await s.startRunner(job, defaultPrefix(planJob(job)));
      await s.feed();
    } catch (err) {
      await s.stop().catch(() => undefined);
      throw err;
    }
    s.refreshLoop = s.refresh();
    return s;
  }

  get runner(): LocalJobRunner {
    return this.runnerRef;
  }

  get plan(): Plan {
    return this.runnerRef.plan;
  }

  /**
   * AWS_ENDPOINT_URL_* (Kinesis, DynamoDB, S3, Step Functions), region and credentials of the stack,
   * and the job's prefix and bucket (so the lifecycle commands need no stack look-up).
   */
  get env(): Record<string, string> {
    const r = this.runnerRef;
    return { ...r.stackEnv, [ENV.prefix]: r.names.prefix, [ENV.bucket]: r.names.bucket };
  }

  snapshot(): DevSnapshot | undefined {
    return this.latest;
  }

  onSnapshot(listener: (s: DevSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async readSink(name: string, limit: number): Promise<{ total: number; rows: unknown[] }> {
    const all = await this.runnerRef.readSink(name);
    return { total: all.length, rows: all.slice(-limit) };
  }

  async queryState(operator: string, state: string, key: string): Promise<unknown> {
    return this.query.get(operator, state, key);
  }

  /**
   * Deploys the job module as it is now: takes a savepoint of the running job and restores it into
   * the new plan when the plan can take it; otherwise starts the new job from scratch under a new
   * resource prefix and says why. A module that does not load or plan leaves the running job alone.
   */
  redeploy(): Promise<void> {
    this.deploying = this.deploying.then(() => this.redeployNow()).catch((err: unknown) => {
      this.say(`redeploy failed; the previous job keeps running: ${err instanceof Error ? err.message : String(err)}`);
    });
    return this.deploying;
  }

  private async redeployNow(): Promise<void> {
    if (this.stopped) return;
    const gen = this.generation + 1;
    const job = await this.o.load(gen);
    const plan = planJob(job);
    const old = this.runnerRef;
    this.say(`${this.o.jobPath} changed: taking a savepoint of ${old.plan.job}…`);
    const sp = await old.savepoint({ id: `dev-${gen}`, stop: true, timeoutMs: 120_000 });
    const manifest = await readManifest({ clients: old.clients, bucket: old.names.bucket }, sp.id);
    const why = old.names.prefix === defaultPrefix(plan) ? restoreIncompatibility(plan, manifest) : `the job is now named "${plan.job}"`;
    this.generation = gen;
    if (why === undefined) {
      this.say(`restoring savepoint ${sp.id} into the new plan (${plan.stages.length} stages)…`);
      this.runnerRef = await this.startRunner(job, old.names.prefix, sp.id);
    } else {
      const prefix = `${defaultPrefix(plan)}-v${gen}`;
      this.say(`the new plan cannot restore savepoint ${sp.id} (${why}): starting it from scratch under the prefix ${prefix}, and feeding it the input files again`);
      this.runnerRef = await this.startRunner(job, prefix);
      await this.feed();
    }
    this.deadLetters = [];
    this.say(`redeployed ${plan.job} (generation ${gen})`);
  }

  /** Stops the job, the UI refresh and the emulators. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.deploying;
    await this.refreshLoop;
    await this.runnerRef?.stop();
    await this.observer.stop();
    await this.emulators?.stop();
  }

  private say(line: string): void {
    this.o.progress?.(line);
    this.observer.note(line);
  }

  private async startRunner(job: Job, prefix: string, restoreFrom?: string): Promise<LocalJobRunner> {
    const { LocalJobRunner } = await import('../runner.js');
    const r = await LocalJobRunner.start(job, {
      emulators: this.emulators,
      prefix,
      environments: this.o.environments ?? 3,
      seed: this.o.seed ?? 1,
      log: this.observer.log,
      onInvocation: this.observer.onInvocation,
      ...(this.o.checkpointIntervalMs !== undefined ? { checkpointIntervalMs: this.o.checkpointIntervalMs } : {}),
      // the state lookup reads the state table: written at every checkpoint here, it is as of the
      // last one, not up to two minutes behind (a job that sets its own period keeps it)
      ...(job.options.checkpoint?.materializeEvery === undefined ? { materializeEvery: 1 } : {}),
      ...(restoreFrom !== undefined ? { restoreFrom } : {}),
    });
    this.observer.attach(r);
    this.query = new QueryableState(job, createAwsPorts(r.plan, r.names, r.clients, new CountingTelemetry()).state);
    return r;
  }

  private async feed(): Promise<void> {
    if (!this.o.inputs.length) return;
    const fed = await this.runnerRef.produceFiles(this.o.inputs);
    for (const f of fed) this.say(`${f.file} → source "${f.source}": ${f.records} records`);
  }

  private async refresh(): Promise<void> {
    for (let round = 0; !this.stopped; round++) {
      try {
        await this.deploying;
        if (this.stopped) break;
        // dead letters are one S3 object each: read them every third round
        if (round % 3 === 0) this.deadLetters = await this.runnerRef.deadLettersWithLines();
        this.latest = await this.build();
        for (const f of this.listeners) f(this.latest);
      } catch (err) {
        if (!this.stopped) this.observer.note(`dev UI refresh failed: ${err instanceof Error ? err.message : String(err)}`);
      }
      for (let i = 0; i < 10 && !this.stopped; i++) await sleep(100);
    }
  }

  private async build(): Promise<DevSnapshot> {
    const r = this.runnerRef;
    const plan = r.plan;
    const stages = this.observer.stages();
    const wms = stages.map((s) => s.watermark).filter((w): w is number => w !== null);
    const sinkStage = (sinkId: string) => plan.stages.find((s) => s.operators.some((o) => o.sink?.id === sinkId))?.id;
    return {
      job: plan.job,
      generation: this.generation,
      prefix: r.names.prefix,
      at: Date.now(),
      stages,
      sources: plan.sources.map((s) => ({ name: s.name, stream: r.names.sourceStream(s), shards: s.shards })),
      sinks: plan.sinks.map((s) => ({ name: s.name, kind: s.kind, guarantee: s.guarantee, stage: sinkStage(s.id) })),
      eventTime: wms.length ? Math.max(...wms) : null,
      checkpoints: (await r.coordinator.list()).slice(-MAX_CHECKPOINTS),
      deadLetters: this.deadLetters,
      keyedOperators: this.query.operators(),
      stateTableEvery: materializeEvery(plan.checkpoint),
    };
  }
}
