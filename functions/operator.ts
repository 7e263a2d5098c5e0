/**
 * The stage function: a Kinesis event source mapping invokes it with AWS's own KinesisStreamEvent
 * and it answers with the partial-batch-response shape. Which stage it runs comes from
 * SLUICE_STAGE; the job module is bundled beside it.
 */
import type { Context, KinesisStreamBatchResponse, KinesisStreamEvent } from 'aws-lambda';
import { createAwsClients } from '../shared/adapters/aws/clients.js';
import { createAwsPorts } from '../shared/adapters/aws/ports.js';
import type { Job } from '../shared/api/job.js';
import { planJob, stageById } from '../shared/plan/planner.js';
import { ENV, resourceNames } from '../shared/plan/resources.js';
import { StageRunner } from '../shared/runtime/stage-runner.js';
import { optionalEnv, requireEnv } from '../shared/util/config.js';
import { PowertoolsTelemetry } from './telemetry.js';

export type OperatorHandler = (event: KinesisStreamEvent, context?: Context) => Promise<KinesisStreamBatchResponse>;

export function operatorHandler(job: Job): OperatorHandler {
  // everything here runs once per execution environment (cold start)
  const plan = planJob(job);
  const stage = stageById(plan, requireEnv(ENV.stage));
  const names = resourceNames(plan, requireEnv(ENV.prefix));
  const telemetry = new PowertoolsTelemetry(plan.job, stage.id);
  const bucket = optionalEnv(ENV.bucket);
  const clients = createAwsClients();
  for (const c of [clients.kinesis, clients.dynamodb, clients.s3, clients.sfn]) telemetry.tracer.captureAWSv3Client(c);
  const ports = createAwsPorts(plan, names, clients, telemetry, bucket ? { bucket } : {});
  const runner = new StageRunner(job, plan, stage, names, ports);
  return async (event, context) => {
    if (context) telemetry.logger.addContext(context);
    try {
      return await runner.handle(event);
    } finally {
      telemetry.flush();
    }
  };
}
