/**
 * The coordinator's ports on AWS: the control table (DynamoCheckpointStore), barriers into the
 * source streams and resharding (Kinesis), delta objects and savepoint files (S3), task tokens and
 * executions (Step Functions). `awsCoordinator` wires the one Coordinator class to them.
 */
import { GetRecordsCommand, GetShardIteratorCommand, PutRecordCommand, UpdateShardCountCommand } from '@aws-sdk/client-kinesis';
import { DeleteObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ListExecutionsCommand, SendTaskFailureCommand, SendTaskHeartbeatCommand, SendTaskSuccessCommand, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { Coordinator, type CoordinatorOptions } from '../../coordinator/coordinator.js';
import type { LoopPorts } from '../../coordinator/loop.js';
import type { CoordinatorPorts, DeltaObjects, SavepointWriter, ShardPeek, SourceInjector, StreamScaler, StreamSummary, Workflow } from '../../coordinator/ports.js';
import type { CommitTarget } from '../../coordinator/protocol.js';
import type { Plan } from '../../plan/plan.js';
import type { ResourceNames } from '../../plan/resources.js';
import type { ShardInfo, SnapshotPointer } from '../../runtime/ports.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';
import { DynamoCheckpointStore } from './dynamo-checkpoint-store.js';
import { DELTA_OBJECTS_PREFIX, groupDeltaKeys } from '../delta-keys.js';
import { KinesisShardDirectory } from './kinesis.js';
import { savepointPrefix, writeSavepoint } from './savepoints.js';
import { describeStreamSummary } from './stream-mode.js';
import { CoordinatorWake } from '../../coordinator/wake.js';
import { SfnTaskNotifier } from './sfn-notifier.js';

export class KinesisSourceInjector implements SourceInjector {
  constructor(private readonly clients: AwsClients) {}

  async putControl(stream: string, shard: ShardInfo, data: Uint8Array): Promise<void> {
    await withThrottleRetry(() => this.clients.kinesis.send(new PutRecordCommand({ StreamName: stream, PartitionKey: 'barrier', ExplicitHashKey: shard.startingHashKey, Data: data })));
  }
}

export class KinesisStreamScaler implements StreamScaler {
  constructor(private readonly clients: AwsClients) {}

  describe(stream: string): Promise<StreamSummary> {
    return describeStreamSummary(this.clients, stream);
  }

  async updateShardCount(stream: string, target: number): Promise<void> {
    await withThrottleRetry(() => this.clients.kinesis.send(new UpdateShardCountCommand({ StreamName: stream, TargetShardCount: target, ScalingType: 'UNIFORM_SCALING' })));
  }
}

export class KinesisShardPeek implements ShardPeek {
  constructor(private readonly clients: AwsClients) {}

  async *pagesAfter(stream: string, shardId: string, sequenceNumber: string) {
    const { kinesis } = this.clients;
    const it = await withThrottleRetry(() =>
      kinesis.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: shardId, ShardIteratorType: 'AFTER_SEQUENCE_NUMBER', StartingSequenceNumber: sequenceNumber })),
    );
    let iterator = it.ShardIterator;
    while (iterator) {
      const r = await withThrottleRetry(() => kinesis.send(new GetRecordsCommand({ ShardIterator: iterator!, Limit: 100 })));
      yield { records: (r.Records ?? []).flatMap((rec) => (rec.Data ? [rec.Data] : [])), caughtUp: !r.MillisBehindLatest };
      iterator = r.NextShardIterator;
    }
  }
}

export class S3DeltaObjects implements DeltaObjects {
  constructor(
    private readonly clients: AwsClients,
    private readonly bucket: string,
  ) {}

  async listByInstance(instanceIds: readonly string[]): Promise<Map<string, Map<number, string>>> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      // up to 1,000 keys a page: a job's retained deltas usually fit one request
      const r = await this.clients.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: DELTA_OBJECTS_PREFIX, ...(token ? { ContinuationToken: token } : {}) }));
      for (const o of r.Contents ?? []) if (o.Key) keys.push(o.Key);
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return groupDeltaKeys(keys, instanceIds);
  }

  async delete(key: string): Promise<void> {
    await this.clients.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }
}

export class S3SavepointWriter implements SavepointWriter {
  constructor(
    private readonly plan: Plan,
    private readonly names: ResourceNames,
    private readonly clients: AwsClients,
    private readonly bucket: string,
  ) {}

  async write(id: string, n: number, pointers: ReadonlyMap<string, SnapshotPointer>, at: Date) {
    const m = await writeSavepoint({ plan: this.plan, names: this.names, clients: this.clients, bucket: this.bucket }, id, n, pointers, at);
    return { rows: m.rows, timers: m.timers, bytes: m.bytes, location: `s3://${this.bucket}/${savepointPrefix(id)}` };
  }
}

export class SfnWorkflow implements Workflow {
  constructor(private readonly clients: AwsClients) {}

  async succeed(taskToken: string, output: unknown): Promise<void> {
    await this.clients.sfn.send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify(output) }));
  }

  async fail(taskToken: string, error: string, cause: string): Promise<void> {
    await this.clients.sfn.send(new SendTaskFailureCommand({ taskToken, error, cause }));
  }

  async heartbeat(taskToken: string): Promise<void> {
    await this.clients.sfn.send(new SendTaskHeartbeatCommand({ taskToken }));
  }

  async running(stateMachineArn: string): Promise<boolean> {
    const r = await this.clients.sfn.send(new ListExecutionsCommand({ stateMachineArn, statusFilter: 'RUNNING', maxResults: 1 }));
    return (r.executions?.length ?? 0) > 0;
  }

  async start(stateMachineArn: string, name: string, input: unknown): Promise<string> {
    const r = await this.clients.sfn.send(new StartExecutionCommand({ stateMachineArn, name, input: JSON.stringify(input) }));
    return r.executionArn!;
  }
}

/** The coordinator's ports over the job's AWS resources; `bucket` holds deltas and savepoints (@default names.bucket). */
export function awsCoordinatorPorts(plan: Plan, names: ResourceNames, clients: AwsClients, bucket = names.bucket): CoordinatorPorts {
  return {
    store: new DynamoCheckpointStore(clients, names.controlTable),
    shards: new KinesisShardDirectory(clients),
    injector: new KinesisSourceInjector(clients),
    notifier: new SfnTaskNotifier(clients),
    scaler: new KinesisStreamScaler(clients),
    deltas: new S3DeltaObjects(clients, bucket),
    savepoints: new S3SavepointWriter(plan, names, clients, bucket),
  };
}

/** The Coordinator over the job's AWS resources. */
export function awsCoordinator(
  plan: Plan,
  names: ResourceNames,
  clients: AwsClients,
  commitTargets: readonly CommitTarget[] = [],
  now?: () => Date,
  options: CoordinatorOptions & { readonly bucket?: string } = {},
): Coordinator {
  const { bucket, ...rest } = options;
  return new Coordinator(plan, names, awsCoordinatorPorts(plan, names, clients, bucket), commitTargets, now, rest);
}

/** The loop's ports (loop.ts) over the job's AWS resources. */
export function awsLoopPorts(names: ResourceNames, clients: AwsClients): LoopPorts {
  return { store: new DynamoCheckpointStore(clients, names.controlTable), workflow: new SfnWorkflow(clients), shards: new KinesisShardDirectory(clients), peek: new KinesisShardPeek(clients) };
}

/** What a source stage function wakes a parked coordinator with (wake.ts). */
export function awsCoordinatorWake(names: ResourceNames, clients: AwsClients): CoordinatorWake {
  return new CoordinatorWake(new DynamoCheckpointStore(clients, names.controlTable), new SfnWorkflow(clients));
}

/** Records an operator's stop (the watchdog leaves the job alone) or lifts it. */
export async function setOperatorStop(clients: AwsClients, names: ResourceNames, stopped: boolean, at = new Date()): Promise<void> {
  await new DynamoCheckpointStore(clients, names.controlTable).setOperatorStop(stopped ? at.toISOString() : undefined);
}
