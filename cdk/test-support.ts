/**
 * Helpers shared by the cdk/ tests: synthesize a job's stack with cdk.json's context and bundling
 * skipped, and read IAM statements and resources out of the template by construct.
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { CfnResource } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import clickstream from '../examples/clickstream/job.js';
import { dynamoUpsertSink, job as defineJob } from '../shared/api/index.js';
import type { Job } from '../shared/api/job.js';
import { newApp } from './coordinator-definition.js';
import { SluiceJob } from './sluice-job.js';
import type { SluiceJobProps } from './sluice-job.js';

export const EXAMPLE_MODULE = 'examples/clickstream/job.ts';

/**
 * A stack holding a SluiceJob for `job` (bundling skipped: no esbuild run, stable asset hashes).
 * `props` may be a function of the stack, to make constructs the job needs (a key, a topic) first;
 * `configure` runs after the job exists (grants, extra constructs).
 */
export function synthJob(
  job: Job,
  props: Partial<Omit<SluiceJobProps, 'job'>> | ((stack: Stack) => Partial<Omit<SluiceJobProps, 'job'>>) = {},
  configure?: (stack: Stack, sluice: SluiceJob) => void,
): { stack: Stack; job: SluiceJob; template: Template } {
  const app = newApp({ bundle: false });
  const stack = new Stack(app, `Sluice-${job.name}`);
  const extra = typeof props === 'function' ? props(stack) : props;
  const sluice = new SluiceJob(stack, 'Job', { job, jobModule: EXAMPLE_MODULE, ...extra });
  configure?.(stack, sluice);
  return { stack, job: sluice, template: Template.fromStack(stack) };
}

export function logicalId(construct: IConstruct): string {
  const cfn = (construct.node.defaultChild ?? construct) as CfnResource;
  const stack = Stack.of(construct);
  return stack.resolve(stack.getLogicalId(cfn)) as string;
}

/** A reference to a construct's attribute as the template writes it. */
export const getAtt = (c: IConstruct, attr = 'Arn') => ({ 'Fn::GetAtt': [logicalId(c), attr] });

export type SynthedJob = ReturnType<typeof synthJob>;

/** The two jobs most template tests read: the clickstream example and `threeStageJob()`. */
export function referenceJobs(): { click: SynthedJob; three: SynthedJob } {
  return { click: synthJob(clickstream), three: synthJob(threeStageJob()) };
}

export interface Statement {
  readonly Sid?: string;
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
  readonly Condition?: unknown;
}

export const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
export const resourcesOf = (s: Statement): unknown[] => (Array.isArray(s.Resource) ? s.Resource : [s.Resource]);

/** The statements of a role's inline policies (`Policies` of the AWS::IAM::Role). */
export function inlineStatements(template: Template, role: IConstruct): Statement[] {
  const res = template.toJSON().Resources[logicalId(role)] as {
    Properties: { Policies?: Array<{ PolicyDocument: { Statement: Statement[] } }> };
  };
  return (res.Properties.Policies ?? []).flatMap((p) => p.PolicyDocument.Statement);
}

/** The statements of every AWS::IAM::Policy attached to a role. */
export function attachedStatements(template: Template, role: IConstruct): Statement[] {
  const id = logicalId(role);
  return Object.values(template.toJSON().Resources as Record<string, { Type: string; Properties: Record<string, unknown> }>)
    .filter((r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(`"${id}"`))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}

/** A three-stage job exercising every kind of edge: key exchange, rebalance, an upsert sink. */
export function threeStageJob(name = 'orders'): Job {
  const j = defineJob(name, { maxParallelism: 32, checkpoint: { intervalMs: 5_000, timeoutMs: 45_500, minPauseMs: 7_000 } });
  j.source<{ id: string; amount: number }>({ name: 'orders', shards: 3 })
    .map((o) => ({ ...o, cents: Math.round(o.amount * 100) }), { name: 'to-cents' })
    .rebalance({ parallelism: 2 })
    .filter((o) => o.cents > 0, { name: 'positive' })
    .keyBy((o) => o.id, { parallelism: 4 })
    .reduce((a, b) => ({ ...b, cents: a.cents + b.cents }), { name: 'sum' })
    .sinkTo(dynamoUpsertSink({ name: 'totals', key: (o) => o.id, keyAttribute: 'orderId' }));
  return j;
}
