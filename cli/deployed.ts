/**
 * A deployed job as the CLI finds it: the job module (its plan) and the names CloudFormation chose,
 * read from the stack's Outputs by stack name (`--stack`, default `Sluice-<job>`, the stack id
 * `cdk/app.ts` uses). `--prefix`/`--bucket` (or SLUICE_BUCKET) override; without a stack, a
 * missing bucket is an error, never a guess: bucket names are global.
 *
 * A local stack (`sluice dev`, the local runner) has no CloudFormation: its names come from
 * SLUICE_PREFIX/SLUICE_BUCKET and its endpoints from AWS_ENDPOINT_URL_*, and its workflow has the
 * ARN the local Step Functions gives it (the emulators' account, 000000000000, as
 * cdk/coordinator-definition.ts resolves the stack's tokens). It has no event source mappings,
 * CloudWatch metrics, alarms or logs: the commands say so instead of asking AWS.
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { createAwsClients, type AwsClients } from '../shared/adapters/aws/clients.js';
import type { Job } from '../shared/api/job.js';
import { Coordinator } from '../shared/coordinator/coordinator.js';
import { awsCoordinator } from '../shared/adapters/aws/coordinator-ports.js';
import type { Plan } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { ENV, resourceNames, sanitizeName, type ResourceNames } from '../shared/plan/resources.js';
import { OUTPUT_KEYS, outputKeyOfStage } from '../shared/plan/stack-outputs.js';
import { loadJob } from './load-job.js';

export interface DeployedOptions {
  stack?: string;
  prefix?: string;
  bucket?: string;
}

export interface DeployedJob {
  readonly job: Job;
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly bucket: string;
  readonly clients: AwsClients;
  readonly coordinator: Coordinator;
  readonly stackName: string;
  /** the stack's outputs (empty when no stack was found and the names were given) */
  readonly outputs: Readonly<Record<string, string>>;
  /** the workflow's ARN, when the stack names it */
  readonly stateMachineArn?: string;
  /** per stage id: the UUID of its event source mapping, when the stack names it */
  readonly mappings: ReadonlyMap<string, string>;
  /** a local stack: no stack was read and the Step Functions endpoint is a local one */
  readonly local: boolean;
}

/** The emulators' account: the local stack's ARNs carry it. */
export const LOCAL_ACCOUNT = '000000000000';

/** The ARN of a local stack's coordinator workflow. */
export function localStateMachineArn(names: ResourceNames, region: string): string {
  return `arn:aws:states:${region}:${LOCAL_ACCOUNT}:stateMachine:${names.stateMachine}`;
}

/** Outputs of a stack by name; undefined when the stack does not exist (or CloudFormation cannot be reached). */
export async function stackOutputs(stackName: string, client = new CloudFormationClient({})): Promise<Record<string, string> | undefined> {
  try {
    const r = await client.send(new DescribeStacksCommand({ StackName: stackName }));
    const outputs = r.Stacks?.[0]?.Outputs ?? [];
    return Object.fromEntries(outputs.filter((o) => o.OutputKey && o.OutputValue !== undefined).map((o) => [o.OutputKey!, o.OutputValue!]));
  } catch (err) {
    const e = err as { name?: string; message?: string };
    if (e.name === 'ValidationError' && /does not exist/.test(e.message ?? '')) return undefined;
    throw err;
  }
}

export async function deployedJob(jobPath: string, opts: DeployedOptions): Promise<DeployedJob> {
  const job = await loadJob(jobPath);
  const plan = planJob(job);
  const stackName = opts.stack ?? `Sluice-${sanitizeName(plan.job)}`;
  // names given outright (a local stack such as `sluice dev`'s, which has no CloudFormation) need no
  // look-up: only an explicit --stack asks CloudFormation then
  const givenBucket = opts.bucket ?? process.env[ENV.bucket];
  const givenPrefix = opts.prefix ?? process.env[ENV.prefix];
  const lookUp = opts.stack !== undefined || givenBucket === undefined;
  const outputs = lookUp
    ? ((await stackOutputs(stackName).catch((err: unknown) => {
        process.stderr.write(`cannot read the outputs of stack ${stackName} (${err instanceof Error ? err.message : String(err)})\n`);
        return undefined;
      })) ?? {})
    : {};
  const prefix = givenPrefix ?? outputs[OUTPUT_KEYS.prefix];
  const names = resourceNames(plan, prefix);
  const bucket = givenBucket ?? outputs[OUTPUT_KEYS.bucket];
  if (!bucket) {
    throw new Error(`stack ${stackName} was not found or names no bucket: pass --stack <name> (the stack that deployed the job), or --bucket (or SLUICE_BUCKET)`);
  }
  const clients = createAwsClients();
  const mappings = new Map<string, string>();
  for (const stage of plan.stages) {
    const uuid = outputs[outputKeyOfStage('mapping', stage.id)];
    if (uuid) mappings.set(stage.id, uuid);
  }
  const local = Object.keys(outputs).length === 0 && Boolean(process.env.AWS_ENDPOINT_URL_SFN ?? process.env.AWS_ENDPOINT_URL);
  const stateMachineArn = outputs[OUTPUT_KEYS.stateMachineArn] ?? (local ? localStateMachineArn(names, await clients.sfn.config.region()) : undefined);
  return {
    job,
    plan,
    names,
    bucket,
    clients,
    coordinator: awsCoordinator(plan, names, clients, [], undefined, { bucket }),
    stackName,
    outputs,
    mappings,
    local,
    ...(stateMachineArn ? { stateMachineArn } : {}),
  };
}
