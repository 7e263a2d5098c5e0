/**
 * The coordinator's checkpoints in Express rounds (`expressCheckpoints`): the Express workflow that
 * waits for acks, commits, pauses and allocates, and the Standard states that start its rounds.
 * Part of the CoordinatorStateMachine construct (cdk/coordinator-state-machine.ts).
 *
 * JSONPath only: the local interpreter ignores JSONata and `Assign`.
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import { ACK_POLL_SECONDS, directAckReads } from './ack-wait.js';
import { ackReads } from './coordinator-rounds-acks.js';
import type { CoordinatorStateMachineProps } from './coordinator-state-machine.js';
import { COORDINATOR_STATES, addServiceRetry, pauseState, retryIdempotent } from './coordinator-states.js';
import { CHECKPOINT_IN_FLIGHT } from '../shared/coordinator/protocol.js';
import type { RoundEnd } from '../shared/coordinator/loop.js';

/**
 * Checkpoints in Express rounds. The Standard execution stays the coordinator of record:
 *
 * ```
 * Allocate (allocate + inject, or park) ─▶ Round (an Express execution, .sync:2) ─▶ Rounded? ─┬─ late ──▶ Round
 *    ▲                                                                                        ├─ commit ─▶ CommitAgain ─▶ Pause
 *    ├──────────────── idle, rotate (park / continue as new) ◀────────────────────────────────┤
 *    └──────────────────────────────────────────── Pause ◀── budget, failed, a failed round ◀─┘
 * ```
 *
 * The round (Express; no task tokens there) waits for n's acks by reading its record every
 * ACK_POLL_SECONDS (the first time after barrierWaitSeconds, BarrierWait), itself: a GetItem
 * evaluated in the workflow (coordinator-rounds-acks.ts), the coordinator function's `poll` only
 * off the happy path. It commits n, pauses, and allocates the next checkpoint until it has run
 * ROUND.allocateForMs; it ends with n open after ROUND.pollForMs (the next round waits on). Once n
 * is a progress window old, `poll` applies the coordinator's own rule (`overdue`,
 * shared/coordinator/timeouts.ts): a stuck n is aborted, and the round pauses and goes on. A commit that failed twice is handed back:
 * CommitAgain retries it for about a day, in the Standard execution's history. An Express
 * execution runs at least once: a duplicate round is harmless because every task it runs is
 * idempotent and allocate keeps one checkpoint in flight.
 */
export function roundsLoop(
  machine: Construct,
  props: CoordinatorStateMachineProps,
  fresh: sfn.Pass,
  resume: sfn.Pass,
  allocateTask: () => tasks.LambdaInvoke,
): sfn.StateMachine {
  const { checkpoint, coordinatorFunction: fn } = props;
  const S = COORDINATOR_STATES;
  const checkpointId = sfn.JsonPath.numberAt('$.ckpt.checkpointId');
  const roundStartedAt = sfn.JsonPath.stringAt('$$.Execution.StartTime');
  const scope = new Construct(machine, 'Rounds');

  // ── the Express round ──
  const done = new sfn.Succeed(scope, S.roundDone, { comment: 'the round ends; the Standard execution goes on from its output' });
  const end = (kind: RoundEnd) =>
    sfn.Pass.jsonPath(scope, `End-${kind}`, {
      parameters: { iteration: sfn.JsonPath.numberAt('$.iteration'), ckpt: { checkpointId }, end: kind },
    }).next(done);
  const ends = { late: end('late'), budget: end('budget'), commit: end('commit'), failed: end('failed') };
  const poll = tasks.LambdaInvoke.jsonPath(scope, S.poll, {
    comment: 'read checkpoint n: all acks in, aborted as stuck (the progress window, timeouts.ts), or the round out of time?',
    lambdaFunction: fn,
    payload: sfn.TaskInput.fromObject({ action: 'poll', checkpointId, roundStartedAt }),
    resultSelector: { acked: sfn.JsonPath.stringAt('$.Payload.acked'), aborted: sfn.JsonPath.stringAt('$.Payload.aborted'), late: sfn.JsonPath.stringAt('$.Payload.late') },
    resultPath: '$.poll',
    retryOnServiceExceptions: false,
  });
  addServiceRetry(poll, 3);
  poll.addCatch(ends.failed, { errors: [sfn.Errors.ALL], resultPath: sfn.JsonPath.DISCARD });
  const ackWait = sfn.Wait.jsonPath(scope, S.ackWait, { comment: 'Express has no task tokens: look at the acks again in a moment', time: sfn.WaitTime.duration(Duration.seconds(ACK_POLL_SECONDS)) });
  const commit = tasks.LambdaInvoke.jsonPath(scope, S.commit, {
    comment: 'mark n COMPLETED, publish sink epochs below n, expire unneeded deltas (idempotent); is there time for another checkpoint?',
    lambdaFunction: fn,
    payload: sfn.TaskInput.fromObject({ action: 'commit', checkpointId, roundStartedAt }),
    resultSelector: { more: sfn.JsonPath.stringAt('$.Payload.more') },
    resultPath: '$.commit',
    retryOnServiceExceptions: false,
  });
  // a second failure hands the commit to the Standard execution, which retries it for a day
  commit.addRetry({ errors: [sfn.Errors.ALL], interval: Duration.seconds(1), maxAttempts: 1 });
  commit.addCatch(ends.commit, { errors: [sfn.Errors.ALL], resultPath: sfn.JsonPath.DISCARD });
  const pause = pauseState(scope, S.pause, checkpoint);
  const next = tasks.LambdaInvoke.jsonPath(scope, S.next, {
    comment: 'allocate checkpoint n+1 and inject its barrier; or end the round (quiet, out of time, continue-as-new due)',
    lambdaFunction: fn,
    payload: sfn.TaskInput.fromObject({ action: 'next', iteration: sfn.JsonPath.numberAt('$.iteration'), roundStartedAt }),
    resultSelector: { iteration: sfn.JsonPath.numberAt('$.Payload.iteration'), ckpt: { checkpointId: sfn.JsonPath.numberAt('$.Payload.ckpt.checkpointId') }, end: sfn.JsonPath.stringAt('$.Payload.end') },
    retryOnServiceExceptions: false,
  });
  addServiceRetry(next, 3);
  next.addRetry({ errors: [CHECKPOINT_IN_FLIGHT], interval: Duration.seconds(1), backoffRate: 2, maxDelay: Duration.seconds(8), maxAttempts: 4 });
  next.addCatch(ends.failed, { errors: [sfn.Errors.ALL], resultPath: sfn.JsonPath.DISCARD });
  // the happy path reads n's record directly (no invocation); `poll` only off it (coordinator-rounds-acks.ts)
  const reads = ackReads(scope, { table: props.controlTable, reads: directAckReads(checkpoint.timeoutMs), ackWait, acked: commit, poll });
  const polled = sfn.Choice.jsonPath(scope, S.polled)
    .when(sfn.Condition.booleanEquals('$.poll.acked', true), commit)
    .when(sfn.Condition.booleanEquals('$.poll.aborted', true), pause)
    .when(sfn.Condition.booleanEquals('$.poll.late', true), ends.late)
    .otherwise(reads.again);
  const more = sfn.Choice.jsonPath(scope, S.more).when(sfn.Condition.booleanEquals('$.commit.more', true), pause).otherwise(ends.budget);
  // a new checkpoint's first read waits for its barrier to reach the last stage at the soonest (ack-wait.ts)
  const firstWait = props.barrierWaitSeconds ? sfn.Wait.jsonPath(scope, S.barrierWait, { time: sfn.WaitTime.duration(Duration.seconds(props.barrierWaitSeconds)) }) : ackWait;
  const first = reads.start(firstWait);
  if (firstWait !== ackWait) firstWait.next(reads.read);
  const allocated = sfn.Choice.jsonPath(scope, S.allocated).when(sfn.Condition.stringEquals('$.end', 'allocated'), first).otherwise(done);
  poll.next(polled);
  commit.next(more);
  pause.next(next).next(allocated);

  const roundLogs = new logs.LogGroup(scope, 'Logs', {
    logGroupName: `/aws/vendedlogs/states/${props.stateMachineName}-rounds`,
    retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
    removalPolicy: props.logRemovalPolicy ?? RemovalPolicy.DESTROY,
  });
  const rounds = new sfn.StateMachine(scope, 'Resource', {
    stateMachineName: `${props.stateMachineName}-rounds`,
    stateMachineType: sfn.StateMachineType.EXPRESS,
    comment: 'Sluice checkpoint rounds (await acks → commit → pause → allocate + inject → …), started by the coordinator',
    definitionBody: sfn.DefinitionBody.fromChainable(first),
    logs: { destination: roundLogs, level: props.logLevel ?? sfn.LogLevel.ERROR, includeExecutionData: true },
    tracingEnabled: props.tracing ?? false,
  });
  // ReadAcks' task adds GetItem on the control table to the rounds' role; a customer-managed key must let it decrypt
  props.controlTable.encryptionKey?.grantDecrypt(rounds);

  // ── the Standard execution ──
  const allocate = allocateTask();
  const round = tasks.StepFunctionsStartExecution.jsonPath(machine, S.round, {
    comment: 'run checkpoints in an Express round until it ends, and go on from how it ended',
    stateMachine: rounds,
    integrationPattern: sfn.IntegrationPattern.RUN_JOB,
    input: sfn.TaskInput.fromObject({ iteration: sfn.JsonPath.numberAt('$.iteration'), ckpt: { checkpointId } }),
    associateWithParent: true,
    resultSelector: { iteration: sfn.JsonPath.numberAt('$.Output.iteration'), ckpt: { checkpointId: sfn.JsonPath.numberAt('$.Output.ckpt.checkpointId') }, end: sfn.JsonPath.stringAt('$.Output.end') },
  });
  const standardPause = pauseState(machine, S.pause, checkpoint, 'between rounds, and after an abort or a failed round');
  // a failed round (Express's five minutes, a task that kept failing): Allocate sorts out what it left
  round.addCatch(standardPause, { errors: [sfn.Errors.ALL], resultPath: sfn.JsonPath.DISCARD });
  const commitAgain = tasks.LambdaInvoke.jsonPath(machine, S.commitAgain, {
    comment: 'the round could not commit n: commit it here (idempotent), retried for about a day',
    lambdaFunction: fn,
    payload: sfn.TaskInput.fromObject({ action: 'commit', checkpointId }),
    resultPath: sfn.JsonPath.DISCARD,
    retryOnServiceExceptions: false,
  });
  retryIdempotent(commitAgain);
  const rounded = sfn.Choice.jsonPath(machine, S.rounded, { comment: 'how the round ended' })
    .when(sfn.Condition.stringEquals('$.end', 'late'), round)
    .when(sfn.Condition.stringEquals('$.end', 'commit'), commitAgain)
    .when(sfn.Condition.or(sfn.Condition.stringEquals('$.end', 'budget'), sfn.Condition.stringEquals('$.end', 'failed')), standardPause)
    .otherwise(allocate);
  fresh.next(allocate);
  resume.next(allocate);
  allocate.next(round).next(rounded);
  commitAgain.next(standardPause);
  standardPause.next(allocate);
  return rounds;
}
