/**
 * The props that make a deployed job start, stay running and be operable, asserted on the
 * synthesized template (one `it` per prop, roughly): stack Outputs, start on deploy, the watchdog,
 * the idle coordinator, imported resources' keys, tracing, log level, the stalled-shard alarm and
 * `grantOperate`.
 */
import { Duration, type Stack } from 'aws-cdk-lib';
import { Match } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { dynamoUpsertSink, job as defineJob } from '../shared/api/index.js';
import { OUTPUT_KEYS, outputKeyOfStage } from '../shared/plan/stack-outputs.js';
import { actionsOf, attachedStatements, inlineStatements, logicalId, synthJob, type Statement } from './test-support.js';

const click = synthJob(clickstream);

/** A job reading a stream it imports and writing a table it imports. */
function importedJob() {
  const j = defineJob('imports');
  j.source({ name: 'in', streamName: 'team-clicks' })
    .keyBy((x) => String(x))
    .reduce((a) => a)
    .sinkTo(dynamoUpsertSink({ name: 'out', key: String, tableName: 'shared-results' }));
  return j;
}

const kmsStatement = (statements: Statement[], keyId: string) => statements.filter((s) => actionsOf(s).some((a) => a.startsWith('kms:')) && JSON.stringify(s.Resource).includes(keyId));

describe('outputs', () => {
  it('names everything a user and the CLI need, under fixed keys', () => {
    const outputs = click.template.toJSON().Outputs as Record<string, { Value: unknown }>;
    for (const key of Object.values(OUTPUT_KEYS)) if (key !== OUTPUT_KEYS.dashboardUrl) expect(outputs[key], key).toBeDefined();
    expect(outputs[OUTPUT_KEYS.dashboardUrl]).toBeUndefined(); // no dashboard unless asked
    expect(outputs[OUTPUT_KEYS.bucket]!.Value).toEqual({ Ref: logicalId(click.job.bucket) });
    expect(outputs[OUTPUT_KEYS.stateMachineArn]!.Value).toEqual({ Ref: logicalId(click.job.stateMachine) });
    expect(outputs[OUTPUT_KEYS.prefix]!.Value).toBe('sluice-clickstream');
    for (const stage of ['s0', 's1']) {
      expect(outputs[outputKeyOfStage('stream', stage)]!.Value).toEqual({ Ref: logicalId(click.job.streams.get(stage)!) });
      expect(outputs[outputKeyOfStage('function', stage)]!.Value).toEqual({ Ref: logicalId(click.job.stageFunctions.get(stage)!) });
      expect(outputs[outputKeyOfStage('mapping', stage)]!.Value).toEqual({ Ref: logicalId(click.job.eventSourceMappings.get(stage)!) });
    }
    const withDashboard = synthJob(clickstream, { dashboard: true }).template.findOutputs('*');
    expect(JSON.stringify(withDashboard[OUTPUT_KEYS.dashboardUrl]!.Value)).toContain('#dashboards:name=sluice-clickstream');
  });
});

describe('startOnDeploy and watchdogPeriod', () => {
  it('runs the watchdog once per deploy (a custom resource invoking the coordinator) after the workflow and mappings exist', () => {
    const cr = click.template.findResources('Custom::AWS');
    expect(Object.keys(cr)).toHaveLength(1);
    const res = Object.values(cr)[0] as { Properties: { Create: unknown; Update: unknown }; DependsOn: string[] };
    const create = JSON.stringify(res.Properties.Create);
    expect(create).toMatch(/action[\\"]+:[\\"]+watchdog/);
    expect(create).toMatch(/InvocationType[\\"]+:[\\"]+Event/);
    expect(res.DependsOn).toEqual(expect.arrayContaining([logicalId(click.job.stateMachine), logicalId(click.job.eventSourceMappings.get('s0')!)]));
    expect(synthJob(clickstream, { startOnDeploy: false }).template.findResources('Custom::AWS')).toEqual({});
  });

  it('schedules the watchdog every 5 minutes by default, or watchdogPeriod', () => {
    click.template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(5 minutes)',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [logicalId(click.job.coordinatorFunction), 'Arn'] }, Input: '{"action":"watchdog"}' })],
    });
    synthJob(clickstream, { watchdogPeriod: Duration.minutes(2) }).template.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(2 minutes)' });
  });

  it('lets the coordinator start and list only its own workflow, heartbeat its Commit, and read the source streams', () => {
    const st = inlineStatements(click.template, click.job.coordinatorFunction.role!);
    const sid = (s: string) => st.find((x) => x.Sid === s)!;
    expect(actionsOf(sid('StartOwnWorkflow')).sort()).toEqual(['states:ListExecutions', 'states:StartExecution']);
    expect(JSON.stringify(sid('StartOwnWorkflow').Resource)).toContain(':stateMachine:sluice-clickstream-coordinator');
    expect(actionsOf(sid('CommitHeartbeat'))).toEqual(['states:SendTaskHeartbeat']);
    expect(actionsOf(sid('ReadSourceStreams')).sort()).toEqual(['kinesis:GetRecords', 'kinesis:GetShardIterator']);
  });
});

describe('idleCoordinator', () => {
  it('is on by default (coordinator and stage functions), off on request', () => {
    const env = (t: typeof click.template, name: string) =>
      (Object.values(t.findResources('AWS::Lambda::Function', { Properties: { FunctionName: name } }))[0] as { Properties: { Environment: { Variables: Record<string, unknown> } } }).Properties.Environment.Variables;
    expect(env(click.template, 'sluice-clickstream-coordinator').SLUICE_COORDINATOR_IDLE).toBe('1');
    expect(env(click.template, 'sluice-clickstream-s0').SLUICE_COORDINATOR_IDLE).toBe('1');
    const busy = synthJob(clickstream, { idleCoordinator: false }).template;
    expect(env(busy, 'sluice-clickstream-coordinator').SLUICE_COORDINATOR_IDLE).toBeUndefined();
    expect(env(busy, 'sluice-clickstream-s0').SLUICE_COORDINATOR_IDLE).toBeUndefined();
  });
});

describe('importedResourceKeys', () => {
  it('grants the keys of an imported stream and table to every role that touches them', () => {
    let streamKey!: kms.Key;
    let tableKey!: kms.Key;
    const producer = { role: undefined as unknown as iam.Role, reader: undefined as unknown as iam.Role, operator: undefined as unknown as iam.Role };
    const { template, job } = synthJob(
      importedJob(),
      (stack) => {
        streamKey = new kms.Key(stack, 'StreamKey', { enableKeyRotation: true });
        tableKey = new kms.Key(stack, 'TableKey', { enableKeyRotation: true });
        return { importedResourceKeys: { sources: { in: streamKey }, sinks: { out: tableKey } } };
      },
      (stack, sluice) => {
        producer.role = new iam.Role(stack, 'Producer', { assumedBy: new iam.AccountRootPrincipal() });
        producer.reader = new iam.Role(stack, 'Reader', { assumedBy: new iam.AccountRootPrincipal() });
        producer.operator = new iam.Role(stack, 'Operator', { assumedBy: new iam.AccountRootPrincipal() });
        sluice.grantWriteSource(producer.role);
        sluice.grantReadResults(producer.reader);
        sluice.grantOperate(producer.operator);
      },
    );
    const sk = logicalId(streamKey);
    const tk = logicalId(tableKey);
    const s0 = inlineStatements(template, job.stageFunctions.get('s0')!.role!);
    const s1 = inlineStatements(template, job.stageFunctions.get('s1')!.role!);
    const coord = inlineStatements(template, job.coordinatorFunction.role!);
    expect(kmsStatement(s0, sk)).toHaveLength(1); // reads the source stream
    expect(kmsStatement(s0, tk)).toHaveLength(0);
    expect(kmsStatement(s1, tk)).toHaveLength(1); // writes the sink table
    expect(kmsStatement(coord, sk)).toHaveLength(1); // injects barriers, looks for input
    expect(actionsOf(kmsStatement(attachedStatements(template, producer.role), sk)[0]!)).toEqual(['kms:GenerateDataKey']);
    expect(actionsOf(kmsStatement(attachedStatements(template, producer.reader), tk)[0]!)).toContain('kms:Decrypt');
    expect(kmsStatement(attachedStatements(template, producer.operator), sk)).toHaveLength(1);
  });

  it('rejects a key for a name the job does not have, or for a resource the job creates', () => {
    const key = (stack: Stack) => new kms.Key(stack, 'K', { enableKeyRotation: true });
    expect(() => synthJob(importedJob(), (stack) => ({ importedResourceKeys: { sources: { nope: key(stack) } } }))).toThrow(/sources names "nope", but the job's sources are in/);
    expect(() => synthJob(clickstream, (stack) => ({ importedResourceKeys: { sources: { clicks: key(stack) } } }))).toThrow(/creates its own stream/);
  });
});

describe('tracing', () => {
  it('is off by default: no active tracing, no tracer environment, no X-Ray permissions', () => {
    const fns = click.template.findResources('AWS::Lambda::Function', { Properties: { TracingConfig: { Mode: 'Active' } } });
    expect(fns).toEqual({});
    expect(JSON.stringify(click.template.toJSON())).not.toContain('xray:');
    expect(JSON.stringify(click.template.toJSON())).not.toContain('SLUICE_TRACING');
  });

  it('turns on active tracing of every function and the workflow, with the X-Ray permissions, and passes cdk-nag', () => {
    const { template, stack } = synthJob(clickstream, { tracing: true });
    for (const name of ['sluice-clickstream-s0', 'sluice-clickstream-s1', 'sluice-clickstream-coordinator']) {
      template.hasResourceProperties('AWS::Lambda::Function', { FunctionName: name, TracingConfig: { Mode: 'Active' }, Environment: { Variables: Match.objectLike({ SLUICE_TRACING: '1' }) } });
    }
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', { TracingConfiguration: { Enabled: true } });
    expect(JSON.stringify(template.toJSON())).toContain('xray:PutTraceSegments');
    expect(new AwsSolutionsChecks().validateScope(stack).violations.map((v) => v.ruleName)).toEqual([]);
  });
});

describe('logLevel and stalledShardAlarmAfter', () => {
  it('logs WARN by default and the level given', () => {
    click.template.hasResourceProperties('AWS::Lambda::Function', { FunctionName: 'sluice-clickstream-s0', Environment: { Variables: Match.objectLike({ POWERTOOLS_LOG_LEVEL: 'WARN' }) } });
    synthJob(clickstream, { logLevel: 'DEBUG' }).template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'sluice-clickstream-s0',
      Environment: { Variables: Match.objectLike({ POWERTOOLS_LOG_LEVEL: 'DEBUG' }) },
    });
  });

  it('sends no platform lines to CloudWatch Logs at WARN, and never filters the level-less EMF documents', () => {
    for (const name of ['sluice-clickstream-s0', 'sluice-clickstream-coordinator']) {
      click.template.hasResourceProperties('AWS::Lambda::Function', { FunctionName: name, LoggingConfig: { LogFormat: 'JSON', SystemLogLevel: 'WARN', ApplicationLogLevel: 'INFO' } });
    }
    synthJob(clickstream, { logLevel: 'DEBUG' }).template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'sluice-clickstream-s0',
      LoggingConfig: { LogFormat: 'JSON', SystemLogLevel: 'INFO', ApplicationLogLevel: 'DEBUG' },
    });
  });

  it('raises the stalled-shard alarm at the age given', () => {
    synthJob(clickstream, { stalledShardAlarmAfter: Duration.minutes(30) }).template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'sluice-clickstream-s0-stalled-shard',
      Threshold: 30 * 60_000,
    });
  });
});

describe('grantOperate', () => {
  it('gives an operator exactly what the CLI calls, on this job\'s resources', () => {
    let role!: iam.Role;
    const { template, job } = synthJob(clickstream, {}, (stack, sluice) => {
      role = new iam.Role(stack, 'Operator', { assumedBy: new iam.AccountRootPrincipal() });
      sluice.grantOperate(role);
    });
    const st = attachedStatements(template, role);
    const actions = st.flatMap(actionsOf).sort();
    expect(actions).toEqual(
      [
        'cloudformation:DescribeStacks',
        'cloudwatch:DescribeAlarms',
        'cloudwatch:GetMetricData',
        'dynamodb:BatchGetItem',
        'dynamodb:BatchWriteItem',
        'dynamodb:DeleteItem',
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'dynamodb:Query',
        'dynamodb:UpdateItem',
        'kinesis:DescribeStreamSummary',
        'kinesis:ListShards',
        'lambda:GetEventSourceMapping',
        'lambda:InvokeFunction',
        'lambda:UpdateEventSourceMapping',
        'logs:FilterLogEvents',
        's3:GetObject',
        's3:ListBucket',
        's3:PutObject',
        'states:DescribeExecution',
        'states:DescribeStateMachine',
        'states:ListExecutions',
        'states:StartExecution',
        'states:StopExecution',
      ].sort(),
    );
    // the only wildcard is GetMetricData, which has no resource-level permissions
    const wild = st.filter((s) => JSON.stringify(s.Resource) === '"*"');
    expect(wild.flatMap(actionsOf)).toEqual(['cloudwatch:GetMetricData']);
    const esm = st.find((s) => actionsOf(s).includes('lambda:UpdateEventSourceMapping'))!;
    expect(JSON.stringify(esm.Resource)).toContain(logicalId(job.eventSourceMappings.get('s0')!));
  });
});
