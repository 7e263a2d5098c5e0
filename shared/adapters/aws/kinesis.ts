/**
 * Kinesis adapters: the shard directory (ListShards), a writer that gets every record accepted
 * (PutRecords partial failures are retried, in chunks within the API's limits), and a reader for
 * replay that shares the shard's read limits with the event source mapping, so it backs off.
 */
import {
  ExpiredIteratorException,
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListShardsCommand,
  PutRecordsCommand,
  type PutRecordsRequestEntry,
  type Shard,
} from '@aws-sdk/client-kinesis';
import { SluiceError } from '../../util/errors.js';
import type { OutgoingRecord, ReplayPoint, ShardDirectory, ShardInfo, ShardReader, StoredRecord, StreamWriter, Telemetry } from '../../runtime/ports.js';
import { compareSeq } from '../../runtime/positions.js';
import { replayTrimmed } from '../replay-trimmed.js';
import type { AwsClients } from './clients.js';
import { backoffMs, sleep, withThrottleRetry } from './clients.js';

const MAX_RECORDS_PER_PUT = 500;
const MAX_BYTES_PER_PUT = 4.5 * 1024 * 1024;

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

export async function listAllShards(clients: AwsClients, stream: string): Promise<ShardInfo[]> {
  const out: ShardInfo[] = [];
  let token: string | undefined;
  do {
    const r = await withThrottleRetry(() =>
      clients.kinesis.send(new ListShardsCommand(token ? { NextToken: token } : { StreamName: stream })),
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

export class KinesisStreamWriter implements StreamWriter {
  constructor(
    private readonly clients: AwsClients,
    private readonly telemetry?: Telemetry,
  ) {}

  async putAll(stream: string, records: readonly OutgoingRecord[]): Promise<void> {
    let chunk: OutgoingRecord[] = [];
    let bytes = 0;
    const chunks: OutgoingRecord[][] = [];
    for (const r of records) {
      if (chunk.length === MAX_RECORDS_PER_PUT || bytes + r.data.length > MAX_BYTES_PER_PUT) {
        chunks.push(chunk);
        chunk = [];
        bytes = 0;
      }
      chunk.push(r);
      bytes += r.data.length;
    }
    if (chunk.length) chunks.push(chunk);
    await Promise.all(chunks.map((c) => this.putChunk(stream, c)));
  }

  private async putChunk(stream: string, records: readonly OutgoingRecord[]): Promise<void> {
    let pending: PutRecordsRequestEntry[] = records.map((r) => ({ Data: r.data, PartitionKey: 'p', ExplicitHashKey: r.hashKey }));
    for (let attempt = 0; pending.length; attempt++) {
      const r = await withThrottleRetry(() => this.clients.kinesis.send(new PutRecordsCommand({ StreamName: stream, Records: pending })));
      if (!r.FailedRecordCount) return;
      // partial failure: only the failed entries go again (they may now land after later ones)
      const failed = pending.filter((_, i) => r.Records?.[i]?.ErrorCode);
      this.telemetry?.count('PutRecordsRetried', failed.length);
      pending = failed;
      await sleep(backoffMs(attempt));
    }
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
