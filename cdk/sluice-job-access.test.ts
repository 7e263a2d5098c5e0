/**
 * SluiceJob's template: who may do what — least-privilege statements per function and role, the
 * customer-managed key's grants, and the grant* methods (bundling skipped, as in sluice-job.test.ts).
 */
import { Match } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import { beforeAll, describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { job as defineJob, kinesisSink, s3FileSink } from '../shared/api/index.js';
import { BUCKET_PREFIXES } from './sluice-job.js';
import { actionsOf, attachedStatements, getAtt, inlineStatements, logicalId, referenceJobs, resourcesOf, synthJob } from './test-support.js';
import type { Statement, SynthedJob } from './test-support.js';

let three: SynthedJob;
beforeAll(() => ({ three } = referenceJobs()));

describe('IAM, least privilege', () => {
  const byId = (statements: Statement[]) => Object.fromEntries(statements.map((s) => [s.Sid, s]));

  it('a source stage reads its own stream and writes only the next stage stream; no sink access', () => {
    const { template, job } = three;
    const st = byId(inlineStatements(template, job.stageFunctions.get('s0')!.role!));
    expect(Object.keys(st).sort()).toEqual(
      ['BucketList', 'BucketObjects', 'CheckpointTaskResponse', 'DropSpilledState', 'OwnLogGroup', 'ReadInputStream', 'StateAndControlTables', 'WriteDownstreamStreams'].sort(),
    );
    // the only delete a stage may do: the spilled dirty state its snapshot took in
    expect(actionsOf(st.DropSpilledState!)).toEqual(['s3:DeleteObject']);
    expect(actionsOf(st.ReadInputStream!)).toEqual([
      'kinesis:DescribeStream',
      'kinesis:DescribeStreamSummary',
      'kinesis:GetRecords',
      'kinesis:GetShardIterator',
      'kinesis:ListShards',
    ]);
    expect(st.ReadInputStream!.Resource).toEqual(getAtt(job.streams.get('s0')!));
    expect(actionsOf(st.WriteDownstreamStreams!)).toEqual(['kinesis:PutRecords', 'kinesis:ListShards']);
    expect(st.WriteDownstreamStreams!.Resource).toEqual(getAtt(job.streams.get('s1')!));
    expect(actionsOf(st.StateAndControlTables!)).toEqual([
      'dynamodb:GetItem',
      'dynamodb:BatchGetItem',
      'dynamodb:Query',
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
      'dynamodb:BatchWriteItem',
      'dynamodb:DeleteItem',
    ]);
    expect(resourcesOf(st.StateAndControlTables!)).toEqual([getAtt(job.stateTable), getAtt(job.controlTable)]);
    expect(actionsOf(st.BucketObjects!)).toEqual(['s3:GetObject', 's3:PutObject']);
    expect(JSON.stringify(st.BucketObjects!.Resource)).toBe(
      JSON.stringify(BUCKET_PREFIXES.map((p) => ({ 'Fn::Join': ['', [getAtt(job.bucket), `/${p}*`]] }))),
    );
    expect(actionsOf(st.CheckpointTaskResponse!)).toEqual(['states:SendTaskSuccess', 'states:SendTaskFailure']);
    expect(JSON.stringify(st.CheckpointTaskResponse!.Resource)).toContain(':stateMachine:sluice-orders-coordinator');
    expect(st.OwnLogGroup!.Resource).toEqual(getAtt(job.node.findChild('Logs-s0')));
  });

  it('a sink stage writes its sink table only (Put/Update/BatchWrite) and no stream', () => {
    const { template, job } = three;
    const st = byId(inlineStatements(template, job.stageFunctions.get('s2')!.role!));
    expect(st.WriteDownstreamStreams).toBeUndefined();
    expect(actionsOf(st.SinkTables!)).toEqual(['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchWriteItem']);
    expect(resourcesOf(st.SinkTables!)).toEqual([getAtt(job.sinkTables.get('totals')!)]);
    expect(st.ReadInputStream!.Resource).toEqual(getAtt(job.streams.get('s2')!));
    // the middle stage writes s2 and nothing else
    const mid = byId(inlineStatements(template, job.stageFunctions.get('s1')!.role!));
    expect(mid.WriteDownstreamStreams!.Resource).toEqual(getAtt(job.streams.get('s2')!));
    expect(mid.SinkTables).toBeUndefined();
  });

  it('a stage fed by the source stage lists the source stream’s shards (it aligns source barriers by hash range), and nothing more of it; later stages do not', () => {
    const { template, job } = three;
    const mid = byId(inlineStatements(template, job.stageFunctions.get('s1')!.role!));
    expect(actionsOf(mid.ListSourceShards!)).toEqual(['kinesis:ListShards']);
    expect(mid.ListSourceShards!.Resource).toEqual(getAtt(job.streams.get('s0')!));
    for (const id of ['s0', 's2']) expect(byId(inlineStatements(template, job.stageFunctions.get(id)!.role!)).ListSourceShards).toBeUndefined();
  });

  it('the coordinator: control table rw, state table read, inject into source streams, bucket, task responses', () => {
    const { template, job } = three;
    const st = byId(inlineStatements(template, job.coordinatorFunction.role!));
    expect(resourcesOf(st.ControlTable!)).toEqual([getAtt(job.controlTable)]);
    expect(actionsOf(st.StateTableRead!)).toEqual(['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query']);
    expect(resourcesOf(st.StateTableRead!)).toEqual([getAtt(job.stateTable)]);
    expect(actionsOf(st.InjectIntoSourceStreams!)).toEqual(['kinesis:PutRecord', 'kinesis:PutRecords', 'kinesis:ListShards']);
    expect(resourcesOf(st.InjectIntoSourceStreams!)).toEqual([getAtt(job.streams.get('s0')!)]);
    expect(actionsOf(st.BucketObjects!)).toEqual(['s3:GetObject', 's3:PutObject', 's3:DeleteObject']);
    expect(st.CheckpointTaskResponse).toBeDefined();
  });

  it('the coordinator lists and reshards the shards of every stage stream (topology, delta GC, in-place rescale)', () => {
    const { template, job } = three;
    const st = byId(inlineStatements(template, job.coordinatorFunction.role!));
    expect(actionsOf(st.ListStageShards!)).toEqual(['kinesis:ListShards', 'kinesis:DescribeStreamSummary', 'kinesis:UpdateShardCount']);
    expect(resourcesOf(st.ListStageShards!)).toEqual(['s0', 's1', 's2'].map((s) => getAtt(job.streams.get(s)!)));
    expect(st.PublishKinesisSinks).toBeUndefined();
  });

  it('transactional sinks: an output stream per Kinesis sink, published by the coordinator; file sinks write under sinks/', () => {
    const j = defineJob('txout');
    const s = j.source<{ id: string }>({ name: 'in', shards: 1 });
    s.sinkTo(kinesisSink({ name: 'alerts' }));
    s.sinkTo(kinesisSink({ name: 'shared', streamName: 'team-alerts' }));
    s.sinkTo(s3FileSink({ name: 'archive' }));
    const { template, job } = synthJob(j);
    template.hasResourceProperties('AWS::Kinesis::Stream', { Name: 'sluice-txout-out-alerts', ShardCount: 1 });
    template.resourceCountIs('AWS::Kinesis::Stream', 2); // the source and one output (the other is imported)
    expect([...job.sinkStreams.keys()]).toEqual(['alerts', 'shared']);
    const st = byId(inlineStatements(template, job.coordinatorFunction.role!));
    expect(actionsOf(st.PublishKinesisSinks!)).toEqual(['kinesis:PutRecords', 'kinesis:ListShards']);
    const published = JSON.stringify(resourcesOf(st.PublishKinesisSinks!));
    expect(published).toContain(logicalId(job.sinkStreams.get('alerts')!));
    expect(published).toContain(':stream/team-alerts');
    // staging (stage functions) and publishing (coordinator) stay under the bucket's sinks/ prefix
    expect(JSON.stringify(resourcesOf(st.BucketObjects!))).toContain('/sinks/*');
    const stage = byId(inlineStatements(template, job.stageFunctions.get('s0')!.role!));
    expect(actionsOf(stage.BucketObjects!)).toEqual(['s3:GetObject', 's3:PutObject']);
    expect(stage.PublishKinesisSinks).toBeUndefined();
  });

  it('the state machines may invoke the coordinator function only, the coordinator workflow start only its rounds; the coordinator starts only its own workflow', () => {
    const { template, job } = three;
    const rounds = job.coordinator.rounds!;
    for (const role of [job.stateMachine.role, rounds.role]) {
      const invoke = attachedStatements(template, role).filter((s) => actionsOf(s).includes('lambda:InvokeFunction'));
      expect(invoke).toHaveLength(1);
      expect(JSON.stringify(invoke[0]!.Resource)).toBe(
        JSON.stringify([getAtt(job.coordinatorFunction), { 'Fn::Join': ['', [getAtt(job.coordinatorFunction), ':*']] }]),
      );
    }
    const starts = attachedStatements(template, job.stateMachine.role).filter((s) => actionsOf(s).includes('states:StartExecution'));
    expect(starts).toHaveLength(1);
    expect(starts[0]!.Resource).toEqual({ Ref: logicalId(rounds) });
    expect(attachedStatements(template, rounds.role).filter((s) => actionsOf(s).some((a) => a.startsWith('states:')))).toHaveLength(0);
    const start = inlineStatements(template, job.coordinatorFunction.role!).filter((s) => actionsOf(s).includes('states:StartExecution'));
    expect(start).toHaveLength(1);
    expect(JSON.stringify(start[0]!.Resource)).toContain(':stateMachine:sluice-orders-coordinator"');
  });

  it('has no wildcard resource except the logs-delivery statements of the state machines\' roles', () => {
    const { template } = three;
    const offenders: string[] = [];
    const resources = template.toJSON().Resources as Record<string, { Type: string; Properties: Record<string, unknown> }>;
    for (const [id, res] of Object.entries(resources)) {
      const docs =
        res.Type === 'AWS::IAM::Role'
          ? ((res.Properties.Policies as Array<{ PolicyDocument: { Statement: Statement[] } }> | undefined) ?? []).map((p) => p.PolicyDocument)
          : res.Type === 'AWS::IAM::Policy'
            ? [res.Properties.PolicyDocument as { Statement: Statement[] }]
            : [];
      for (const st of docs.flatMap((d) => d.Statement)) {
        if (resourcesOf(st).includes('*')) offenders.push(`${id}: ${actionsOf(st).join(',')}`);
        for (const a of actionsOf(st)) if (a.includes('*')) offenders.push(`${id}: action ${a}`);
      }
    }
    // the coordinator workflow's and its rounds'
    expect(offenders).toHaveLength(2);
    expect(offenders.every((o) => /Coordinator(Rounds)?RoleDefaultPolicy/.test(o) && /logs:CreateLogDelivery/.test(o))).toBe(true);
  });

});

describe('encryptionKey', () => {
  it('uses the given key for streams, tables and bucket, and lets the functions use it', () => {
    let key!: kms.Key;
    const { template, job } = synthJob(clickstream, (s) => ({
      encryptionKey: (key = new kms.Key(s, 'Key', { enableKeyRotation: true })),
    }));
    const keyArn = getAtt(key);
    template.allResourcesProperties('AWS::Kinesis::Stream', { StreamEncryption: { EncryptionType: 'KMS', KeyId: keyArn } });
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: 'sluice-clickstream-state',
      SSESpecification: { SSEEnabled: true, SSEType: 'KMS', KMSMasterKeyId: keyArn },
    });
    template.hasResourceProperties('AWS::S3::Bucket', {
      BucketEncryption: {
        ServerSideEncryptionConfiguration: [
          { ServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms', KMSMasterKeyID: keyArn }, BucketKeyEnabled: true },
        ],
      },
    });
    for (const fn of [...job.stageFunctions.values(), job.coordinatorFunction]) {
      const st = inlineStatements(template, fn.role!).find((s) => s.Sid === 'JobKey')!;
      expect(actionsOf(st)).toEqual(['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey', 'kms:DescribeKey']);
      expect(st.Resource).toEqual(keyArn);
    }
  });

  it('adds kms:GenerateDataKey to producers and kms:Decrypt to readers', () => {
    let key!: kms.Key;
    const { template } = synthJob(
      clickstream,
      (s) => ({ encryptionKey: (key = new kms.Key(s, 'Key', { enableKeyRotation: true })) }),
      (s, sj) => {
        sj.grantWriteSource(new iam.Role(s, 'Producer', { assumedBy: new iam.AccountRootPrincipal() }));
        sj.grantReadResults(new iam.Role(s, 'Reader', { assumedBy: new iam.AccountRootPrincipal() }));
      },
    );
    template.hasResourceProperties('AWS::IAM::Policy', {
      Roles: [{ Ref: Match.stringLikeRegexp('^Producer') }],
      PolicyDocument: { Statement: Match.arrayWith([{ Effect: 'Allow', Action: 'kms:GenerateDataKey', Resource: getAtt(key) }]) },
    });
    template.hasResourceProperties('AWS::IAM::Policy', {
      Roles: [{ Ref: Match.stringLikeRegexp('^Reader') }],
      PolicyDocument: { Statement: Match.arrayWith([{ Effect: 'Allow', Action: ['kms:Decrypt', 'kms:DescribeKey'], Resource: getAtt(key) }]) },
    });
  });
});

describe('grants', () => {
  it('grantWriteSource gives producers PutRecord(s), DescribeStream, ListShards on the source stream', () => {
    const { template, job } = synthJob(clickstream, {}, (s, sj) => {
      const producer = new iam.Role(s, 'Producer', { assumedBy: new iam.AccountRootPrincipal() });
      sj.grantWriteSource(producer, 'clicks');
    });
    template.hasResourceProperties('AWS::IAM::Policy', {
      Roles: [{ Ref: Match.stringLikeRegexp('^Producer') }],
      PolicyDocument: {
        Statement: [
          {
            Effect: 'Allow',
            Action: ['kinesis:PutRecord', 'kinesis:PutRecords', 'kinesis:DescribeStream', 'kinesis:DescribeStreamSummary', 'kinesis:ListShards'],
            Resource: getAtt(job.streams.get('s0')!),
          },
        ],
      },
    });
    expect(() => job.grantWriteSource(new iam.Role(job, 'X', { assumedBy: new iam.AccountRootPrincipal() }), 'nope')).toThrow(
      /no source named "nope" \(sources: clicks\)/,
    );
  });

  it('grantReadResults gives readers the sink tables and the state table, read only', () => {
    const { template, job } = synthJob(clickstream, {}, (s, sj) => {
      sj.grantReadResults(new iam.Role(s, 'Reader', { assumedBy: new iam.AccountRootPrincipal() }));
    });
    template.hasResourceProperties('AWS::IAM::Policy', {
      Roles: [{ Ref: Match.stringLikeRegexp('^Reader') }],
      PolicyDocument: {
        Statement: [
          { Action: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query'], Resource: getAtt(job.stateTable) },
          {
            Action: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', 'dynamodb:Scan', 'dynamodb:DescribeTable'],
            Resource: getAtt(job.sinkTables.get('clicks-per-user-page')!),
          },
        ],
      },
    });
  });
});
