/**
 * The checkpoint coordinator workflow, defined once with the Step Functions L2
 * constructs. `cdk deploy` deploys it, and the local runner executes the very same synthesized
 * definition (see `coordinator-definition.ts`), so there is no second copy of the loop to drift.
 *
 * One checkpoint in flight, the Standard loop (`expressCheckpoints: false`, or where rounds are not
 * allowed or cost more): three billed transitions per checkpoint.
 *
 * ```
 * Init ─▶ Fresh | Resume ─▶ Allocate ─────▶ AwaitAcks ─────▶ Commit ──(heartbeat timeout = the pause)──▶ Allocate
 *                            │  ▲  ▲            │                                               (loop)
 *                            │  │  └ InputArrived / idle re-check (a parked token)
 *                            │  │                 ├─ window passed ─▶ Overdue ─▶ Extend? ─▶ AwaitAcks (acks still arriving)
 *                            │  │                 │                                   └──▶ Pause (n was stuck: aborted)
 *                            │  └──────────── Pause ◀── Abort ◀┘ (ack error)
 *                            └─ ContinuedAsNew ─▶ Done (a fresh execution took over)
 * ```
 *
 * `Allocate` and `Commit` are task-token tasks: `Allocate` answers its own token once n is
 * allocated and injected, or parks it while no input arrives (shared/coordinator/loop.ts);
 * `Commit` heartbeats while it commits and then leaves its token to the heartbeat timeout, which is the pause. With
 * `checkpoint.maxConcurrent > 1` the workflow is Allocate → Inject → Settle → Full? → Pause →
 * Count → ContinueAsNew? as before. By default (`roundsByDefault`) the checkpoints run in Express rounds
 * (`roundsLoop`) where they are allowed and cost less.
 *
 * The payload of every task is a `CoordinatorTaskInput` (shared/coordinator/protocol.ts). The
 * workflow keeps its own state small: `{ iteration, ckpt?: { checkpointId }, error? }`.
 *
 * JSONPath only: the local interpreter ignores JSONata and `Assign`.
 */
import { ArnFormat, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import { roundsLoop } from './coordinator-rounds.js';
import { COORDINATOR_STATES, addServiceRetry, pauseSeconds, pauseState, retryIdempotent, wholeSeconds } from './coordinator-states.js';
import { CHECKPOINT_IN_FLIGHT } from '../shared/coordinator/protocol.js';
import { roundsByDefault, roundsRefusal } from '../shared/coordinator/loop.js';
import { ceilingMs } from '../shared/coordinator/timeouts.js';
import { LOOP_ERRORS } from '../shared/coordinator/wake.js';
import type { CheckpointSettings } from '../shared/plan/plan.js';

export { COORDINATOR_STATES, LAMBDA_SERVICE_ERRORS, pauseSeconds, wholeSeconds } from './coordinator-states.js';

export interface CoordinatorStateMachineProps {
  /** physical name; the workflow restarts itself under this name (continue-as-new) */
  readonly stateMachineName: string;
  /** the function that performs the tasks (`coordinatorHandler`) */
  readonly coordinatorFunction: lambda.IFunction;
  /** the plan's checkpoint settings: timeout, pause and continue-as-new period come from here */
  readonly checkpoint: CheckpointSettings;
  /**
   * What the workflow logs to CloudWatch Logs.
   * @default sfn.LogLevel.ERROR: failed states and executions with their data. ALL logs every
   *   transition (about 1 KB each, three per checkpoint: ≈ 0.13 GB/month at a 2 s interval), which
   *   is worth it while debugging a stuck checkpoint and not otherwise.
   */
  readonly logLevel?: sfn.LogLevel;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /** removal policy of the workflow's log group; @default RemovalPolicy.DESTROY */
  readonly logRemovalPolicy?: RemovalPolicy;
  /** X-Ray tracing of the workflow; @default false */
  readonly tracing?: boolean;
  /**
   * Run the checkpoints in Express rounds: the Standard execution allocates (or parks) and starts
   * an Express execution (`<stateMachineName>-rounds`) that waits for acks, commits, pauses and
   * allocates the next checkpoint, for up to ROUND.allocateForMs; a few Standard transitions per
   * round instead of three per checkpoint. Needs one checkpoint in flight and a pause of at most
   * MAX_ROUND_PAUSE_MS: `true` throws otherwise, `false` keeps the Standard loop.
   * @default `roundsByDefault`: rounds where they are allowed and cost less, else the Standard loop
   */
  readonly expressCheckpoints?: boolean;
  /** the job's control table: Express rounds read a checkpoint's acks in it themselves */
  readonly controlTable: dynamodb.ITable;
  /** a round first reads a new checkpoint's acks this long after injecting it (`barrierWaitMs`); @default 0 */
  readonly barrierWaitSeconds?: number;
}

/** The longest a commit may run (heartbeats and all) before its state times out and Allocate takes over. */
export const COMMIT_TIMEOUT_SECONDS = 900;

/** A parked (idle) Allocate looks for input again this often, even if no wake-up reaches it. */
export const IDLE_RECHECK_SECONDS = 3600;

/**
 * The local runner's override of the pause (`checkpointIntervalMs`): the Commit task's heartbeat
 * timeout is the pause, so it is overridden with the Wait states. Empty for the concurrent workflow.
 */
export function commitPauseOverride(definition: { States: Record<string, Record<string, unknown>> }, ms: number): Record<string, number> {
  const commit = definition.States[COORDINATOR_STATES.commit];
  return commit && String(commit.Resource).endsWith('.waitForTaskToken') ? { [COORDINATOR_STATES.commit]: ms } : {};
}

/**
 * The longest pause between `Allocate` attempts on CheckpointInFlightError: one `timeoutMs`, at most
 * 30 s. What it waits for (a commit, a reshard, a checkpoint left open) ends within about a window;
 * a longer backoff only delays the next checkpoint after it (a retry is one state transition).
 */
export function allocateRetryMaxDelaySeconds(checkpoint: CheckpointSettings): number {
  return Math.min(30, wholeSeconds(checkpoint.timeoutMs));
}

/**
 * Retry plan of `Allocate` on CheckpointInFlightError: exponential backoff (1 s, doubling, capped at
 * `allocateRetryMaxDelaySeconds`) with enough attempts to outwait the hard ceiling of a checkpoint
 * (shared/coordinator/timeouts.ts), so a checkpoint left open by a dead execution has been aborted
 * by the coordinator function before this execution gives up, even one whose acks kept arriving.
 */
export function allocateRetryAttempts(checkpoint: CheckpointSettings): number {
  const budget = ceilingMs(checkpoint.timeoutMs) / 1000 + 60;
  const cap = allocateRetryMaxDelaySeconds(checkpoint);
  let waited = 0;
  let attempts = 0;
  for (let delay = 1; waited < budget; delay = Math.min(delay * 2, cap)) {
    waited += delay;
    attempts++;
  }
  return attempts;
}

/** The coordinator workflow: a Standard state machine with logging and X-Ray tracing. */
export class CoordinatorStateMachine extends Construct {
  /** ARN of a state machine named `name` in the stack's account and region, built without a reference. */
  static arnForName(scope: Construct, name: string): string {
    return Stack.of(scope).formatArn({
      service: 'states',
      resource: 'stateMachine',
      resourceName: name,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
  }

  readonly stateMachine: sfn.StateMachine;
  readonly logGroup: logs.LogGroup;
  /** the Express workflow of the rounds (expressCheckpoints) */
  readonly rounds?: sfn.StateMachine;

  constructor(scope: Construct, id: string, props: CoordinatorStateMachineProps) {
    super(scope, id);
    const { checkpoint } = props;
    const S = COORDINATOR_STATES;
    if (!Number.isInteger(checkpoint.continueAsNewAfter) || checkpoint.continueAsNewAfter < 1) {
      throw new Error(`checkpoint.continueAsNewAfter must be a positive integer, got ${checkpoint.continueAsNewAfter}`);
    }
    const checkpointId = sfn.JsonPath.numberAt('$.ckpt.checkpointId');

    // Init: the iteration counter comes from the input when it holds a number ({"iteration": n});
    // any other input (the console's sample, {}) starts at 0. Only `iteration` is kept. A Choice
    // rather than a merge with a JSON literal: intrinsic string escapes differ between Step
    // Functions and the local interpreter, path tests do not.
    const fresh = sfn.Pass.jsonPath(this, S.fresh, {
      comment: 'no usable iteration in the input: start at 0',
      parameters: { iteration: 0 },
    });
    const resume = sfn.Pass.jsonPath(this, S.resume, {
      comment: 'keep the iteration of the input, drop the rest',
      parameters: { iteration: sfn.JsonPath.numberAt('$.iteration') },
    });
    const init = sfn.Choice.jsonPath(this, S.init, { comment: 'iteration from the input, or 0' })
      .when(sfn.Condition.not(sfn.Condition.isPresent('$.iteration')), fresh)
      .when(sfn.Condition.isNumeric('$.iteration'), resume)
      .otherwise(fresh);

    this.logGroup = new logs.LogGroup(this, 'Logs', {
      // the vended-logs prefix keeps the CloudWatch Logs resource policy small
      logGroupName: `/aws/vendedlogs/states/${props.stateMachineName}`,
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: props.logRemovalPolicy ?? RemovalPolicy.DESTROY,
    });

    const refusal = roundsRefusal(checkpoint);
    if (props.expressCheckpoints && refusal) throw new Error(refusal);
    if (props.expressCheckpoints ?? roundsByDefault(checkpoint)) {
      this.rounds = roundsLoop(this, props, fresh, resume, () => this.allocateTask(props));
    } else if ((checkpoint.maxConcurrent ?? 1) > 1) {
      this.concurrentLoop(props, fresh, resume, checkpointId);
    } else {
      this.loop(props, fresh, resume, checkpointId);
    }
    const definition = init;

    this.stateMachine = new sfn.StateMachine(this, 'Resource', {
      stateMachineName: props.stateMachineName,
      stateMachineType: sfn.StateMachineType.STANDARD,
      comment: 'Sluice checkpoint coordinator (allocate + inject → await acks → commit + pause → loop)',
      definitionBody: sfn.DefinitionBody.fromChainable(definition),
      logs: {
        destination: this.logGroup,
        level: props.logLevel ?? sfn.LogLevel.ERROR,
        includeExecutionData: true,
      },
      tracingEnabled: props.tracing ?? false,
    });
  }

  /**
   * One checkpoint in flight, three billed transitions per checkpoint on the happy path:
   * Allocate (allocate + inject, or park while quiet) → AwaitAcks → Commit (its timeout is the
   * pause) → Allocate. See shared/coordinator/loop.ts for what each task does.
   */
  private loop(props: CoordinatorStateMachineProps, fresh: sfn.Pass, resume: sfn.Pass, checkpointId: number): void {
    const { checkpoint, coordinatorFunction: fn } = props;
    const S = COORDINATOR_STATES;
    const allocate = this.allocateTask(props);

    const awaitAcks = tasks.LambdaInvoke.jsonPath(this, S.awaitAcks, {
      comment: 'register the task token; the instance whose ack completes the set calls SendTaskSuccess',
      lambdaFunction: fn,
      integrationPattern: sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
      payload: sfn.TaskInput.fromObject({ action: 'await', checkpointId, taskToken: sfn.JsonPath.taskToken }),
      taskTimeout: sfn.Timeout.duration(Duration.seconds(wholeSeconds(checkpoint.timeoutMs))),
      resultPath: sfn.JsonPath.DISCARD,
      retryOnServiceExceptions: false,
    });
    addServiceRetry(awaitAcks);

    const commit = tasks.LambdaInvoke.jsonPath(this, S.commit, {
      comment: 'mark n COMPLETED, publish sink epochs below n, expire unneeded deltas (idempotent); the heartbeat timeout after it is the pause',
      lambdaFunction: fn,
      integrationPattern: sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
      payload: sfn.TaskInput.fromObject({ action: 'commit', checkpointId, taskToken: sfn.JsonPath.taskToken }),
      // the function heartbeats while it commits and once at the end: the heartbeat timeout is the pause
      heartbeatTimeout: sfn.Timeout.duration(Duration.seconds(pauseSeconds(checkpoint))),
      taskTimeout: sfn.Timeout.duration(Duration.seconds(COMMIT_TIMEOUT_SECONDS + pauseSeconds(checkpoint))),
      resultPath: sfn.JsonPath.DISCARD,
      retryOnServiceExceptions: false,
    });
    // the timeout is the pause, not a failure: never retried, caught to the next checkpoint
    commit.addRetry({ errors: [sfn.Errors.TIMEOUT], maxAttempts: 0 });
    // Commit is idempotent and must not be skipped: retry anything else, for about a day.
    retryIdempotent(commit);
    commit.addCatch(allocate, { errors: [sfn.Errors.TIMEOUT], resultPath: sfn.JsonPath.DISCARD });

    const abort = this.abortTask(fn);
    const pause = pauseState(this, S.pause, checkpoint, 'after an abort');
    // timeoutMs is a progress window: when it passes, the coordinator aborts n only if n is stuck
    // (shared/coordinator/timeouts.ts), else the workflow waits again (off the happy path: no cost)
    const overdue = tasks.LambdaInvoke.jsonPath(this, S.overdue, {
      comment: 'the window passed: abort n if no ack came in it (or past the ceiling), else wait again',
      lambdaFunction: fn,
      payload: sfn.TaskInput.fromObject({ action: 'overdue', checkpointId }),
      resultSelector: { extend: sfn.JsonPath.stringAt('$.Payload.extend') },
      resultPath: '$.overdue',
      retryOnServiceExceptions: false,
    });
    retryIdempotent(overdue);
    awaitAcks.addCatch(overdue, { errors: [sfn.Errors.TIMEOUT], resultPath: sfn.JsonPath.DISCARD });
    awaitAcks.addCatch(abort, { errors: [sfn.Errors.ALL], resultPath: '$.error' });
    overdue.next(
      sfn.Choice.jsonPath(this, S.extend, { comment: 'still open and progressing?' })
        .when(sfn.Condition.booleanEquals('$.overdue.extend', true), awaitAcks)
        .otherwise(pause),
    );
    fresh.next(allocate);
    resume.next(allocate);
    allocate.next(awaitAcks).next(commit).next(allocate);
    abort.next(pause).next(allocate);
  }

  /** Allocate: allocate + inject, or park the token while no input arrives; continue-as-new when due. */
  private allocateTask(props: CoordinatorStateMachineProps): tasks.LambdaInvoke {
    const { checkpoint, coordinatorFunction: fn } = props;
    const allocate = tasks.LambdaInvoke.jsonPath(this, COORDINATOR_STATES.allocate, {
      comment: 'allocate checkpoint n and inject its barrier; while no input arrives, wait for the first (no transitions)',
      lambdaFunction: fn,
      integrationPattern: sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
      payload: sfn.TaskInput.fromObject({ action: 'begin', iteration: sfn.JsonPath.numberAt('$.iteration'), taskToken: sfn.JsonPath.taskToken }),
      // a parked coordinator looks again this often even if no wake-up reaches it
      taskTimeout: sfn.Timeout.duration(Duration.seconds(IDLE_RECHECK_SECONDS)),
      // the result replaces the state (no ResultPath: the local interpreter reads "$" as a key)
      resultSelector: { iteration: sfn.JsonPath.numberAt('$.iteration'), ckpt: { checkpointId: sfn.JsonPath.numberAt('$.ckpt.checkpointId') } },
      retryOnServiceExceptions: false,
    });
    addServiceRetry(allocate);
    allocate.addRetry({
      errors: [CHECKPOINT_IN_FLIGHT],
      interval: Duration.seconds(1),
      backoffRate: 2,
      maxDelay: Duration.seconds(allocateRetryMaxDelaySeconds(checkpoint)),
      maxAttempts: allocateRetryAttempts(checkpoint),
    });
    const done = new sfn.Succeed(this, COORDINATOR_STATES.done, { comment: 'a fresh execution took over (continue-as-new)' });
    allocate.addCatch(done, { errors: [LOOP_ERRORS.continuedAsNew], resultPath: sfn.JsonPath.DISCARD });
    allocate.addCatch(allocate, { errors: [LOOP_ERRORS.inputArrived, sfn.Errors.TIMEOUT], resultPath: sfn.JsonPath.DISCARD });
    return allocate;
  }

  private abortTask(fn: lambda.IFunction): tasks.LambdaInvoke {
    const abort = tasks.LambdaInvoke.jsonPath(this, COORDINATOR_STATES.abort, {
      comment: 'mark n ABORTED and still deliver barrier n to every source shard',
      lambdaFunction: fn,
      payload: sfn.TaskInput.fromObject({ action: 'abort', checkpointId: sfn.JsonPath.numberAt('$.ckpt.checkpointId'), reason: sfn.JsonPath.objectAt('$.error') }),
      resultPath: sfn.JsonPath.DISCARD,
      retryOnServiceExceptions: false,
    });
    // Abort is idempotent too, and barrier n must reach every source shard: retry anything.
    retryIdempotent(abort);
    return abort;
  }

  /**
   * Several checkpoints in flight: a new one starts every pause while fewer than maxConcurrent are
   * open. Settle commits the complete ones in order (and aborts the stuck ones); when the window is
   * full the workflow waits on the oldest one's task token, woken by its last ack.
   */
  private concurrentLoop(props: CoordinatorStateMachineProps, fresh: sfn.Pass, resume: sfn.Pass, checkpointId: number): void {
    const { checkpoint, coordinatorFunction: fn } = props;
    const S = COORDINATOR_STATES;
    const allocate = tasks.LambdaInvoke.jsonPath(this, S.allocate, {
      comment: 'allocate checkpoint n (at most maxConcurrent in flight)',
      lambdaFunction: fn,
      payload: sfn.TaskInput.fromObject({ action: 'allocate' }),
      resultSelector: { checkpointId: sfn.JsonPath.numberAt('$.Payload.checkpointId') },
      resultPath: '$.ckpt',
      retryOnServiceExceptions: false,
    });
    addServiceRetry(allocate);
    const inject = tasks.LambdaInvoke.jsonPath(this, S.inject, {
      comment: 'inject barrier n into every source shard (idempotent)',
      lambdaFunction: fn,
      payload: sfn.TaskInput.fromObject({ action: 'inject', checkpointId }),
      resultPath: sfn.JsonPath.DISCARD,
      retryOnServiceExceptions: false,
    });
    addServiceRetry(inject);
    const abort = this.abortTask(fn);
    inject.addCatch(abort, { errors: [sfn.Errors.ALL], resultPath: '$.error' });
    const pause = pauseState(this, S.pause, checkpoint);
    const count = sfn.Pass.jsonPath(this, S.count, {
      comment: 'iteration + 1; drops the finished checkpoint from the state',
      parameters: { iteration: sfn.JsonPath.mathAdd(sfn.JsonPath.numberAt('$.iteration'), 1) },
    });
    const self = sfn.StateMachine.fromStateMachineName(this, 'Self', props.stateMachineName);
    const continueAsNew = tasks.StepFunctionsStartExecution.jsonPath(this, S.continueAsNew, {
      comment: 'a Standard execution keeps at most 25,000 history events: go on as a fresh execution',
      stateMachine: self,
      input: sfn.TaskInput.fromObject({ iteration: 0 }),
      name: sfn.JsonPath.uuid(),
      integrationPattern: sfn.IntegrationPattern.REQUEST_RESPONSE,
      resultPath: sfn.JsonPath.DISCARD,
    });
    continueAsNew.addRetry({ errors: [sfn.Errors.ALL], interval: Duration.seconds(1), backoffRate: 2, maxAttempts: 6 });
    const done = new sfn.Succeed(this, S.done);
    const choice = sfn.Choice.jsonPath(this, S.continueAsNewChoice)
      .when(sfn.Condition.numberGreaterThanEquals('$.iteration', checkpoint.continueAsNewAfter), continueAsNew.next(done))
      .otherwise(allocate);
    const settle = tasks.LambdaInvoke.jsonPath(this, S.settle, {
      comment: 'commit every complete open checkpoint in order, abort the stuck ones (idempotent)',
      lambdaFunction: fn,
      payload: sfn.TaskInput.fromObject({ action: 'settle' }),
      resultSelector: { open: sfn.JsonPath.numberAt('$.Payload.open'), oldest: sfn.JsonPath.numberAt('$.Payload.oldest') },
      resultPath: '$.settled',
      retryOnServiceExceptions: false,
    });
    retryIdempotent(settle);
    const awaitOldest = tasks.LambdaInvoke.jsonPath(this, S.awaitOldest, {
      comment: 'the window is full: register the oldest open checkpoint\'s task token and wait for its last ack',
      lambdaFunction: fn,
      integrationPattern: sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
      payload: sfn.TaskInput.fromObject({ action: 'await', checkpointId: sfn.JsonPath.numberAt('$.settled.oldest'), taskToken: sfn.JsonPath.taskToken }),
      taskTimeout: sfn.Timeout.duration(Duration.seconds(wholeSeconds(checkpoint.timeoutMs))),
      resultPath: sfn.JsonPath.DISCARD,
      retryOnServiceExceptions: false,
    });
    addServiceRetry(awaitOldest);
    // a timeout is settled too: Settle aborts what is stuck (no ack for a window, or past the ceiling)
    awaitOldest.addCatch(settle, { errors: [sfn.Errors.ALL], resultPath: sfn.JsonPath.DISCARD });
    // the window is full (or a stop or a reshard holds checkpoints back): settle, pause, try again
    allocate.addCatch(settle, { errors: [CHECKPOINT_IN_FLIGHT], resultPath: sfn.JsonPath.DISCARD });
    const full = sfn.Choice.jsonPath(this, S.full, { comment: 'as many checkpoints open as allowed?' })
      .when(sfn.Condition.numberGreaterThanEquals('$.settled.open', checkpoint.maxConcurrent!), awaitOldest.next(settle))
      .otherwise(pause);
    abort.next(pause);
    fresh.next(allocate);
    resume.next(allocate);
    allocate.next(inject).next(settle).next(full);
    pause.next(count).next(choice);
  }
}
