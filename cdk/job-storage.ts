/**
 * The job's data resources: the stages' input streams, the state, control and sink tables, the
 * output streams of Kinesis sinks and the data bucket. Each is encrypted under the job's key when
 * there is one, and kept on stack deletion unless `removalPolicy` says otherwise.
 */
import { Duration, Stack, Validations } from 'aws-cdk-lib';
import type { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import type { Plan } from '../shared/plan/plan.js';
import { sanitizeName } from '../shared/plan/resources.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import { KINESIS_SINK_SHARDS, kinesisSinkStream } from '../shared/plan/sink-names.js';
import { sourceOf } from './job-validation.js';

export interface StorageOptions {
  key?: kms.IKey;
  removalPolicy: RemovalPolicy;
  streamRetention: Duration;
  /** ids of the sources whose streams are on-demand */
  onDemand: ReadonlySet<string>;
}

export interface JobStreams {
  /** input stream of each stage, by stage id */
  streams: Map<string, kinesis.IStream>;
  /** stream of each source, by the source's logical name */
  sourceStreams: Map<string, kinesis.IStream>;
}

/** A stream that names an existing one (a source's or sink's `streamName`): imported, never created. */
function importedStream(scope: Construct, cid: string, streamName: string): kinesis.IStream {
  return kinesis.Stream.fromStreamAttributes(scope, cid, {
    streamArn: Stack.of(scope).formatArn({ service: 'kinesis', resource: 'stream', resourceName: streamName }),
  });
}

function ownStream(scope: Construct, cid: string, streamName: string, mode: Pick<kinesis.StreamProps, 'streamMode' | 'shardCount'>, opts: StorageOptions): kinesis.Stream {
  const { key } = opts;
  const stream = new kinesis.Stream(scope, cid, {
    streamName,
    ...mode,
    encryption: key ? kinesis.StreamEncryption.KMS : kinesis.StreamEncryption.MANAGED,
    ...(key ? { encryptionKey: key } : {}),
    retentionPeriod: opts.streamRetention,
    removalPolicy: opts.removalPolicy,
  });
  if (key) {
    Validations.of(stream).acknowledge({
      id: 'AwsSolutions-KDS3',
      reason: 'A customer-managed key was asked for (encryptionKey): its owner controls the key policy and rotation instead of alias/aws/kinesis.',
    });
  }
  return stream;
}

/** One input stream per distinct stream name: stages that read the same stream share it. */
export function createStageStreams(scope: Construct, plan: Plan, names: ResourceNames, opts: StorageOptions): JobStreams {
  const byName = new Map<string, kinesis.IStream>();
  const streams = new Map<string, kinesis.IStream>();
  const sourceStreams = new Map<string, kinesis.IStream>();
  for (const stage of plan.stages) {
    const streamName = names.streamOf(stage);
    let stream = byName.get(streamName);
    const source = sourceOf(plan, stage);
    if (!stream) {
      stream =
        source?.streamName !== undefined
          ? importedStream(scope, `Source-${source.id}`, streamName)
          : ownStream(
              scope,
              `Stream-${stage.id}`,
              streamName,
              source && opts.onDemand.has(source.id)
                ? { streamMode: kinesis.StreamMode.ON_DEMAND }
                : { streamMode: kinesis.StreamMode.PROVISIONED, shardCount: stage.parallelism },
              opts,
            );
      byName.set(streamName, stream);
    }
    streams.set(stage.id, stream);
    if (source) sourceStreams.set(source.name, stream);
  }
  return { streams, sourceStreams };
}

export interface JobTables {
  stateTable: dynamodb.Table;
  controlTable: dynamodb.Table;
  /** table of each `dynamodb-upsert` sink, by the sink's logical name */
  sinkTables: Map<string, dynamodb.ITable>;
}

export function createTables(scope: Construct, plan: Plan, names: ResourceNames, opts: StorageOptions): JobTables {
  const { key } = opts;
  const tableEncryption = key
    ? { encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED, encryptionKey: key }
    : { encryption: dynamodb.TableEncryption.AWS_MANAGED };
  const table = (cid: string, tableName: string, partitionKey: string, sortKey?: string): dynamodb.Table =>
    new dynamodb.Table(scope, cid, {
      tableName,
      partitionKey: { name: partitionKey, type: dynamodb.AttributeType.STRING },
      ...(sortKey ? { sortKey: { name: sortKey, type: dynamodb.AttributeType.STRING } } : {}),
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      ...tableEncryption,
      removalPolicy: opts.removalPolicy,
    });
  const stateTable = table('StateTable', names.stateTable, 'pk', 'sk');
  const controlTable = table('ControlTable', names.controlTable, 'pk', 'sk');
  const sinkTables = new Map<string, dynamodb.ITable>();
  for (const sink of plan.sinks) {
    if (sink.kind !== 'dynamodb-upsert') continue;
    const cid = `Sink-${sanitizeName(sink.name)}`;
    sinkTables.set(
      sink.name,
      sink.tableName !== undefined
        ? dynamodb.Table.fromTableName(scope, cid, sink.tableName)
        : table(cid, names.sinkTable(sink), sink.keyAttribute ?? 'pk'),
    );
  }
  return { stateTable, controlTable, sinkTables };
}

/** Output streams of Kinesis sinks (published by the coordinator at commit), by the sink's logical name. */
export function createSinkStreams(scope: Construct, plan: Plan, names: ResourceNames, opts: StorageOptions): Map<string, kinesis.IStream> {
  const sinkStreams = new Map<string, kinesis.IStream>();
  for (const sink of plan.sinks) {
    if (sink.kind !== 'kinesis') continue;
    const cid = `SinkStream-${sanitizeName(sink.name)}`;
    const streamName = kinesisSinkStream(names, sink);
    sinkStreams.set(
      sink.name,
      sink.streamName !== undefined
        ? importedStream(scope, cid, streamName)
        : ownStream(scope, cid, streamName, { streamMode: kinesis.StreamMode.PROVISIONED, shardCount: KINESIS_SINK_SHARDS }, opts),
    );
  }
  return sinkStreams;
}

export function createBucket(scope: Construct, opts: StorageOptions): s3.Bucket {
  const { key } = opts;
  const bucket = new s3.Bucket(scope, 'Bucket', {
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    enforceSSL: true,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    encryption: key ? s3.BucketEncryption.KMS : s3.BucketEncryption.S3_MANAGED,
    ...(key ? { encryptionKey: key, bucketKeyEnabled: true } : {}),
    versioned: false,
    removalPolicy: opts.removalPolicy,
    lifecycleRules: [
      // deltas/ and savepoints/ are expired by the coordinator (it knows which checkpoints are
      // retained); dead-letters/ and sinks/ are the user's data: never expired here.
      { id: 'expire-tmp', prefix: 'tmp/', expiration: Duration.days(1) },
      // dirty state an instance moved out of memory: a snapshot drops it; a dead owner's is never read
      { id: 'expire-spill', prefix: 'spill/', expiration: Duration.days(1) },
      { id: 'abort-incomplete-uploads', abortIncompleteMultipartUploadAfter: Duration.days(2) },
    ],
  });
  Validations.of(bucket).acknowledge({
    id: 'AwsSolutions-S1',
    reason:
      "Internal data bucket read and written only by this job's functions; server access logs would need a second bucket per job. CloudTrail data events are the audit path.",
  });
  return bucket;
}
