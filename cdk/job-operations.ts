/**
 * What makes a deployed job run and operable without manual steps: the stack Outputs the CLI
 * reads by stack name, the coordinator started on deploy and kept running by a scheduled
 * watchdog, and the IAM an operator needs for the CLI (`grantOperate`).
 */
import { ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as cr from 'aws-cdk-lib/custom-resources';
import type { Construct } from 'constructs';
import { OUTPUT_KEYS, outputKeyOfStage } from '../shared/plan/stack-outputs.js';

export { OUTPUT_KEYS, outputKeyOfStage };

/** What the outputs, the start and the operator's grant are made of (the SluiceJob's resources). */
export interface JobParts {
  readonly prefix: string;
  readonly bucketName: string;
  readonly bucketArn: string;
  readonly stateTable: { tableName: string; tableArn: string };
  readonly controlTable: { tableName: string; tableArn: string };
  readonly streams: ReadonlyMap<string, kinesis.IStream>;
  readonly stageFunctions: ReadonlyMap<string, lambda.IFunction>;
  readonly eventSourceMappings: ReadonlyMap<string, lambda.EventSourceMapping>;
  readonly coordinatorFunction: lambda.IFunction;
  readonly stateMachineArn: string;
  readonly stateMachineName: string;
  /** set when the job has a dashboard */
  readonly dashboardName?: string;
  readonly alarmArns: readonly string[];
  readonly logGroupArns: readonly string[];
  readonly keys: readonly kms.IKey[];
}

/** One output per name a user or the CLI needs; keys are fixed (OUTPUT_KEYS), so one job per stack. */
export function addJobOutputs(scope: Construct, p: JobParts): void {
  const stack = Stack.of(scope);
  const out = (key: string, value: string, description: string) => {
    new CfnOutput(scope, `Output${key}`, { value, description }).overrideLogicalId(key);
  };
  out(OUTPUT_KEYS.prefix, p.prefix, 'resource prefix of every physical name');
  out(OUTPUT_KEYS.bucket, p.bucketName, 'data bucket: deltas, savepoints, dead letters, file sinks');
  out(OUTPUT_KEYS.stateTable, p.stateTable.tableName, 'keyed state table');
  out(OUTPUT_KEYS.controlTable, p.controlTable.tableName, 'checkpoints, leases, savepoints');
  out(OUTPUT_KEYS.stateMachineArn, p.stateMachineArn, 'checkpoint coordinator workflow');
  out(OUTPUT_KEYS.coordinatorFunction, p.coordinatorFunction.functionName, 'coordinator function (tasks, watchdog, savepoint requests)');
  if (p.dashboardName !== undefined) {
    out(
      OUTPUT_KEYS.dashboardUrl,
      `https://${stack.region}.console.aws.amazon.com/cloudwatch/home?region=${stack.region}#dashboards:name=${p.dashboardName}`,
      'CloudWatch dashboard of the job',
    );
  }
  for (const [stageId, stream] of p.streams) out(outputKeyOfStage('stream', stageId), stream.streamName, `input stream of stage ${stageId}`);
  for (const [stageId, fn] of p.stageFunctions) out(outputKeyOfStage('function', stageId), fn.functionName, `function of stage ${stageId}`);
  for (const [stageId, esm] of p.eventSourceMappings) {
    out(outputKeyOfStage('mapping', stageId), esm.eventSourceMappingId, `event source mapping of stage ${stageId} (sluice start/stop enable and disable it)`);
  }
}

/**
 * Starts the coordinator on every deploy (a custom resource invoking the coordinator's watchdog
 * task) and every `period` after (a scheduled rule): the watchdog starts an execution when none
 * is running and the job was not stopped on purpose, so a lost status event leaves the job
 * without a coordinator for one period at most.
 */
export function addCoordinatorStart(scope: Construct, p: JobParts, options: { period: Duration; onDeploy: boolean; planHash: string; dependsOn: Construct[] }): events.Rule {
  const rule = new events.Rule(scope, 'CoordinatorWatchdog', {
    description: `Starts the ${p.stateMachineName} workflow when no execution is running (unless stopped)`,
    schedule: events.Schedule.rate(options.period),
    targets: [new targets.LambdaFunction(p.coordinatorFunction, { event: events.RuleTargetInput.fromObject({ action: 'watchdog' }), retryAttempts: 2 })],
  });
  if (options.onDeploy) {
    const call: cr.AwsSdkCall = {
      service: 'Lambda',
      action: 'invoke',
      // the plan hash makes every deploy of a changed job run it again
      parameters: { FunctionName: p.coordinatorFunction.functionName, InvocationType: 'Event', Payload: JSON.stringify({ action: 'watchdog', plan: options.planHash }) },
      physicalResourceId: cr.PhysicalResourceId.of(`${p.prefix}-start`),
    };
    const start = new cr.AwsCustomResource(scope, 'StartCoordinator', {
      onCreate: call,
      onUpdate: call,
      installLatestAwsSdk: false,
      logGroup: new logs.LogGroup(scope, 'StartCoordinatorLogs', { retention: logs.RetentionDays.ONE_WEEK, removalPolicy: RemovalPolicy.DESTROY }),
      policy: cr.AwsCustomResourcePolicy.fromStatements([
        new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [p.coordinatorFunction.functionArn] }),
      ]),
    });
    for (const d of options.dependsOn) start.node.addDependency(d);
    // the provider function is CDK's own singleton in the stack
    const provider = Stack.of(scope).node.tryFindChild(cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace(/-/g, '').replace(/^/, 'AWS'));
    for (const target of [start, ...(provider ? [provider] : [])]) {
      Validations.of(target).acknowledge(
        {
          id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
          reason: 'CDK\'s AwsCustomResource provider runs under AWSLambdaBasicExecutionRole (its own log writes only).',
        },
        { id: 'AwsSolutions-L1', reason: 'CDK\'s AwsCustomResource provider picks its own runtime; it runs once per deploy.' },
      );
    }
  }
  return rule;
}

/** What `sluice status/start/stop/logs/checkpoints/savepoint/restore` call, resource by resource. */
export function operateStatements(stack: Stack, p: JobParts): iam.PolicyStatement[] {
  const executions = stack.formatArn({ service: 'states', resource: 'execution', resourceName: `${p.stateMachineName}:*`, arnFormat: ArnFormat.COLON_RESOURCE_NAME });
  const esmArns = [...p.eventSourceMappings.values()].map((e) => e.eventSourceMappingArn);
  return [
    new iam.PolicyStatement({ sid: 'ReadStackOutputs', actions: ['cloudformation:DescribeStacks'], resources: [stack.stackId] }),
    new iam.PolicyStatement({ sid: 'Workflow', actions: ['states:StartExecution', 'states:ListExecutions', 'states:DescribeStateMachine'], resources: [p.stateMachineArn] }),
    new iam.PolicyStatement({ sid: 'WorkflowExecutions', actions: ['states:StopExecution', 'states:DescribeExecution'], resources: [executions] }),
    new iam.PolicyStatement({ sid: 'EventSourceMappings', actions: ['lambda:GetEventSourceMapping', 'lambda:UpdateEventSourceMapping'], resources: esmArns }),
    new iam.PolicyStatement({ sid: 'CoordinatorRequests', actions: ['lambda:InvokeFunction'], resources: [p.coordinatorFunction.functionArn] }),
    // checkpoints, savepoint requests, the operator's stop flag; restore rewrites state rows
    new iam.PolicyStatement({
      sid: 'Tables',
      actions: ['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:BatchWriteItem', 'dynamodb:BatchGetItem'],
      resources: [p.controlTable.tableArn, p.stateTable.tableArn],
    }),
    new iam.PolicyStatement({ sid: 'Savepoints', actions: ['s3:GetObject', 's3:PutObject'], resources: [`${p.bucketArn}/savepoints/*`, `${p.bucketArn}/deltas/*`] }),
    new iam.PolicyStatement({ sid: 'BucketList', actions: ['s3:ListBucket'], resources: [p.bucketArn] }),
    new iam.PolicyStatement({ sid: 'Streams', actions: ['kinesis:DescribeStreamSummary', 'kinesis:ListShards'], resources: [...p.streams.values()].map((s) => s.streamArn) }),
    new iam.PolicyStatement({ sid: 'Alarms', actions: ['cloudwatch:DescribeAlarms'], resources: [...p.alarmArns] }),
    new iam.PolicyStatement({ sid: 'Logs', actions: ['logs:FilterLogEvents'], resources: [...p.logGroupArns] }),
    // GetMetricData has no resource-level permissions (lag per stage in `sluice status`)
    new iam.PolicyStatement({ sid: 'Metrics', actions: ['cloudwatch:GetMetricData'], resources: ['*'] }),
    ...(p.keys.length ? [new iam.PolicyStatement({ sid: 'Keys', actions: ['kms:Decrypt', 'kms:GenerateDataKey', 'kms:DescribeKey'], resources: p.keys.map((k) => k.keyArn) })] : []),
  ];
}
