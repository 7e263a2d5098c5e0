/**
 * Runs a job on this machine against the emulated AWS stack, with the same plan, the same functions
 * and the same coordinator workflow that `cdk deploy` ships:
 *
 * - the emulators (Kinesis, DynamoDB, S3) on free loopback ports, and the job's streams, tables and
 *   bucket created in them from the plan;
 * - one local event source poller per stage, invoking the stage's handler in one of several
 *   simulated execution environments — each its own StageRunner with its own cache, recycled at
 *   random — so a shard's batches move between environments as they do on Lambda;
 * - the coordinator state machine *as synthesized by CDK*, executed by an ASL interpreter whose
 *   Lambda tasks call the coordinator function's code, and a Step Functions endpoint for the
 *   instances' SendTaskSuccess.
 *
 * The stage functions and their pollers are in stage-functions.ts, the coordinator's restart rule and
 * watchdog schedule in coordinator-schedules.ts, what a checkpoint must cover in produced-positions.ts,
 * the options in local-run-options.ts.
 */
import { DeleteStreamCommand, DescribeStreamSummaryCommand } from '@aws-sdk/client-kinesis';
import { cachedCoordinatorDefinition } from './coordinator-cache.js';
import { createAwsClients, sleep, type AwsClients } from '../shared/adapters/aws/clients.js';
import { kinesisSourceWriter } from '../shared/adapters/aws/bounded-input.js';
import { listAllShards, sdkKinesisApi } from '../shared/adapters/aws/kinesis.js';
import { putRecordsUntilAccepted, type PutEntry } from '../shared/adapters/put-records.js';
import { endInput } from '../shared/bounded/bounded-reader.js';
import { UsageError } from '../shared/util/errors.js';
import { restoreSavepoint, type RestoreResult } from '../shared/adapters/aws/savepoints.js';
import { stagedSinkPublishers } from '../shared/adapters/aws/staged-sinks.js';
import { CollectRegistry } from '../shared/adapters/memory/collect-registry.js';
import { CountingTelemetry } from '../shared/adapters/telemetry.js';
import type { Job } from '../shared/api/job.js';
import { Coordinator, type CheckpointRecord, type CommitTarget, type SavepointRecord } from '../shared/coordinator/coordinator.js';
import { coordinatorTasks } from '../functions/coordinator.js';
import type { RescaleRecord } from '../shared/coordinator/rescale.js';
import { pauseMsOf, type LoopTaskInput } from '../shared/coordinator/loop.js';
import { commitPauseOverride } from '../cdk/coordinator-state-machine.js';
import type { Plan } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { resourceNames, type ResourceNames } from '../shared/plan/resources.js';
import type { StageInstance } from '../shared/runtime/stage-instance.js';
import { startEmulators, type LocalEmulators } from './emulators.js';
import { LocalStepFunctions } from './step-functions-local.js';
import { readNumberedLines, type LocatedDeadLetter, type RecordPosition } from './input-lines.js';
import { SinkReader, type DeadLetterRecord } from './sink-readers.js';
import type { LocalRunOptions } from './local-run-options.js';
import { startCoordinatorSchedules } from './coordinator-schedules.js';
import { ProducedPositions } from './produced-positions.js';
import { localWaitOverrides } from './wait-overrides.js';
import { instanceIdOf } from '../shared/runtime/stage-instance.js';
import { LocalStageFunctions } from './stage-functions.js';

export type { LocatedDeadLetter, RecordPosition } from './input-lines.js';

const NONE_OPEN: ReadonlySet<string> = new Set();
export type { LocalRunOptions } from './local-run-options.js';

export interface RunStats {
  readonly checkpoints: CheckpointRecord[];
  readonly completed: number;
  readonly aborted: number;
  readonly meanCheckpointMs: number;
  readonly batches: number;
  readonly cacheHitRate: number;
  readonly recordsIn: number;
  readonly deadLetters: number;
  readonly invocations: number;
}


export class LocalJobRunner {
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly collected: CollectRegistry;
  readonly telemetry: CountingTelemetry;
  private emulators!: LocalEmulators;
  private ownEmulators = false;
  private stepFunctions!: LocalStepFunctions;
  private functions: LocalStageFunctions | undefined;
  private stopSchedules: (() => void) | undefined;
  clients!: AwsClients;
  private sinks!: SinkReader;
  /** the clients the stage functions' environments use */
  private stageClients!: AwsClients;
  coordinator!: Coordinator;
  /** what the restore did, when the run started from a savepoint */
  restored: RestoreResult | undefined;
  private running = false;
  private readonly tasks = new Set<Promise<unknown>>();
  private sfnEndpoint: string | undefined;
  /** input file and line of each record produced from a file, by `source/shardId/sequenceNumber` */
  private readonly lineOf = new Map<string, { source: string; file: string; line: number }>();
  private readonly produced: ProducedPositions;

  private constructor(
    readonly job: Job,
    private readonly options: LocalRunOptions,
  ) {
    const every = options.materializeEvery;
    this.plan = planJob(job, every === undefined ? job.options : { ...job.options, checkpoint: { ...job.options.checkpoint, materializeEvery: every } });
    this.names = resourceNames(this.plan, options.prefix);
    this.telemetry = new CountingTelemetry(options.log, 'info');
    this.produced = new ProducedPositions(this.plan);
    this.collected = new CollectRegistry(options.publishedOutputs);
  }

  /** Starts the emulated stack, deploys the job into it and starts the coordinator. */
  static async start(job: Job, options: LocalRunOptions = {}): Promise<LocalJobRunner> {
    const r = new LocalJobRunner(job, options);
    try {
      await r.boot();
    } catch (err) {
      await r.stop().catch(() => undefined);
      throw err;
    }
    return r;
  }

  private async boot(): Promise<void> {
    const o = this.options;
    this.ownEmulators = !o.emulators;
    this.emulators = o.emulators ?? (await startEmulators());
    const def = cachedCoordinatorDefinition(this.job, { prefix: this.names.prefix, region: this.emulators.region, ...(o.expressCheckpoints ? { expressCheckpoints: true } : {}) });
    const { waits, roundWaits } = localWaitOverrides(def, o.checkpointIntervalMs);
    // the workflow's tasks run as the deployed coordinator function runs them (same loop, metrics, logs)
    let tasks: ReturnType<typeof coordinatorTasks> | undefined;
    const runTask = (payload: unknown) => {
      // tracked so that stop() waits for a task still running (a commit must not outlive the run)
      return this.track(tasks!.run(payload as LoopTaskInput));
    };
    const lambdaHandlers = { [def.coordinatorFunctionArn]: runTask, [def.coordinatorFunctionName]: runTask };
    // a round reads the acks in the control table itself (a DynamoDB task), over the emulator's wire as on AWS
    const roundsDynamo = def.rounds ? createAwsClients({ region: this.emulators.region, credentials: this.emulators.credentials, endpoints: { dynamodb: this.emulators.endpoints.dynamodb }, maxAttempts: 3 }).dynamodb : undefined;
    const rounds = def.rounds ? [new LocalStepFunctions({ definition: def.rounds.definition, stateMachineArn: def.rounds.stateMachineArn, lambdaHandlers, waitTimeOverrides: roundWaits, dynamodb: roundsDynamo! })] : [];
    this.stepFunctions = new LocalStepFunctions({
      definition: def.definition,
      stateMachineArn: def.stateMachineArn,
      lambdaHandlers,
      nested: rounds,
      waitTimeOverrides: waits,
      ...(o.checkpointIntervalMs !== undefined ? { taskTimeoutOverrides: commitPauseOverride(def.definition, o.checkpointIntervalMs) } : {}),
    });
    const { endpoint: sfn } = await this.stepFunctions.listen();
    this.sfnEndpoint = sfn;
    const clientOptions = { region: this.emulators.region, credentials: this.emulators.credentials, endpoints: { ...this.emulators.endpoints, sfn }, maxAttempts: 3 };
    this.clients = createAwsClients(clientOptions);
    this.sinks = new SinkReader(this.plan, this.names, this.clients, this.collected);
    // a short request timeout only where the engine runs: a producer's retry after a timed-out
    // PutRecords that did land puts its records twice (two records to the job)
    this.stageClients = o.requestTimeoutMs !== undefined ? createAwsClients({ ...clientOptions, requestTimeoutMs: o.requestTimeoutMs }) : this.clients;
    const targets: CommitTarget[] = [this.collected, ...stagedSinkPublishers(this.plan, this.names, this.clients, this.names.bucket, this.telemetry)];
    tasks = coordinatorTasks({
      plan: this.plan,
      names: this.names,
      clients: this.clients,
      telemetry: this.telemetry,
      commitTargets: o.wrapCommitTargets ? o.wrapCommitTargets(targets) : targets,
      stateMachineArn: def.stateMachineArn,
      idle: o.idleCoordinator ?? false,
      pauseMs: o.checkpointIntervalMs ?? pauseMsOf(this.plan.checkpoint),
      ...(o.wrapCoordinator ? { wrapRun: o.wrapCoordinator } : {}),
      ...(o.coordinatorClock ? { now: o.coordinatorClock } : {}),
    });
    this.coordinator = tasks.coordinator;
    const { provisionJob } = await import('./provision.js');
    if (o.restoreFrom !== undefined) await this.dropInnerStreams();
    await provisionJob(this.plan, this.names, this.clients);
    if (o.restoreFrom !== undefined) {
      this.restored = await restoreSavepoint({ plan: this.plan, names: this.names, clients: this.clients, bucket: this.names.bucket }, o.restoreFrom);
    }
    this.running = true;
    if (o.beforeStart) await o.beforeStart(this);

    this.functions = new LocalStageFunctions({
      job: this.job,
      plan: this.plan,
      names: this.names,
      telemetry: this.telemetry,
      collected: this.collected,
      clients: this.clients,
      stageClients: this.stageClients,
      options: o,
      track: (p) => this.track(p),
    });
    this.functions.start();
    await this.stepFunctions.startExecution({ iteration: 0 });
    this.stopSchedules = startCoordinatorSchedules({
      stepFunctions: this.stepFunctions,
      coordinator: this.coordinator,
      telemetry: this.telemetry,
      isRunning: () => this.running,
      ...(o.statusEventLost ? { statusEventLost: o.statusEventLost } : {}),
      ...(o.watchdogIntervalMs !== undefined ? { watchdogIntervalMs: o.watchdogIntervalMs } : {}),
      runWatchdog: () => this.track(tasks!.run({ action: 'watchdog' })),
    });
  }

  /** Remembers a running task until it settles (stop() waits for all of them). */
  private track<T>(p: Promise<T>): Promise<T> {
    this.tasks.add(p);
    const untrack = () => this.tasks.delete(p);
    p.then(untrack, untrack);
    return p;
  }

  /** Deletes the inner stages' streams (a restore creates them again with the plan's parallelism). */
  private async dropInnerStreams(): Promise<void> {
    for (const stage of this.plan.stages) {
      if (stage.input.kind === 'source') continue;
      const name = this.names.streamOf(stage);
      try {
        await this.clients.kinesis.send(new DeleteStreamCommand({ StreamName: name, EnforceConsumerDeletion: true }));
      } catch (err) {
        if ((err as { name?: string }).name === 'ResourceNotFoundException') continue;
        throw err;
      }
      for (let i = 0; ; i++) {
        try {
          await this.clients.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: name }));
        } catch (err) {
          if ((err as { name?: string }).name === 'ResourceNotFoundException') break;
          throw err;
        }
        if (i > 400) throw new Error(`stream ${name} was not deleted`);
        await sleep(50);
      }
    }
  }

  /** `emulatorEnv` and the endpoint of this run's Step Functions (AWS_ENDPOINT_URL_SFN). */
  get stackEnv(): Record<string, string> {
    return { ...this.emulators.env(), ...(this.sfnEndpoint ? { AWS_ENDPOINT_URL_SFN: this.sfnEndpoint } : {}) };
  }

  /** The stage instances cached in a stage's simulated environments (observers read their watermarks). */
  instancesOf(stageId: string): StageInstance[] {
    return this.functions?.instancesOf(stageId) ?? [];
  }

  /** The emulators' endpoints and settings, for producers and readers in other processes. */
  get emulatorEnv(): Record<string, string> {
    return this.emulators.env();
  }

  /**
   * Puts records on a source stream the way an ordinary producer does (PutRecords, random partition
   * keys). Returns where each record landed, in the order given.
   */
  async produce(sourceName: string, records: ReadonlyArray<unknown>, options: { partitionKey?: (r: unknown, i: number) => string } = {}): Promise<RecordPosition[]> {
    const source = this.plan.sources.find((s) => s.name === sourceName);
    if (!source) throw new UsageError(`job "${this.plan.job}"`, `source "${sourceName}"`, `does not exist (sources: ${this.plan.sources.map((s) => s.name).join(', ')})`);
    const stream = this.names.sourceStream(source);
    const enc = new TextEncoder();
    const entries = records.map((r, i): PutEntry => ({
      data: r instanceof Uint8Array ? r : enc.encode(typeof r === 'string' && source.format !== 'json' ? r : JSON.stringify(r)),
      partitionKey: options.partitionKey ? options.partitionKey(r, i) : `pk-${i % 97}`,
    }));
    const positions: RecordPosition[] = await putRecordsUntilAccepted(sdkKinesisApi(this.clients.kinesis), stream, entries);
    for (const p of positions) this.produced.note(source.id, p);
    return positions;
  }


  /**
   * Produces the non-blank lines of JSON-lines files into sources, file after file, remembering the
   * file and line of each record so that dead letters can point at them (`deadLettersWithLines`).
   */
  async produceFiles(inputs: ReadonlyArray<{ source: string; file: string }>, onProgress?: (done: number, total: number) => void): Promise<Array<{ source: string; file: string; records: number }>> {
    const read = inputs.map(({ source, file }) => ({ source, file, lines: readNumberedLines(file) }));
    const total = read.reduce((a, r) => a + r.lines.length, 0);
    let done = 0;
    onProgress?.(0, total);
    const enc = new TextEncoder();
    for (const { source, file, lines } of read) {
      for (let i = 0; i < lines.length; i += 500) {
        const chunk = lines.slice(i, i + 500);
        const positions = await this.produce(source, chunk.map((l) => enc.encode(l.text)));
        positions.forEach((p, j) => this.lineOf.set(`${source}/${p.shardId}/${p.sequenceNumber}`, { source, file, line: chunk[j]!.line }));
        onProgress?.((done += chunk.length), total);
      }
    }
    return read.map((r) => ({ source: r.source, file: r.file, records: r.lines.length }));
  }

  /** Ends the input of every source: each one's watermark jumps to the end of time, firing every window, and the job then finishes. */
  async endAllInput(): Promise<void> {
    for (const source of this.plan.sources) await this.endInput(source.name);
  }

  /** Billed state transitions of the coordinator's executions so far (Express rounds are billed by duration, not transitions). */
  coordinatorTransitions(): number {
    return this.stepFunctions.totalTransitions();
  }

  /**
   * Waits until `count` checkpoints that started after `since` have completed, and one of them
   * covers every record this runner had put on a source by then (sources put barriers at their read
   * position, so a checkpoint started later may still leave a backlog out): then every record
   * produced before `since` has been processed, and its effects are in the sinks.
   */
  async awaitCheckpoints(count: number, since: Date, timeoutMs = 120_000, onProgress?: (done: number) => void): Promise<CheckpointRecord[]> {
    const deadline = Date.now() + timeoutMs;
    return this.awaitCheckpointsUntil(count, since, () => deadline, onProgress);
  }

  private async awaitCheckpointsUntil(count: number, since: Date, deadline: () => number, onProgress?: (done: number) => void): Promise<CheckpointRecord[]> {
    const t0 = Date.now();
    const covers = this.produced.coverageOfNow();
    for (;;) {
      const done = (await this.coordinator.list()).filter((c) => c.status === 'COMPLETED' && Date.parse(c.startedAt) > since.getTime());
      onProgress?.(done.length);
      // the source's shards are listed only when the answer depends on them: a checkpoint that
      // leaves a named shard's records out is not covering, whatever is open
      if (done.length >= count && done.some(covers(NONE_OPEN)) && done.some(covers(await this.openSourceInstances()))) return done;
      // a bounded job that finished takes no more checkpoints: its last one covers every record
      if ((await this.coordinator.jobStatus()).finishedAt !== undefined) return done;
      if (Date.now() > deadline()) {
        const all = await this.coordinator.list();
        throw new Error(
          `only ${done.length} of ${count} checkpoints completed in ${Date.now() - t0} ms; last: ${JSON.stringify(all.slice(-3))}; executions: ${JSON.stringify(this.stepFunctions.executions().slice(-2))}`,
        );
      }
      await sleep(100);
    }
  }

  /** The source instances (`instanceIdOf`) whose shards are open now. */
  private async openSourceInstances(): Promise<Set<string>> {
    const open = new Set<string>();
    for (const stage of this.plan.stages) {
      if (stage.input.kind !== 'source') continue;
      for (const s of await listAllShards(this.clients, this.names.streamOf(stage))) {
        if (s.endingSequenceNumber === undefined) open.add(instanceIdOf(stage.id, s.shardId));
      }
    }
    return open;
  }

  /** Puts an end marker into every open shard of a source: its watermark jumps to the end of time, firing every window. */
  async endInput(sourceName: string): Promise<void> {
    const source = this.plan.sources.find((s) => s.name === sourceName);
    if (!source) throw new UsageError(`job "${this.plan.job}"`, `source "${sourceName}"`, `does not exist (sources: ${this.plan.sources.map((s) => s.name).join(', ')})`);
    const stream = this.names.sourceStream(source);
    await endInput(kinesisSourceWriter(this.clients.kinesis), stream);
  }

  /**
   * Takes a savepoint: asks the coordinator for one and waits until it is written. With `stop`,
   * the job takes no checkpoint after it, and this run's pollers and workflow are stopped (the
   * emulators stay up when they were passed in, for a run that restores the savepoint).
   */
  async savepoint(options: { id?: string; stop?: boolean; timeoutMs?: number; onProgress?: (status: string) => void } = {}): Promise<SavepointRecord> {
    const req = await this.coordinator.requestSavepoint({ ...(options.id !== undefined ? { id: options.id } : {}), stop: options.stop ?? false });
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    for (;;) {
      const sp = await this.coordinator.getSavepoint(req.id);
      options.onProgress?.(sp?.status ?? 'REQUESTED');
      if (sp?.status === 'COMPLETED') {
        if (options.stop) await this.stop();
        return sp;
      }
      if (sp?.status === 'FAILED') throw new Error(`savepoint ${req.id} failed: ${sp.reason ?? 'unknown reason'}`);
      if (Date.now() > deadline) throw new Error(`savepoint ${req.id} did not complete in ${options.timeoutMs ?? 60_000} ms (status ${sp?.status})`);
      await sleep(50);
    }
  }

  /**
   * Rescales a stage while the job runs: reshards its input stream at a checkpoint boundary (see
   * shared/coordinator/rescale.ts) and waits until the first checkpoint on the new shards completed.
   */
  async rescaleInPlace(stageId: string, shards: number, options: { timeoutMs?: number; deadline?: () => number; onProgress?: (phase: string) => void } = {}): Promise<RescaleRecord> {
    await this.coordinator.rescales.request(stageId, shards);
    const started = Date.now();
    const fixed = started + (options.timeoutMs ?? 120_000);
    // a caller may move the deadline while it waits (the chaos harness bounds it from when the faults stop)
    const deadline = options.deadline ?? (() => fixed);
    for (;;) {
      const r = await this.coordinator.rescales.get();
      options.onProgress?.(r?.phase ?? 'requested');
      if (r?.phase === 'done') {
        // the stream has its new shards; a checkpoint taken on them proves every instance took over
        await this.awaitCheckpointsUntil(1, new Date(Date.parse(r.finishedAt!) - 1), deadline);
        return r;
      }
      if (Date.now() > deadline()) throw new Error(`rescale of ${stageId} to ${shards} shards did not finish in ${Date.now() - started} ms (phase ${r?.phase})`);
      await sleep(100);
    }
  }

  /** Every value published so far by a file sink, object by object in key order. */
  readFileSink<T = unknown>(sinkName: string): Promise<Array<{ key: string; values: T[] }>> {
    return this.sinks.fileSink<T>(sinkName);
  }

  /** Every record on a Kinesis sink's stream, parsed (`{ id, epoch, value }`). */
  readKinesisSink<T = unknown>(sinkName: string): Promise<Array<{ id: string; epoch: number; value: T }>> {
    return this.sinks.kinesisSink<T>(sinkName);
  }

  /** Waits until a bounded job has read all of its input and committed the checkpoint that covers it. */
  async awaitFinished(timeoutMs = 120_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const st = await this.coordinator.jobStatus();
      if (st.finishedAt !== undefined) return st.finishedAt;
      if (Date.now() > deadline) throw new Error(`the job did not finish within ${timeoutMs} ms (has every source received its end of input?)`);
      await sleep(200);
    }
  }

  /** Every row of an upsert sink's table. */
  readUpsertSink<T = Record<string, unknown>>(sinkName: string): Promise<T[]> {
    return this.sinks.upsertSink<T>(sinkName);
  }

  /** Everything a sink holds, as the values the job wrote (see SinkReader.values). */
  readSink(sinkName: string): Promise<unknown[]> {
    return this.sinks.values(sinkName);
  }

  /**
   * Dead letters, each with the source, input file and line of the record it holds when that record
   * came from `produceFiles` (a record rejected in a later stage is named by its stage and position).
   */
  deadLettersWithLines(): Promise<LocatedDeadLetter[]> {
    return this.sinks.deadLettersWithLines(this.lineOf);
  }

  /** Dead letters written so far, parsed. */
  readDeadLetters(): Promise<DeadLetterRecord[]> {
    return this.sinks.deadLetters();
  }

  /** What each simulated execution environment holds: its cached instances and their keys. */
  environments(): Array<{ id: string; instances: number; keys: number }> {
    return this.functions?.environments() ?? [];
  }

  async stats(): Promise<RunStats> {
    const checkpoints = await this.coordinator.list();
    const completed = checkpoints.filter((c) => c.status === 'COMPLETED');
    const hits = this.telemetry.get('CacheHit');
    const misses = this.telemetry.get('CacheMiss');
    // a batch the lease already covered ran on no instance: a batch, but neither hit nor miss
    const already = this.telemetry.get('BatchAlreadyProcessed');
    return {
      checkpoints,
      completed: completed.length,
      aborted: checkpoints.filter((c) => c.status === 'ABORTED').length,
      meanCheckpointMs: completed.length ? completed.reduce((a, c) => a + (c.durationMs ?? 0), 0) / completed.length : 0,
      batches: hits + misses + already,
      cacheHitRate: hits + misses ? hits / (hits + misses) : 0,
      recordsIn: this.telemetry.get('RecordsIn'),
      deadLetters: this.telemetry.get('DeadLetters'),
      invocations: this.functions?.invocations ?? 0,
    };
  }

  /** Stops pollers, the workflow and (if started here) the emulators. Idempotent. */
  async stop(): Promise<void> {
    this.stopSchedules?.();
    await this.functions?.stop();
    await this.stepFunctions?.stop();
    await Promise.allSettled([...this.tasks]);
    this.running = false;
    if (this.ownEmulators) await this.emulators?.stop();
  }

  /** false once stopped (a stop-with-savepoint stops the run) */
  get isRunning(): boolean {
    return this.running;
  }
}
