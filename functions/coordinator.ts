/**
 * The coordinator function: performs one task of the coordinator state machine per invocation
 * (allocate, inject, await, commit, abort), and the operator's requests (savepoint, gc). The
 * workflow itself is defined in CDK. Commit publishes the job's S3 file and Kinesis sinks.
 */
import type { Context } from 'aws-lambda';
import { createAwsClients } from '../shared/adapters/aws/clients.js';
import { stagedSinkPublishers } from '../shared/adapters/aws/staged-sinks.js';
import type { Job } from '../shared/api/job.js';
import { Coordinator } from '../shared/coordinator/coordinator.js';
import type { CoordinatorTaskInput } from '../shared/coordinator/protocol.js';
import { planJob } from '../shared/plan/planner.js';
import { ENV, resourceNames } from '../shared/plan/resources.js';
import { optionalEnv, requireEnv } from '../shared/util/config.js';
import { PowertoolsTelemetry } from './telemetry.js';

export type CoordinatorHandler = (input: CoordinatorTaskInput, context?: Context) => Promise<unknown>;

export function coordinatorHandler(job: Job): CoordinatorHandler {
  const plan = planJob(job);
  const names = resourceNames(plan, requireEnv(ENV.prefix));
  const telemetry = new PowertoolsTelemetry(plan.job, 'coordinator');
  const bucket = optionalEnv(ENV.bucket) ?? names.bucket;
  const clients = createAwsClients();
  for (const c of [clients.kinesis, clients.dynamodb, clients.s3, clients.sfn]) telemetry.tracer.captureAWSv3Client(c);
  const coordinator = new Coordinator(plan, names, clients, stagedSinkPublishers(plan, names, clients, bucket, telemetry), undefined, { bucket, telemetry });
  return async (input, context) => {
    if (context) telemetry.logger.addContext(context);
    try {
      const out = await coordinator.run(input);
      telemetry.log('info', `coordinator ${input.action}`, { input: { ...input, taskToken: undefined }, output: out });
      if (input.action === 'commit') telemetry.count('CheckpointCompleted');
      if (input.action === 'abort') telemetry.count('CheckpointFailed');
      return out;
    } finally {
      telemetry.flush();
    }
  };
}
