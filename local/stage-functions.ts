/**
 * The stage functions of a local run, run as Lambda runs them: per stage, several simulated execution
 * environments, each its own StageRunner with its own cache and recycled at random before an
 * invocation (its caches are then gone), and one event source poller on the stage's stream that
 * hands each batch to a free environment, so a shard's batches move between environments.
 */
import type { KinesisStreamEvent } from 'aws-lambda';
import { handleKinesisBatch } from '../functions/operator.js';
import type { AwsClients } from '../shared/adapters/aws/clients.js';
import { awsCoordinatorWake } from '../shared/adapters/aws/coordinator-ports.js';
import { createAwsPorts } from '../shared/adapters/aws/ports.js';
import type { CollectRegistry } from '../shared/adapters/memory/collect-registry.js';
import type { CountingTelemetry } from '../shared/adapters/telemetry.js';
import type { Job } from '../shared/api/job.js';
import type { Plan, PlanStage } from '../shared/plan/plan.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import { mulberry32 } from '../shared/runtime/random.js';
import type { StageInstance } from '../shared/runtime/stage-instance.js';
import { createStageRunner, type StageRunner } from '../shared/runtime/stage-runner.js';
import { EventSourcePoller, type ExecutionEnvironment, type KinesisHandler } from './event-source-poller.js';
import type { LocalRunOptions } from './local-run-options.js';

interface Env {
  id: string;
  runner: StageRunner;
}

export interface StageFunctionsContext {
  readonly job: Job;
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly telemetry: CountingTelemetry;
  readonly collected: CollectRegistry;
  /** the clients the pollers use */
  readonly clients: AwsClients;
  /** the clients the stage functions' environments use */
  readonly stageClients: AwsClients;
  readonly options: LocalRunOptions;
  /** remembers an invocation until it settles (the run's stop() waits for it) */
  track<T>(p: Promise<T>): Promise<T>;
}

export class LocalStageFunctions {
  private readonly envs = new Map<string, Env[]>();
  private pollers: EventSourcePoller[] = [];
  private readonly rng: () => number;
  /** handler invocations so far, retries and zombies included */
  invocations = 0;

  constructor(private readonly x: StageFunctionsContext) {
    this.rng = mulberry32(x.options.seed ?? 1);
  }

  /** Creates every stage's environments and starts its poller. */
  start(): void {
    const o = this.x.options;
    for (const stage of this.x.plan.stages) {
      const count = o.environments ?? 3;
      const envs: Env[] = [];
      for (let i = 0; i < count; i++) envs.push({ id: `${stage.id}-env${i}`, runner: this.newRunner(stage, `${stage.id}-env${i}`) });
      this.envs.set(stage.id, envs);
      // as the deployed source function does: a batch that calls for it wakes a parked coordinator
      const waker = o.idleCoordinator && stage.input.kind === 'source' ? awsCoordinatorWake(this.x.names, this.x.stageClients) : undefined;
      const wake = waker ? (id: string, cue: { readonly token?: string }) => waker.afterBatch(id, cue) : undefined;
      const environments = envs.map((e): ExecutionEnvironment => {
        const handler: KinesisHandler = async (event: KinesisStreamEvent) => {
          this.invocations++;
          if (this.rng() < (o.recycleProbability ?? 0.05)) {
            // the environment was recycled between invocations: its caches are gone
            e.runner = this.newRunner(stage, e.id);
            this.x.telemetry.count('EnvironmentsRecycled');
          }
          return handleKinesisBatch(e.runner, event, wake);
        };
        const reset = () => {
          e.runner = this.newRunner(stage, e.id);
        };
        const invoke = o.wrapHandler ? o.wrapHandler(handler, { stage, environment: e.id, reset }) : handler;
        // tracked so that stop() waits for every invocation, a zombie the poller gave up on included:
        // one still writing when the emulators stop would fail against a closed store
        return { id: e.id, handler: (event: KinesisStreamEvent) => this.x.track(invoke(event)) };
      });
      const poller = new EventSourcePoller({
        kinesis: this.x.clients.kinesis,
        streamName: this.x.names.streamOf(stage),
        environments,
        batchSize: o.batchSize ?? 100,
        ...(o.invocationTimeoutMs !== undefined ? { invocationTimeoutMs: o.invocationTimeoutMs } : {}),
        seed: (o.seed ?? 1) + this.pollers.length,
        pollIntervalMs: 25,
        onInvocation: (info) => {
          if (info.outcome === 'error') {
            this.x.telemetry.count('InvocationErrors');
            this.x.telemetry.log('warn', 'invocation failed; the batch will be retried', {
              stage: stage.id,
              shardId: info.shardId,
              error: info.error instanceof Error ? `${info.error.name}: ${info.error.message}` : String(info.error),
            });
          }
          o.onInvocation?.(stage.id, info);
        },
        onError: (err) => this.x.telemetry.log('warn', 'poller error', { stage: stage.id, error: String(err) }),
      });
      this.pollers.push(poller);
      poller.start();
    }
  }

  /** Stops the pollers (waiting for their invocations in flight, not for zombies). */
  async stop(): Promise<void> {
    await Promise.all(this.pollers.map((p) => p.stop()));
    this.pollers = [];
  }

  private newRunner(stage: PlanStage, environment: string): StageRunner {
    const o = this.x.options;
    const clients = o.wrapClients ? o.wrapClients(this.x.stageClients, { stage, environment }) : this.x.stageClients;
    let ports = createAwsPorts(this.x.plan, this.x.names, clients, this.x.telemetry, { collectSink: this.x.collected });
    if (o.wrapPorts) ports = o.wrapPorts(ports, { stage, environment });
    return createStageRunner({ job: this.x.job, plan: this.x.plan, stage, names: this.x.names, ports, options: o.runner });
  }

  /** The stage instances cached in a stage's simulated environments. */
  instancesOf(stageId: string): StageInstance[] {
    return (this.envs.get(stageId) ?? []).flatMap((e) => e.runner.cached());
  }

  /** What each simulated execution environment holds: its cached instances and their keys. */
  environments(): Array<{ id: string; instances: number; keys: number }> {
    return [...this.envs.values()].flat().map((e) => {
      const cached = e.runner.cached();
      return { id: e.id, instances: cached.length, keys: cached.reduce((a, i) => a + i.state.size, 0) };
    });
  }
}
