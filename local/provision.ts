/**
 * Creates a planned job's resources in the emulators (or any AWS endpoint): the local counterpart of
 * `cdk deploy`, driven by the same plan and the same resource names. Idempotent.
 */
import { CreateTableCommand, DescribeTableCommand, ResourceInUseException } from '@aws-sdk/client-dynamodb';
import { CreateStreamCommand, DescribeStreamSummaryCommand, ResourceInUseException as StreamInUse } from '@aws-sdk/client-kinesis';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import type { AwsClients } from '../shared/adapters/aws/clients.js';
import { sleep } from '../shared/adapters/aws/clients.js';
import type { Plan } from '../shared/plan/plan.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import { KINESIS_SINK_SHARDS, kinesisSinkStream } from '../shared/plan/sink-names.js';

export async function provisionJob(plan: Plan, names: ResourceNames, clients: AwsClients): Promise<void> {
  const streams = [
    ...plan.stages.map((s) => ({ name: names.streamOf(s), shards: s.parallelism })),
    // output streams of Kinesis sinks (an existing stream named by the sink is created too, locally)
    ...plan.sinks.filter((s) => s.kind === 'kinesis').map((s) => ({ name: kinesisSinkStream(names, s), shards: KINESIS_SINK_SHARDS })),
  ];
  const tables: Array<{ name: string; key: string; sort?: string }> = [
    { name: names.stateTable, key: 'pk', sort: 'sk' },
    { name: names.controlTable, key: 'pk', sort: 'sk' },
    ...plan.sinks.filter((s) => s.kind === 'dynamodb-upsert').map((s) => ({ name: names.sinkTable(s), key: s.keyAttribute ?? 'pk' })),
  ];
  await Promise.all([
    ...streams.map((s) => createStream(clients, s.name, s.shards)),
    ...tables.map((t) => createTable(clients, t.name, t.key, t.sort)),
    createBucket(clients, names.bucket),
  ]);
}

export async function createBucket(clients: Pick<AwsClients, 's3'>, name: string): Promise<void> {
  await clients.s3.send(new CreateBucketCommand({ Bucket: name })).catch((err: unknown) => {
    const code = (err as { name?: string }).name;
    if (code !== 'BucketAlreadyOwnedByYou' && code !== 'BucketAlreadyExists') throw err;
  });
}

export async function createStream(clients: Pick<AwsClients, 'kinesis'>, name: string, shards: number): Promise<void> {
  try {
    await clients.kinesis.send(new CreateStreamCommand({ StreamName: name, ShardCount: shards }));
  } catch (err) {
    if (!(err instanceof StreamInUse)) throw err;
  }
  for (let i = 0; i < 200; i++) {
    const d = await clients.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: name }));
    if (d.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') return;
    await sleep(50);
  }
  throw new Error(`stream ${name} did not become ACTIVE`);
}

export async function createTable(clients: Pick<AwsClients, 'dynamodb'>, name: string, key: string, sort?: string): Promise<void> {
  try {
    await clients.dynamodb.send(
      new CreateTableCommand({
        TableName: name,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: key, AttributeType: 'S' }, ...(sort ? [{ AttributeName: sort, AttributeType: 'S' as const }] : [])],
        KeySchema: [{ AttributeName: key, KeyType: 'HASH' }, ...(sort ? [{ AttributeName: sort, KeyType: 'RANGE' as const }] : [])],
      }),
    );
  } catch (err) {
    if (!(err instanceof ResourceInUseException)) throw err;
  }
  for (let i = 0; i < 200; i++) {
    const d = await clients.dynamodb.send(new DescribeTableCommand({ TableName: name }));
    if (d.Table?.TableStatus === 'ACTIVE') return;
    await sleep(50);
  }
  throw new Error(`table ${name} did not become ACTIVE`);
}
