/**
 * The coordinator function: performs one task of the coordinator state machine per invocation
 * (allocate, inject, await, commit, abort). The workflow itself is defined in CDK.
 */
import type { Context } from 'aws-lambda';
import { createAwsClients } from '../shared/adapters/aws/clients.js';
import type { Job } from '../shared/api/job.js';
import { Coordinator } from '../shared/coordinator/coordinator.js';
import type { CoordinatorTaskInput } from '../shared/coordinator/protocol.js';
import { planJob } from '../shared/plan/planner.js';
import { ENV, resourceNames } from '../shared/plan/resources.js';
import { requireEnv } from '../shared/util/config.js';
import { PowertoolsTelemetry } from './telemetry.js';

export type CoordinatorHandler = (input: CoordinatorTaskInput, context?: Context) => Promise<unknown>;

export function coordinatorHandler(job: Job): CoordinatorHandler {
  const plan = planJob(job);
  const names = resourceNames(plan, requireEnv(ENV.prefix));
  const telemetry = new PowertoolsTelemetry(plan.job, 'coordinator');
  const coordinator = new Coordinator(plan, names, createAwsClients());
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
