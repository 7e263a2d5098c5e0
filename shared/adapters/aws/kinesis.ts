/**
 * Kinesis adapters: the shard directory (ListShards), the SDK side of the writers' `KinesisApi`
 * (the engine's writer gets every record accepted with `putRecordsUntilAccepted`), and a reader for
 * replay that shares the shard's read limits with the event source mapping, so it backs off.
 */
import {
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListShardsCommand,
  PutRecordsCommand,
  type KinesisClient,
  type Shard,
} from '@aws-sdk/client-kinesis';
import type { ShardDirectory, ShardInfo, StoredRecord, Telemetry } from '../../runtime/ports.js';
import { PutRecordsStreamWriter, type KinesisApi, type PutResult } from '../put-records.js';
import { KinesisApiShardReader } from '../shard-reader.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';

export function toShardInfo(s: Shard): ShardInfo {
  return {
    shardId: s.ShardId!,
    startingHashKey: s.HashKeyRange!.StartingHashKey!,
    endingHashKey: s.HashKeyRange!.EndingHashKey!,
    ...(s.ParentShardId ? { parentShardId: s.ParentShardId } : {}),
    ...(s.AdjacentParentShardId ? { adjacentParentShardId: s.AdjacentParentShardId } : {}),
    ...(s.SequenceNumberRange?.EndingSequenceNumber ? { endingSequenceNumber: s.SequenceNumberRange.EndingSequenceNumber } : {}),
  };
}

export async function listAllShards(clients: Pick<AwsClients, 'kinesis'> | KinesisClient, stream: string): Promise<ShardInfo[]> {
  const kinesis = 'kinesis' in clients ? clients.kinesis : clients;
  const out: ShardInfo[] = [];
  let token: string | undefined;
  do {
    const r = await withThrottleRetry(() =>
      kinesis.send(new ListShardsCommand(token ? { NextToken: token } : { StreamName: stream })),
    );
    for (const s of r.Shards ?? []) out.push(toShardInfo(s));
    token = r.NextToken;
  } while (token);
  return out;
}

export class KinesisShardDirectory implements ShardDirectory {
  constructor(private readonly clients: AwsClients) {}

  async openShards(stream: string): Promise<readonly ShardInfo[]> {
    return (await listAllShards(this.clients, stream)).filter((s) => s.endingSequenceNumber === undefined);
  }

  allShards(stream: string): Promise<readonly ShardInfo[]> {
    return listAllShards(this.clients, stream);
  }
}

/** The Kinesis calls writers make, over the SDK client (one request per call: the retries are the caller's). */
export function sdkKinesisApi(kinesis: KinesisClient): KinesisApi {
  return {
    async putRecords(stream, entries) {
      const r = await kinesis.send(
        new PutRecordsCommand({
          StreamName: stream,
          Records: entries.map((e) => ({ Data: e.data, PartitionKey: e.partitionKey, ...(e.explicitHashKey !== undefined ? { ExplicitHashKey: e.explicitHashKey } : {}) })),
        }),
      );
      return entries.map((_, i): PutResult => {
        const x = r.Records?.[i];
        if (x?.SequenceNumber && !x.ErrorCode) return { shardId: x.ShardId!, sequenceNumber: x.SequenceNumber };
        return { errorCode: x?.ErrorCode ?? 'MissingResult', errorMessage: x?.ErrorMessage ?? 'PutRecords returned no result for this entry' };
      });
    },
    listShards: (stream) => listAllShards(kinesis, stream),
    async getShardIterator(stream, shardId, start) {
      const r = await kinesis.send(
        new GetShardIteratorCommand({
          StreamName: stream,
          ShardId: shardId,
          ShardIteratorType: start.type,
          ...(start.type === 'TRIM_HORIZON' ? {} : { StartingSequenceNumber: start.sequenceNumber }),
        }),
      );
      return r.ShardIterator!;
    },
    async getRecords(iterator, limit) {
      const r = await kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: limit }));
      return {
        records: (r.Records ?? []).map(
          (rec): StoredRecord => ({
            sequenceNumber: rec.SequenceNumber!,
            data: rec.Data!,
            partitionKey: rec.PartitionKey!,
            ...(rec.ApproximateArrivalTimestamp ? { approximateArrivalTimestamp: rec.ApproximateArrivalTimestamp.getTime() } : {}),
          }),
        ),
        ...(r.NextShardIterator ? { nextIterator: r.NextShardIterator } : {}),
        millisBehindLatest: r.MillisBehindLatest ?? 0,
      };
    },
  };
}

/** Gets every record accepted (`putRecordsUntilAccepted`), counting retried entries as PutRecordsRetried. */
export class KinesisStreamWriter extends PutRecordsStreamWriter {
  constructor(clients: AwsClients, telemetry?: Telemetry) {
    super(sdkKinesisApi(clients.kinesis), telemetry);
  }
}

/** The replay reader (`KinesisApiShardReader`) over the SDK client. */
export class KinesisShardReader extends KinesisApiShardReader {
  constructor(clients: Pick<AwsClients, 'kinesis'>, pageSize = 1000) {
    super(sdkKinesisApi(clients.kinesis), { pageSize });
  }
}
