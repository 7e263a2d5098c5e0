/**
 * What the coordinator's workflows share: their states' names, the Lambda tasks' retry plans and
 * the pause in whole seconds (and its Wait state) (cdk/coordinator-state-machine.ts, cdk/coordinator-rounds.ts).
 */
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { pauseMsOf } from '../shared/coordinator/loop.js';
import type { CheckpointSettings } from '../shared/plan/plan.js';

/** Names of the workflow's states: the local runner overrides tasks and waits by these names. */
export const COORDINATOR_STATES = {
  init: 'Init',
  fresh: 'Fresh',
  resume: 'Resume',
  allocate: 'Allocate',
  inject: 'Inject',
  awaitAcks: 'AwaitAcks',
  overdue: 'Overdue',
  extend: 'Extend?',
  commit: 'Commit',
  abort: 'Abort',
  pause: 'Pause',
  count: 'Count',
  continueAsNewChoice: 'ContinueAsNew?',
  continueAsNew: 'ContinueAsNew',
  done: 'Done',
  // only with expressCheckpoints: the Standard execution's states …
  round: 'Round',
  rounded: 'Rounded?',
  commitAgain: 'CommitAgain',
  // … and the Express round's
  poll: 'Poll',
  polled: 'Polled?',
  ackWait: 'AckWait',
  barrierWait: 'BarrierWait',
  more: 'More?',
  next: 'AllocateNext',
  allocated: 'Allocated?',
  roundDone: 'RoundDone',
  // only with checkpoint.maxConcurrent > 1
  settle: 'Settle',
  full: 'Full?',
  awaitOldest: 'AwaitOldest',
} as const;

/** Errors a Lambda task raises when the Lambda service itself hiccups (retried everywhere). */
export const LAMBDA_SERVICE_ERRORS = [
  'Lambda.ClientExecutionTimeoutException',
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
] as const;

/** Whole seconds, rounded up, at least 1. */
export function wholeSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Seconds the workflow waits between the end of one checkpoint and the start of the next. */
export function pauseSeconds(checkpoint: CheckpointSettings): number {
  return pauseMsOf(checkpoint) / 1000;
}

/**
 * The workflows' `Pause`: a Wait of `pauseSeconds`. `comment` says when it is taken; the length is
 * appended (every Pause states it the same way).
 */
export function pauseState(scope: Construct, id: string, checkpoint: CheckpointSettings, comment?: string): sfn.Wait {
  const length = 'max(intervalMs, minPauseMs), whole seconds';
  return sfn.Wait.jsonPath(scope, id, {
    comment: comment ? `${comment}: ${length}` : length,
    time: sfn.WaitTime.duration(Duration.seconds(pauseSeconds(checkpoint))),
  });
}

/** An idempotent task that must not be skipped (commit, abort, settle): retry anything, for about a day. */
export function retryIdempotent(task: tasks.LambdaInvoke): void {
  task.addRetry({
    errors: [sfn.Errors.ALL],
    interval: Duration.seconds(1),
    backoffRate: 2,
    maxDelay: Duration.seconds(60),
    maxAttempts: 1500,
    jitterStrategy: sfn.JitterType.FULL,
  });
}

/** Lambda service errors: retried with backoff on every task (fewer attempts inside a round, which has five minutes). */
export function addServiceRetry(task: tasks.LambdaInvoke, maxAttempts = 8): void {
  task.addRetry({
    errors: [...LAMBDA_SERVICE_ERRORS],
    interval: Duration.seconds(1),
    backoffRate: 2,
    maxDelay: Duration.seconds(30),
    maxAttempts,
    jitterStrategy: sfn.JitterType.FULL,
  });
}
