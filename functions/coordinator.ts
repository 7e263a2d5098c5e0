/**
 * The coordinator function: performs one task of the coordinator state machine per invocation
 * (begin = allocate + inject, await, commit, abort, settle), the scheduled watchdog, and the
 * operator's requests (savepoint, gc). The workflow itself is defined in CDK; the loop that keeps
 * it at three transitions per checkpoint is shared/coordinator/loop.ts. Commit publishes the job's
 * S3 file and Kinesis sinks.
 */
import type { Context } from 'aws-lambda';
import { createAwsClients } from '../shared/adapters/aws/clients.js';
import { stagedSinkPublishers } from '../shared/adapters/aws/staged-sinks.js';
import type { Job } from '../shared/api/job.js';
import { awsCoordinator, awsLoopPorts } from '../shared/adapters/aws/coordinator-ports.js';
import { CoordinatorLoop, LOOP_ENV, pauseMsOf, type LoopTaskInput } from '../shared/coordinator/loop.js';
import { planJob } from '../shared/plan/planner.js';
import { ENV, resourceNames } from '../shared/plan/resources.js';
import { optionalEnv, requireEnv } from '../shared/util/config.js';
import { PowertoolsTelemetry } from './telemetry.js';

export type CoordinatorHandler = (input: LoopTaskInput, context?: Context) => Promise<unknown>;

export function coordinatorHandler(job: Job): CoordinatorHandler {
  const plan = planJob(job);
  const names = resourceNames(plan, requireEnv(ENV.prefix));
  const telemetry = new PowertoolsTelemetry(plan.job, 'coordinator');
  const bucket = optionalEnv(ENV.bucket) ?? names.bucket;
  const clients = createAwsClients();
  telemetry.traceClients(clients);
  const coordinator = awsCoordinator(plan, names, clients, stagedSinkPublishers(plan, names, clients, bucket, telemetry), undefined, { bucket, telemetry });
  const stateMachineArn = optionalEnv(LOOP_ENV.stateMachineArn);
  const loop = new CoordinatorLoop({
    plan,
    names,
    ports: awsLoopPorts(names, clients),
    run: (input) => coordinator.run(input),
    idle: optionalEnv(LOOP_ENV.idle) === '1',
    pauseMs: pauseMsOf(plan.checkpoint),
    telemetry,
    ...(stateMachineArn ? { stateMachineArn } : {}),
  });
  return async (input, context) => {
    if (context) telemetry.logger.addContext(context);
    try {
      const out = await loop.run(input);
      telemetry.log('debug', `coordinator ${input.action}`, { input: { ...input, taskToken: undefined }, output: out });
      const failed = typeof out === 'object' && out !== null && 'failed' in out;
      if (input.action === 'commit' && !failed) telemetry.count('CheckpointCompleted');
      if (input.action === 'abort') telemetry.count('CheckpointFailed');
      return out;
    } finally {
      telemetry.flush();
    }
  };
}
