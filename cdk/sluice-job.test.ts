/**
 * SluiceJob's template, one test per prop and per rule (bundling skipped: fast, stable hashes).
 * Two jobs: the clickstream example (source → keyBy → upsert sink) and a three-stage job with a
 * rebalance, a key exchange and a sink table with its own key attribute.
 */
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { Stack } from 'aws-cdk-lib';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import * as cw_actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { dynamoUpsertSink, job as defineJob } from '../shared/api/index.js';
import { COORDINATOR_TIMEOUT_MS } from '../shared/coordinator/loop.js';
import { CHECKPOINT_IN_FLIGHT } from '../shared/coordinator/protocol.js';
import { DETAILED_METRICS, DETAILED_METRICS_ENV, publishesMetric, WATCHED_METRICS_ENV } from '../shared/runtime/metric-names.js';
import { buildApp } from './app.js';
import { newApp } from './coordinator-definition.js';
import { STAGE_DEFAULTS, SluiceJobStack } from './sluice-job.js';
import { EXAMPLE_MODULE, getAtt, inlineStatements, logicalId, referenceJobs, synthJob, threeStageJob } from './test-support.js';
import type { SynthedJob } from './test-support.js';

let click: SynthedJob;
let three: SynthedJob;
beforeAll(() => ({ click, three } = referenceJobs()));

describe('streams', () => {
  it('creates one provisioned, encrypted stream per stage input with shards = parallelism', () => {
    const { template } = three;
    template.resourceCountIs('AWS::Kinesis::Stream', 3);
    for (const [name, shards] of [
      ['sluice-orders-src-orders', 3],
      ['sluice-orders-s1', 2],
      ['sluice-orders-s2', 4],
    ] as const) {
      template.hasResourceProperties('AWS::Kinesis::Stream', {
        Name: name,
        ShardCount: shards,
        StreamModeDetails: { StreamMode: 'PROVISIONED' },
        StreamEncryption: { EncryptionType: 'KMS', KeyId: 'alias/aws/kinesis' },
        RetentionPeriodHours: 24,
      });
    }
  });

  it('keeps the data streams on stack deletion by default, and follows removalPolicy', () => {
    three.template.hasResource('AWS::Kinesis::Stream', { DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
    const { template } = synthJob(clickstream, { removalPolicy: RemovalPolicy.DESTROY });
    template.allResources('AWS::Kinesis::Stream', { DeletionPolicy: 'Delete' });
    template.allResources('AWS::DynamoDB::Table', { DeletionPolicy: 'Delete' });
    template.hasResource('AWS::S3::Bucket', { DeletionPolicy: 'Delete' });
  });

  it('honours streamRetention', () => {
    const { template } = synthJob(clickstream, { streamRetention: Duration.hours(72) });
    template.allResourcesProperties('AWS::Kinesis::Stream', { RetentionPeriodHours: 72 });
  });

  it('onDemandSources creates those source streams on demand (no shard count); the streams between stages stay provisioned', () => {
    const { template } = synthJob(threeStageJob(), { onDemandSources: ['orders'] });
    const streams = Object.values(template.findResources('AWS::Kinesis::Stream')).map((r) => r.Properties as Record<string, unknown>);
    expect(streams.map((p) => [p.Name, (p.StreamModeDetails as { StreamMode: string }).StreamMode, p.ShardCount]).sort()).toEqual([
      ['sluice-orders-s1', 'PROVISIONED', 2],
      ['sluice-orders-s2', 'PROVISIONED', 4],
      ['sluice-orders-src-orders', 'ON_DEMAND', undefined],
    ]);
  });

  it('onDemandSources refuses an unknown source and a source reading an existing stream, naming the field', () => {
    expect(() => synthJob(threeStageJob(), { onDemandSources: ['clicks'] })).toThrow(/onDemandSources names "clicks", but the job's sources are orders/);
    const j = defineJob('existing-od');
    j.source({ name: 'in', streamName: 'team-clicks' })
      .keyBy((x) => String(x))
      .reduce((a) => a)
      .sinkTo(dynamoUpsertSink({ name: 'out', key: String }));
    expect(() => synthJob(j, { onDemandSources: ['in'] })).toThrow(/onDemandSources: source "in" reads the existing stream team-clicks, whose capacity mode is its own/);
  });

  it('imports a source stream given by name instead of creating it', () => {
    const j = defineJob('existing');
    j.source({ name: 'in', streamName: 'team-clicks' })
      .keyBy((x) => String(x))
      .reduce((a) => a)
      .sinkTo(dynamoUpsertSink({ name: 'out', key: String }));
    const { template, job } = synthJob(j);
    template.resourceCountIs('AWS::Kinesis::Stream', 1); // only s1
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::Join': ['', Match.arrayWith([':stream/team-clicks'])] },
    });
    expect(job.sourceStreams.get('in')!.streamName).toBe('team-clicks');
  });
});

describe('tables', () => {
  it('creates the state and control tables: pk/sk strings, on demand, PITR, encrypted', () => {
    for (const name of ['sluice-clickstream-state', 'sluice-clickstream-control']) {
      click.template.hasResourceProperties('AWS::DynamoDB::Table', {
        TableName: name,
        KeySchema: [
          { AttributeName: 'pk', KeyType: 'HASH' },
          { AttributeName: 'sk', KeyType: 'RANGE' },
        ],
        AttributeDefinitions: [
          { AttributeName: 'pk', AttributeType: 'S' },
          { AttributeName: 'sk', AttributeType: 'S' },
        ],
        BillingMode: 'PAY_PER_REQUEST',
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        SSESpecification: { SSEEnabled: true },
      });
    }
    click.template.hasResource('AWS::DynamoDB::Table', { DeletionPolicy: 'Retain' });
  });

  it('creates a table per upsert sink keyed by the sink key attribute', () => {
    three.template.hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: 'sluice-orders-sink-totals',
      KeySchema: [{ AttributeName: 'orderId', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'orderId', AttributeType: 'S' }],
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    });
    expect([...three.job.sinkTables.keys()]).toEqual(['totals']);
  });

  it('imports a sink table given by name', () => {
    const j = defineJob('imported');
    j.source({ name: 'in' })
      .keyBy((x) => String(x))
      .reduce((a) => a)
      .sinkTo(dynamoUpsertSink({ name: 'out', key: String, tableName: 'shared-results' }));
    const { template, job } = synthJob(j);
    template.resourceCountIs('AWS::DynamoDB::Table', 2);
    expect(job.sinkTables.get('out')!.tableName).toBe('shared-results');
    const s1 = inlineStatements(template, job.stageFunctions.get('s1')!.role!);
    const sink = s1.find((s) => s.Sid === 'SinkTables')!;
    expect(JSON.stringify(sink.Resource)).toContain(':table/shared-results');
  });
});

describe('bucket', () => {
  it('blocks public access, requires TLS, encrypts, expires tmp/ after a day', () => {
    const { template } = click;
    template.hasResourceProperties('AWS::S3::Bucket', {
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
      LifecycleConfiguration: {
        Rules: Match.arrayWith([Match.objectLike({ Prefix: 'tmp/', ExpirationInDays: 1, Status: 'Enabled' })]),
      },
      BucketName: Match.absent(),
    });
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
    const rules = JSON.stringify(template.findResources('AWS::S3::Bucket'));
    expect(rules).not.toContain('dead-letters/'); // never expired
  });
});

describe('functions', () => {
  it('runs one Node.js 22 arm64 function per stage with the documented environment and defaults', () => {
    const { template, job } = three;
    for (const stage of ['s0', 's1', 's2']) {
      template.hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: `sluice-orders-${stage}`,
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        Handler: 'index.handler',
        MemorySize: STAGE_DEFAULTS.memorySize,
        Timeout: STAGE_DEFAULTS.timeout.toSeconds(),
        Environment: {
          Variables: {
            SLUICE_PREFIX: 'sluice-orders',
            SLUICE_STAGE: stage,
            SLUICE_BUCKET: { Ref: logicalId(job.bucket) },
            POWERTOOLS_SERVICE_NAME: 'sluice-orders',
            POWERTOOLS_METRICS_NAMESPACE: 'Sluice',
            NODE_OPTIONS: '--enable-source-maps',
            POWERTOOLS_LOG_LEVEL: 'WARN',
            SLUICE_COORDINATOR_IDLE: '1',
          },
        },
        TracingConfig: Match.absent(),
      });
    }
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'sluice-orders-coordinator',
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      // the rounds' budget (ROUND) leaves a commit this timeout before Express's five minutes
      Timeout: COORDINATOR_TIMEOUT_MS / 1000,
      Environment: { Variables: Match.objectLike({ SLUICE_PREFIX: 'sluice-orders', SLUICE_STAGE: Match.absent(), SLUICE_STATE_MACHINE_ARN: Match.anyValue() }) },
    });
    // three stages, the coordinator, and CDK's provider of the start-on-deploy custom resource
    template.resourceCountIs('AWS::Lambda::Function', 5);
  });

  it('writes each function to its own log group with the retention given', () => {
    click.template.hasResourceProperties('AWS::Logs::LogGroup', { LogGroupName: '/aws/lambda/sluice-clickstream-s0', RetentionInDays: 30 });
    const { template } = synthJob(clickstream, { logRetention: 7 });
    template.hasResourceProperties('AWS::Logs::LogGroup', { LogGroupName: '/aws/lambda/sluice-clickstream-s1', RetentionInDays: 7 });
  });

  it('applies stageSettings per stage', () => {
    const { template } = synthJob(clickstream, {
      stageSettings: {
        s1: { memorySize: 2048, timeout: Duration.seconds(120), batchSize: 100, maxBatchingWindow: Duration.seconds(2), reservedConcurrency: 4 },
      },
    });
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'sluice-clickstream-s1',
      MemorySize: 2048,
      Timeout: 120,
      ReservedConcurrentExecutions: 4,
    });
    template.hasResourceProperties('AWS::Lambda::Function', { FunctionName: 'sluice-clickstream-s0', MemorySize: 512, Timeout: 60 });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { BatchSize: 100, MaximumBatchingWindowInSeconds: 2 });
    // s0 keeps the defaults: clickstream checkpoints every 2 s, too short for a window
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { BatchSize: 10_000, MaximumBatchingWindowInSeconds: Match.absent() });
  });

  it('uses the prefix for every physical name', () => {
    const { template } = synthJob(clickstream, { prefix: 'clicks-dev', dashboard: true });
    template.hasResourceProperties('AWS::Lambda::Function', { FunctionName: 'clicks-dev-s0' });
    template.hasResourceProperties('AWS::Kinesis::Stream', { Name: 'clicks-dev-src-clicks' });
    template.hasResourceProperties('AWS::DynamoDB::Table', { TableName: 'clicks-dev-state' });
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', { StateMachineName: 'clicks-dev-coordinator' });
    template.hasResourceProperties('AWS::CloudWatch::Dashboard', { DashboardName: 'clicks-dev' });
  });
});

/** a two-stage job (source, keyed) with the checkpoint settings given */
function keyedJob(checkpoint: { intervalMs: number; timeoutMs?: number }) {
  const j = defineJob('windows', { checkpoint });
  j.source<{ id: string; n: number }>({ name: 'in', shards: 2 })
    .keyBy((o) => o.id, { parallelism: 1 })
    .reduce((a, b) => ({ ...b, n: a.n + b.n }), { name: 'sum' })
    .sinkTo(dynamoUpsertSink({ name: 'totals', key: (o) => o.id, keyAttribute: 'id' }));
  return j;
}

describe('event source mappings', () => {
  it('reads each stage input from TRIM_HORIZON, retries forever, bisects, reports partial failures', () => {
    const { template, job } = three;
    template.resourceCountIs('AWS::Lambda::EventSourceMapping', 3);
    for (const stage of ['s0', 's1', 's2']) {
      template.hasResource('AWS::Lambda::EventSourceMapping', {
        Properties: {
          FunctionName: { Ref: logicalId(job.stageFunctions.get(stage)!) },
          EventSourceArn: getAtt(job.streams.get(stage)!),
          StartingPosition: 'TRIM_HORIZON',
          BatchSize: 10_000,
          // a fifth of the 7 s between checkpoints (minPauseMs), in whole seconds
          MaximumBatchingWindowInSeconds: 1,
          ParallelizationFactor: 1,
          BisectBatchOnFunctionError: true,
          FunctionResponseTypes: ['ReportBatchItemFailures'],
          MaximumRetryAttempts: -1,
          MaximumRecordAgeInSeconds: -1,
        },
        // the mapping is created only once the role (with its inline policy) exists
        DependsOn: Match.arrayWith([logicalId(job.stageFunctions.get(stage)!.role!)]),
      });
    }
  });

  it('gathers records for a fifth of the time between checkpoints, at most 5 s and a quarter of checkpoint.timeoutMs', () => {
    const windowOf = (checkpoint: { intervalMs: number; timeoutMs?: number }) => {
      const { template } = synthJob(keyedJob(checkpoint));
      const windows = Object.values(template.findResources('AWS::Lambda::EventSourceMapping')).map((r) => (r.Properties as { MaximumBatchingWindowInSeconds?: number }).MaximumBatchingWindowInSeconds);
      expect(new Set(windows).size).toBe(1);
      return windows[0];
    };
    expect(windowOf({ intervalMs: 10_000 })).toBe(2);
    expect(windowOf({ intervalMs: 60_000 })).toBe(5);
    expect(windowOf({ intervalMs: 60_000, timeoutMs: 8_000 })).toBe(2);
    expect(windowOf({ intervalMs: 4_000 })).toBeUndefined();
  });

  it('honours a stage\'s own window, zero included', () => {
    const { template } = synthJob(keyedJob({ intervalMs: 10_000 }), { stageSettings: { s0: { maxBatchingWindow: Duration.seconds(0) }, s1: { maxBatchingWindow: Duration.seconds(7) } } });
    const windows = Object.values(template.findResources('AWS::Lambda::EventSourceMapping')).map((r) => (r.Properties as { MaximumBatchingWindowInSeconds?: number }).MaximumBatchingWindowInSeconds);
    expect(windows.sort()).toEqual([7, undefined]);
  });
});

describe('coordinator', () => {
  it('is a Standard workflow logging errors, untraced by default, started again by a rule when an execution fails', () => {
    const { template, job } = click;
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', {
      StateMachineName: 'sluice-clickstream-coordinator',
      StateMachineType: 'STANDARD',
      TracingConfiguration: { Enabled: false },
      LoggingConfiguration: { Level: 'ERROR', IncludeExecutionData: true },
    });
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.states'],
        'detail-type': ['Step Functions Execution Status Change'],
        detail: { status: ['FAILED', 'TIMED_OUT'], stateMachineArn: [{ Ref: logicalId(job.stateMachine) }] },
      },
      Targets: [Match.objectLike({ Arn: { Ref: logicalId(job.stateMachine) }, Input: '{"iteration":0}' })],
    });
    expect(JSON.stringify(template.toJSON())).toContain(CHECKPOINT_IN_FLIGHT);
  });

  it('restartCoordinatorOnFailure: false leaves the rule out', () => {
    const { template } = synthJob(clickstream, { restartCoordinatorOnFailure: false });
    expect(JSON.stringify(template.findResources('AWS::Events::Rule'))).not.toContain('Step Functions Execution Status Change');
  });
});

describe('observability', () => {
  it('creates no dashboard unless asked (it bills $3 a month, idle or not)', () => {
    click.template.resourceCountIs('AWS::CloudWatch::Dashboard', 0);
    expect(click.job.dashboard).toBeUndefined();
  });

  it('dashboard: true creates a dashboard with per-stage and per-job metrics, none of them one the functions publish only with detailedMetrics', () => {
    const { template } = synthJob(clickstream, { dashboard: true });
    const body = JSON.stringify(template.findResources('AWS::CloudWatch::Dashboard')).replaceAll('\\"', '"');
    for (const needle of [
      "SELECT SUM(RecordsIn) FROM Sluice WHERE job = 'clickstream' AND stage = 's0'",
      "SELECT SUM(RecordsOut) FROM Sluice WHERE job = 'clickstream' AND stage = 's1'",
      'GetRecords.IteratorAgeMilliseconds',
      "SELECT SUM(CheckpointCompleted) FROM Sluice WHERE job = 'clickstream'",
      "SELECT SUM(CheckpointFailed) FROM Sluice WHERE job = 'clickstream'",
      "SELECT SUM(DeadLetters) FROM Sluice WHERE job = 'clickstream'",
      "SELECT SUM(CacheMiss) FROM Sluice WHERE job = 'clickstream'",
      // the checkpoint rounds' failures (retried by the Standard execution)
      'checkpoint rounds failed',
    ]) {
      expect(body).toContain(needle);
    }
    for (const name of [...DETAILED_METRICS.stage, ...DETAILED_METRICS.coordinator]) expect(body).not.toContain(`(${name})`);
    template.hasResourceProperties('AWS::CloudWatch::Dashboard', { DashboardName: 'sluice-clickstream' });
  });

  it('detailedMetrics: true has every function publish the detailed metrics, and the dashboard graph them', () => {
    const env = (t: Template) => Object.values(t.findResources('AWS::Lambda::Function')).map((f) => (f.Properties.Environment?.Variables ?? {}) as Record<string, string>);
    const sluiceFunctions = (t: Template) => env(t).filter((v) => v.POWERTOOLS_METRICS_NAMESPACE === 'Sluice');
    expect(sluiceFunctions(click.template).length).toBeGreaterThan(2);
    for (const v of sluiceFunctions(click.template)) expect(v[DETAILED_METRICS_ENV]).toBeUndefined();
    // no alarm watches a metric published only on request
    const alarms = JSON.stringify(click.template.findResources('AWS::CloudWatch::Alarm'));
    for (const name of [...DETAILED_METRICS.stage, ...DETAILED_METRICS.coordinator]) expect(alarms).not.toContain(name);
    const { template } = synthJob(clickstream, { dashboard: true, detailedMetrics: true });
    for (const v of sluiceFunctions(template)) expect(v[DETAILED_METRICS_ENV]).toBe('1');
    const body = JSON.stringify(template.findResources('AWS::CloudWatch::Dashboard')).replaceAll('\\"', '"');
    for (const needle of ['AVG(CheckpointDurationMs)', 'SUM(CheckpointBytes)', 'SUM(CacheHit)', 'SUM(CacheMiss)']) expect(body).toContain(needle);
  });

  it('every Sluice metric an alarm or the dashboard reads is one the functions publish, whatever the options', () => {
    const env = (t: Template) => Object.values(t.findResources('AWS::Lambda::Function')).map((f) => (f.Properties.Environment?.Variables ?? {}) as Record<string, string>);
    for (const options of [{}, { idleCoordinator: false }, { dashboard: true }, { dashboard: true, idleCoordinator: false }, { detailedMetrics: true, dashboard: true }]) {
      const { template } = synthJob(clickstream, options);
      const read = JSON.stringify([template.findResources('AWS::CloudWatch::Alarm'), template.findResources('AWS::CloudWatch::Dashboard')]).replaceAll('\\"', '"');
      const names = new Set([...read.matchAll(/(?:SUM|AVG|MAX|MIN)\((\w+)\) FROM Sluice/g)].map((m) => m[1]!));
      expect(names.size, JSON.stringify(options)).toBeGreaterThan(0);
      const publishers = env(template).filter((v) => v.POWERTOOLS_METRICS_NAMESPACE === 'Sluice');
      const published = (name: string) =>
        publishers.some((v) => publishesMetric(name, v[DETAILED_METRICS_ENV] === '1', new Set((v[WATCHED_METRICS_ENV] ?? '').split(','))));
      for (const name of names) expect(published(name), `${name} with ${JSON.stringify(options)}`).toBe(true);
    }
    // and nothing is published for nobody: by default (the coordinator idles, no dashboard) no completed-checkpoint count
    expect(env(click.template).some((v) => WATCHED_METRICS_ENV in v)).toBe(false);
  });

  it('alarms on the functions\' own iterator age and stalled shards, failed coordinator executions, failed and stalled checkpoints, dead letters', () => {
    const { template, job } = click;
    for (const stage of ['s0', 's1']) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: `sluice-clickstream-${stage}-iterator-age`,
        Namespace: 'AWS/Lambda',
        MetricName: 'IteratorAge',
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: logicalId(job.stageFunctions.get(stage)!) } }],
        Statistic: 'Maximum',
        Threshold: 300_000,
        ComparisonOperator: 'GreaterThanThreshold',
        TreatMissingData: 'notBreaching',
      });
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: `sluice-clickstream-${stage}-stalled-shard`,
        Namespace: 'AWS/Lambda',
        MetricName: 'IteratorAge',
        Threshold: 15 * 60_000,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'ignore',
      });
    }
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'sluice-clickstream-checkpoint-stalled',
      Metrics: [Match.objectLike({ Expression: "SELECT SUM(CheckpointStalled) FROM Sluice WHERE job = 'clickstream'" })],
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: 0,
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'sluice-clickstream-coordinator-failed',
      Namespace: 'AWS/States',
      MetricName: 'ExecutionsFailed',
      Threshold: 1,
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'sluice-clickstream-checkpoint-failed',
      Metrics: [Match.objectLike({ Expression: "SELECT SUM(CheckpointFailed) FROM Sluice WHERE job = 'clickstream'", Period: 300 })],
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'sluice-clickstream-dead-letters',
      Metrics: [Match.objectLike({ Expression: "SELECT SUM(DeadLetters) FROM Sluice WHERE job = 'clickstream'" })],
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: 0,
    });
    // an idle coordinator completes no checkpoint on purpose: no "nothing completed" alarm then
    template.resourceCountIs('AWS::CloudWatch::Alarm', 8);
    expect(job.alarms.all).toHaveLength(8);
    const busy = synthJob(clickstream, { idleCoordinator: false });
    busy.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'sluice-clickstream-checkpoints-stalled',
      TreatMissingData: 'breaching',
      ComparisonOperator: 'LessThanThreshold',
    });
    busy.template.resourceCountIs('AWS::CloudWatch::Alarm', 9);
  });

  it('sends every alarm to the alarmActions, and uses iteratorAgeAlarmThreshold', () => {
    let topic!: sns.Topic;
    const { template } = synthJob(clickstream, (s) => {
      topic = new sns.Topic(s, 'Pager', { enforceSSL: true });
      return { alarmActions: [new cw_actions.SnsAction(topic)], iteratorAgeAlarmThreshold: Duration.minutes(1) };
    });
    template.allResourcesProperties('AWS::CloudWatch::Alarm', { AlarmActions: [{ Ref: logicalId(topic) }] });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', { AlarmName: 'sluice-clickstream-s0-iterator-age', Threshold: 60_000 });
  });
});

describe('validation', () => {
  it('rejects a prefix that is not a sanitized name', () => {
    expect(() => synthJob(clickstream, { prefix: 'My_Prefix' })).toThrow(/prefix must be lower-case .* got "My_Prefix"/);
  });

  it('rejects names longer than AWS allows', () => {
    expect(() => synthJob(clickstream, { prefix: 'p'.repeat(60) })).toThrow(/function name "p+-coordinator" has 72 characters, more than the 64/);
  });

  it('rejects stageSettings for a stage the job does not have', () => {
    expect(() => synthJob(clickstream, { stageSettings: { s7: { memorySize: 512 } } })).toThrow(
      /stageSettings names stage "s7", but the job's stages are s0, s1/,
    );
  });

  it('rejects stage settings out of range, naming the value received', () => {
    expect(() => synthJob(clickstream, { stageSettings: { s0: { memorySize: 64 } } })).toThrow(/stageSettings.s0.memorySize .* got 64/);
    expect(() => synthJob(clickstream, { stageSettings: { s0: { timeout: Duration.minutes(20) } } })).toThrow(
      /stageSettings.s0.timeout .* got 20 minutes/,
    );
    expect(() => synthJob(clickstream, { stageSettings: { s0: { batchSize: 20_000 } } })).toThrow(/batchSize .* got 20000/);
    expect(() => synthJob(clickstream, { stageSettings: { s1: { reservedConcurrency: 1 } } })).toThrow(
      /stageSettings.s1.reservedConcurrency must be .* parallelism \(2: one invocation per shard\), got 1/,
    );
    expect(() => synthJob(clickstream, { stageSettings: { s1: { maxBatchingWindow: Duration.millis(1500) } } })).toThrow(
      /stageSettings.s1.maxBatchingWindow must be whole seconds .* got 1500 ms/,
    );
  });

  it('rejects a batching window a checkpoint\'s acks could not cross within its progress window', () => {
    // clickstream's timeoutMs is 30 s: its acks may be at most 15 s apart
    expect(() => synthJob(clickstream, { stageSettings: { s1: { maxBatchingWindow: Duration.seconds(16) } } })).toThrow(
      /stageSettings.s1.maxBatchingWindow must be at most half of checkpoint.timeoutMs \(15000 ms: .*\), got 16 seconds/,
    );
    expect(() => synthJob(clickstream, { stageSettings: { s1: { maxBatchingWindow: Duration.seconds(15) } } })).not.toThrow();
  });

  it('rejects a job module that does not exist when it has to bundle', () => {
    expect(() => {
      const app = newApp({ bundle: true });
      new SluiceJobStack(app, 'Bundled', { job: clickstream, jobModule: 'examples/nope/job.ts' });
    }).toThrow(/jobModule must name the job's module file, got "examples\/nope\/job.ts"/);
  });

  it('rejects a job the planner rejects, with the planner\'s message', () => {
    expect(() => synthJob(defineJob('empty'))).toThrow(/has no source/);
  });
});

describe('cdk-nag (AWS Solutions)', () => {
  const violations = (stack: Stack) =>
    new AwsSolutionsChecks().validateScope(stack).violations.map((v) => `${v.severity} ${v.ruleName}: ${v.violatingResources.map((r) => r.constructPath).join(', ')}`);

  it('reports nothing unacknowledged for the example, a three-stage job and a customer-key job', () => {
    expect(violations(synthJob(clickstream).stack)).toEqual([]);
    expect(violations(synthJob(threeStageJob('nag')).stack)).toEqual([]);
    expect(
      violations(synthJob(clickstream, (s) => ({ encryptionKey: new kms.Key(s, 'Key', { enableKeyRotation: true }) })).stack),
    ).toEqual([]);
  });

  it('every acknowledgement carries a reason', () => {
    const acks: Array<[string, string]> = [];
    for (const c of click.job.node.findAll()) {
      for (const m of c.node.metadata) {
        if (m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY) acks.push(...Object.entries(m.data as Record<string, string>));
      }
    }
    expect(acks.length).toBeGreaterThan(0);
    for (const [id, reason] of acks) expect(reason.length, id).toBeGreaterThan(30);
  });

  it('stops a synth of the app on an unacknowledged finding', () => {
    const app = newApp({ bundle: false });
    const stack = new SluiceJobStack(app, 'Nagged', { job: clickstream, jobModule: EXAMPLE_MODULE });
    new s3.Bucket(stack, 'Unsafe');
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).toThrow(/AwsSolutions-S1/);
  });
});

describe('template guard', () => {
  it('matches the checked-in snapshot (asset hashes and the plan hash normalized)', () => {
    const { template } = synthJob(threeStageJob('guard'));
    const text = JSON.stringify(template.toJSON(), null, 1)
      .replace(/[0-9a-f]{64}\.zip/g, '<asset>.zip')
      .replace(/plan `[0-9a-f]{16}`/g, 'plan `<hash>`');
    expect(JSON.parse(text)).toMatchSnapshot();
  });
});

describe('the CDK app (cdk/app.ts)', () => {
  it('builds the example named by sluice:example, with the prefix and removal policy from context, and passes cdk-nag', async () => {
    const app = newApp({ bundle: false, context: { 'sluice:prefix': 'clicks-ci', 'sluice:removalPolicy': 'destroy' } });
    const stack = await buildApp(app);
    expect(stack.stackName).toBe('Sluice-clickstream');
    expect(stack.job.names.prefix).toBe('clicks-ci');
    const assembly = app.synth(); // runs the cdk-nag plugin registered by buildApp: throws on a finding
    const template = assembly.getStackArtifact(stack.artifactId).template as { Resources: Record<string, { Type: string; DeletionPolicy?: string }> };
    const tables = Object.values(template.Resources).filter((r) => r.Type === 'AWS::DynamoDB::Table');
    expect(tables.map((t) => t.DeletionPolicy)).toEqual(['Delete', 'Delete', 'Delete']);
  });

  it('names the known examples when sluice:example is wrong', async () => {
    await expect(buildApp(newApp({ bundle: false, context: { 'sluice:example': 'nope' } }))).rejects.toThrow(
      /sluice:example must name a folder of examples\/ with a job.ts, got "nope" \(known: .*clickstream/,
    );
    await expect(buildApp(newApp({ bundle: false, context: { 'sluice:removalPolicy': 'keep' } }))).rejects.toThrow(
      /sluice:removalPolicy must be "retain" or "destroy", got "keep"/,
    );
  });
});
