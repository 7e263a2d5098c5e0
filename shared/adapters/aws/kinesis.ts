/**
 * Kinesis adapters: the shard directory (ListShards), the SDK side of the writers' `KinesisApi`
 * (the engine's writer gets every record accepted with `putRecordsUntilAccepted`), and a reader for
 * replay that shares the shard's read limits with the event source mapping, so it backs off.
 */
import {
  ExpiredIteratorException,
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListShardsCommand,
  PutRecordsCommand,
  type KinesisClient,
  type Shard,
} from '@aws-sdk/client-kinesis';
import { SluiceError } from '../../util/errors.js';
import type { ReplayPoint, ShardDirectory, ShardInfo, ShardReader, StoredRecord, Telemetry } from '../../runtime/ports.js';
import { compareSeq } from '../../runtime/positions.js';
import { PutRecordsStreamWriter, type KinesisApi, type PutResult } from '../put-records.js';
import { replayTrimmed } from '../replay-trimmed.js';
import type { AwsClients } from './clients.js';
import { backoffMs, sleep, withThrottleRetry } from './clients.js';

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
  };
}

/** Gets every record accepted (`putRecordsUntilAccepted`), counting retried entries as PutRecordsRetried. */
export class KinesisStreamWriter extends PutRecordsStreamWriter {
  constructor(clients: AwsClients, telemetry?: Telemetry) {
    super(sdkKinesisApi(clients.kinesis), telemetry);
  }
}

export class KinesisShardReader implements ShardReader {
  constructor(
    private readonly clients: AwsClients,
    private readonly pageSize = 1000,
  ) {}

  async *read(stream: string, shardId: string, from: ReplayPoint, untilExclusive: string | undefined): AsyncIterable<StoredRecord[]> {
    // Kinesis does not refuse a trimmed position: an iterator there starts at the oldest record still
    // retained (or walks the trimmed range as empty pages). So a replay point is read AT the record it
    // names, which must come back first; for 'after' it is then skipped.
    let anchor: string | undefined = from.from === 'start' ? undefined : from.sequenceNumber;
    let last: string | undefined;
    const iteratorFor = async (): Promise<string> => {
      const position =
        last !== undefined
          ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER' as const, StartingSequenceNumber: last }
          : anchor !== undefined
            ? { ShardIteratorType: 'AT_SEQUENCE_NUMBER' as const, StartingSequenceNumber: anchor }
            : { ShardIteratorType: 'TRIM_HORIZON' as const };
      try {
        const r = await withThrottleRetry(() => this.clients.kinesis.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: shardId, ...position })));
        return r.ShardIterator!;
      } catch (err) {
        // a sequence number this shard gave out and no longer accepts is one it has trimmed
        if (anchor !== undefined && last === undefined && (err as { name?: string }).name === 'InvalidArgumentException') {
          throw replayTrimmed(stream, shardId, from, undefined, err);
        }
        throw err;
      }
    };
    let iterator: string | undefined = await iteratorFor();
    let idle = 0;
    for (let attempt = 0; iterator; ) {
      let r;
      try {
        r = await this.clients.kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: this.pageSize }));
      } catch (err) {
        const name = (err as { name?: string }).name;
        if (name === 'ProvisionedThroughputExceededException' || name === 'LimitExceededException') {
          await sleep(backoffMs(attempt++, 200, 5_000)); // the ESM reads this shard too: give way
          continue;
        }
        if (err instanceof ExpiredIteratorException) {
          iterator = await iteratorFor();
          continue;
        }
        throw err;
      }
      attempt = 0;
      const page: StoredRecord[] = [];
      let reached = false;
      for (const rec of r.Records ?? []) {
        const seq = rec.SequenceNumber!;
        if (anchor !== undefined) {
          if (seq !== anchor) throw replayTrimmed(stream, shardId, from, seq);
          anchor = undefined;
          if (from.from === 'after') {
            last = seq;
            continue;
          }
        }
        if (untilExclusive !== undefined && compareSeq(seq, untilExclusive) >= 0) {
          reached = true;
          break;
        }
        page.push({
          sequenceNumber: seq,
          data: rec.Data!,
          partitionKey: rec.PartitionKey!,
          ...(rec.ApproximateArrivalTimestamp ? { approximateArrivalTimestamp: rec.ApproximateArrivalTimestamp.getTime() } : {}),
        });
        last = seq;
      }
      if (page.length) yield page;
      if (reached) return;
      iterator = r.NextShardIterator;
      if (!r.Records?.length) {
        const atTip = (r.MillisBehindLatest ?? 0) === 0;
        if (anchor !== undefined) {
          // nothing yet: an empty page behind the tip is normal, but at the tip (or the end of a
          // closed shard) the record the replay point names is not there
          if (atTip || !iterator) throw replayTrimmed(stream, shardId, from, undefined);
          await sleep(200);
          continue;
        }
        if (untilExclusive === undefined && atTip) return;
        // the record we must reach exists (it is in the batch being handled): keep reading
        if (++idle > 200) throw new SluiceError(`replay of ${stream}/${shardId} never reached ${untilExclusive}`, 'REPLAY_STALLED', true);
        await sleep(Math.min(1000, 20 * idle));
      } else idle = 0;
    }
    if (anchor !== undefined) throw replayTrimmed(stream, shardId, from, undefined); // a closed shard ended before it
  }
}
