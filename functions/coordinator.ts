/**
 * The coordinator function: performs one task of the coordinator state machine per invocation
 * (begin = allocate + inject, await, overdue, commit, abort, settle), the scheduled watchdog, and the
 * operator's requests (savepoint, gc). The workflow itself is defined in CDK; the loop that keeps
 * it at three transitions per checkpoint is shared/coordinator/loop.ts. Commit publishes the job's
 * S3 file and Kinesis sinks.
 *
 * `coordinatorTasks` is what every run of a job performs its coordinator tasks with — this
 * handler, and the local runner — so the metrics and logs of a deployed job appear locally too.
 */
import type { Context } from 'aws-lambda';
import { createAwsClients, type AwsClients } from '../shared/adapters/aws/clients.js';
import { awsCoordinator, awsLoopPorts } from '../shared/adapters/aws/coordinator-ports.js';
import { stagedSinkPublishers } from '../shared/adapters/aws/staged-sinks.js';
import type { Job } from '../shared/api/job.js';
import type { Coordinator } from '../shared/coordinator/coordinator.js';
import { CoordinatorLoop, LOOP_ENV, pauseMsOf, type LoopTaskInput } from '../shared/coordinator/loop.js';
import type { CommitTarget, CoordinatorTaskInput } from '../shared/coordinator/protocol.js';
import type { Plan } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { ENV, resourceNames, type ResourceNames } from '../shared/plan/resources.js';
import type { Telemetry } from '../shared/runtime/ports.js';
import { optionalEnv, requireEnv } from '../shared/util/config.js';
import { PowertoolsTelemetry } from './telemetry.js';

export type CoordinatorHandler = (input: LoopTaskInput, context?: Context) => Promise<unknown>;

export interface CoordinatorTasksOptions {
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly clients: AwsClients;
  readonly telemetry: Telemetry;
  /** deltas and savepoints; @default names.bucket */
  readonly bucket?: string;
  /** @default the job's file and Kinesis sink publishers */
  readonly commitTargets?: readonly CommitTarget[];
  /** the workflow (continue-as-new, watchdog) */
  readonly stateMachineArn?: string;
  /** park the coordinator while no input arrives; @default false */
  readonly idle?: boolean;
  /** the pause between checkpoints; @default the plan's */
  readonly pauseMs?: number;
  /** the wall clock the coordinator reads (barrier times, checkpoint and commit ages); @default the system clock */
  readonly now?: () => Date;
  /** wraps the Coordinator's tasks (tests inject faults there) */
  readonly wrapRun?: (run: (input: CoordinatorTaskInput) => Promise<unknown>) => (input: CoordinatorTaskInput) => Promise<unknown>;
}

/** The Coordinator and the loop over it; `run` performs one task, logs it and counts CheckpointCompleted / CheckpointFailed. */
export function coordinatorTasks(o: CoordinatorTasksOptions): { readonly coordinator: Coordinator; run(input: LoopTaskInput): Promise<unknown> } {
  const { plan, names, clients, telemetry } = o;
  const bucket = o.bucket ?? names.bucket;
  const coordinator = awsCoordinator(plan, names, clients, o.commitTargets ?? stagedSinkPublishers(plan, names, clients, bucket, telemetry), o.now, { bucket, telemetry });
  const direct = (input: CoordinatorTaskInput) => coordinator.run(input);
  const loop = new CoordinatorLoop({
    plan,
    names,
    ports: awsLoopPorts(names, clients),
    run: o.wrapRun ? o.wrapRun(direct) : direct,
    idle: o.idle ?? false,
    pauseMs: o.pauseMs ?? pauseMsOf(plan.checkpoint),
    telemetry,
    ...(o.stateMachineArn ? { stateMachineArn: o.stateMachineArn } : {}),
    ...(o.now ? { now: o.now } : {}),
  });
  return {
    coordinator,
    async run(input) {
      const out = await loop.run(input);
      telemetry.log('debug', `coordinator ${input.action}`, { input: { ...input, taskToken: undefined }, output: out });
      const failed = typeof out === 'object' && out !== null && 'failed' in out;
      if (input.action === 'commit' && !failed) telemetry.count('CheckpointCompleted');
      // an abort by the workflow, or by Overdue (the checkpoint was stuck)
      if (input.action === 'abort' || (input.action === 'overdue' && (out as { reason?: string } | undefined)?.reason !== undefined)) telemetry.count('CheckpointFailed');
      return out;
    },
  };
}

export function coordinatorHandler(job: Job): CoordinatorHandler {
  const plan = planJob(job);
  const names = resourceNames(plan, requireEnv(ENV.prefix));
  const telemetry = new PowertoolsTelemetry(plan.job, 'coordinator');
  const clients = createAwsClients();
  const tracing = telemetry.traceClients(clients);
  const stateMachineArn = optionalEnv(LOOP_ENV.stateMachineArn);
  const tasks = coordinatorTasks({
    plan,
    names,
    clients,
    telemetry,
    bucket: optionalEnv(ENV.bucket) ?? names.bucket,
    idle: optionalEnv(LOOP_ENV.idle) === '1',
    ...(stateMachineArn ? { stateMachineArn } : {}),
  });
  return async (input, context) => {
    if (context) telemetry.logger.addContext(context);
    let out: unknown;
    try {
      await tracing;
      out = await tasks.run(input);
      return out;
    } finally {
      // a parked coordinator may not run again for an hour: write what it counted now
      telemetry.flush(typeof out === 'object' && out !== null && 'idle' in out);
    }
  };
}
