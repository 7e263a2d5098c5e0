/**
 * What a local run can be told: how many simulated execution environments each stage has and how
 * often they are recycled, the ESM's batch size and timeout, the checkpoint interval and coordinator
 * mode, a savepoint to restore, and the hooks that wrap ports, clients, handlers, the coordinator and
 * its commit targets (fault injection in tests and the chaos harness).
 */
import type { AwsClients } from '../shared/adapters/aws/clients.js';
import type { PublishedOutputs } from '../shared/adapters/memory/collect-registry.js';
import type { CommitTarget } from '../shared/coordinator/coordinator.js';
import type { CoordinatorTaskInput } from '../shared/coordinator/protocol.js';
import type { PlanStage } from '../shared/plan/plan.js';
import type { RuntimePorts } from '../shared/runtime/ports.js';
import type { StageRunnerOptions } from '../shared/runtime/stage-runner.js';
import type { LocalEmulators } from './emulators.js';
import type { InvocationInfo, KinesisHandler } from './event-source-poller.js';
import type { LocalJobRunner } from './runner.js';

export interface LocalRunOptions {
  /** simulated execution environments per stage; @default 3 */
  readonly environments?: number;
  /** chance that an environment is recycled (its caches lost) before an invocation; @default 0.05 */
  readonly recycleProbability?: number;
  /** seed of routing and recycling; @default 1 */
  readonly seed?: number;
  /** ESM batch size; @default 100 */
  readonly batchSize?: number;
  /** time between checkpoints, replacing the plan's (Wait states of the workflow); @default the plan's */
  readonly checkpointIntervalMs?: number;
  /**
   * every how many checkpoints the instances apply their rows to the state table, replacing the
   * job's `checkpoint.materializeEvery` (1–16; `sluice dev` uses 1, so that queryable state is as
   * of the last checkpoint); @default the job's
   */
  readonly materializeEvery?: number;
  /** park the coordinator while no source shard holds input (as deployed by default); a source stage must then wake it (shared/coordinator/wake.ts); @default false */
  readonly idleCoordinator?: boolean;
  /**
   * run the checkpoints in Express rounds, as SluiceJob deploys them by default where allowed; local
   * runs keep the Standard loop unless asked, so their executions keep every step in their history;
   * @default false
   */
  readonly expressCheckpoints?: boolean;
  /** reuse running emulators instead of starting new ones (they are then not stopped) */
  readonly emulators?: LocalEmulators;
  readonly prefix?: string;
  readonly runner?: StageRunnerOptions;
  /** where collect sinks' published outputs are kept; @default in memory (a long run keeps them in files: FilePublishedOutputs) */
  readonly publishedOutputs?: PublishedOutputs;
  /** wraps the ports each environment gets (fault injection in tests) */
  readonly wrapPorts?: (ports: RuntimePorts, ctx: { stage: PlanStage; environment: string }) => RuntimePorts;
  /** wraps the SDK clients each environment's ports use (fault injection at the wire: throttling, partial PutRecords) */
  readonly wrapClients?: (clients: AwsClients, ctx: { stage: PlanStage; environment: string }) => AwsClients;
  /**
   * wraps each environment's handler (duplicate delivery, slow invocations that become zombies);
   * `reset` re-initialises the environment (its caches are gone), as Lambda does after a timeout
   */
  readonly wrapHandler?: (handler: KinesisHandler, ctx: { stage: PlanStage; environment: string; reset: () => void }) => KinesisHandler;
  /** the coordinator's wall clock (fault injection: environments whose clocks are off); @default the system clock */
  readonly coordinatorClock?: () => Date;
  /** wraps the coordinator function (task failures) */
  readonly wrapCoordinator?: (run: (input: CoordinatorTaskInput) => Promise<unknown>) => (input: CoordinatorTaskInput) => Promise<unknown>;
  /** an invocation running longer is treated as timed out: its batch is retried elsewhere while it goes on */
  readonly invocationTimeoutMs?: number;
  /**
   * the request timeout of the stage functions' SDK clients (a call without a response fails and is
   * retried); producers, pollers and the coordinator keep the default; @default the clients' default
   */
  readonly requestTimeoutMs?: number;
  /** run the coordinator's watchdog task this often, as the stack's schedule does; @default never */
  readonly watchdogIntervalMs?: number;
  /**
   * fault injection: the status-change event of this failed coordinator execution is lost (the
   * immediate restart skips it; only the watchdog can start a new execution)
   */
  readonly statusEventLost?: (executionArn: string) => boolean;
  /** where structured log lines go; @default nowhere */
  readonly log?: (line: string) => void;
  readonly onInvocation?: (stage: string, info: InvocationInfo) => void;
  /**
   * Restore this savepoint before starting (the job's state and control records are reset, inner
   * stage streams are created again with the plan's shard counts, the source streams are kept).
   * Use the `prefix` and `emulators` of the run that took the savepoint.
   */
  readonly restoreFrom?: string;
  /** wraps the coordinator's commit targets (fault injection: a crash between COMPLETED and publishing) */
  readonly wrapCommitTargets?: (targets: readonly CommitTarget[]) => readonly CommitTarget[];
  /** runs once the job's resources exist, before its functions and coordinator start (input put there is a backlog) */
  readonly beforeStart?: (runner: LocalJobRunner) => Promise<void>;
}
