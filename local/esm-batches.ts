/**
 * Lambda's side of the local event source mapping: what an invocation looks like and what its result
 * does. A shard's buffered Kinesis records become the `KinesisStreamRecord`s of one batch (AWS's
 * own shape, under the synchronous payload limit, honouring a pending split); a handler's response is
 * read the way Lambda reads ReportBatchItemFailures; and the outcome decides how far the shard's
 * checkpoint moves and which batch sizes it still owes (a retry, or the halves of a bisect).
 */
import type { KinesisClient, _Record } from '@aws-sdk/client-kinesis';
import type { KinesisStreamRecord } from 'aws-lambda';

export type InvocationOutcome =
  /** the whole batch succeeded */
  | 'success'
  /** a valid partial batch response: the checkpoint moved to before the lowest failed record */
  | 'partial'
  /** the handler threw or rejected */
  | 'error'
  /** the handler ran past invocationTimeoutMs; it keeps running as a zombie */
  | 'timeout'
  /** a malformed partial batch response: the whole batch is retried */
  | 'invalid-response';

const DEFAULT_ACCOUNT = '000000000000';

/** Where the events say they come from: the stream's ARN and region, and the mapping's role. */
export interface EventSourceIdentity {
  readonly region: string;
  readonly arn: string;
  readonly identityArn: string;
}

/** The identity of a stream's events: from its ARN when given, else the region given or the client's. */
export async function eventSourceIdentity(kinesis: KinesisClient, streamName: string, streamArn?: string, regionOption?: string): Promise<EventSourceIdentity> {
  const fromArn = streamArn?.split(':');
  let region = regionOption ?? (fromArn && fromArn[3]) ?? undefined;
  if (!region) {
    try {
      const r = kinesis.config.region;
      region = typeof r === 'function' ? await r() : (r as unknown as string);
    } catch {
      region = undefined;
    }
  }
  const resolved = region || 'us-east-1';
  const account = (fromArn && fromArn[4]) || DEFAULT_ACCOUNT;
  return {
    region: resolved,
    arn: streamArn ?? `arn:aws:kinesis:${resolved}:${account}:stream/${streamName}`,
    identityArn: `arn:aws:iam::${account}:role/sluice-local-esm`,
  };
}

/** One Kinesis record as Lambda hands it to the function, base64 data and all. */
export function toEventRecord(shardId: string, r: _Record, identity: EventSourceIdentity): KinesisStreamRecord {
  const seq = r.SequenceNumber ?? '';
  return {
    kinesis: {
      kinesisSchemaVersion: '1.0',
      partitionKey: r.PartitionKey ?? '',
      sequenceNumber: seq,
      data: Buffer.from(r.Data ?? new Uint8Array()).toString('base64'),
      approximateArrivalTimestamp: (r.ApproximateArrivalTimestamp?.getTime() ?? Date.now()) / 1000,
    },
    eventSource: 'aws:kinesis',
    eventVersion: '1.0',
    eventID: `${shardId}:${seq}`,
    eventName: 'aws:kinesis:record',
    invokeIdentityArn: identity.identityArn,
    awsRegion: identity.region,
    eventSourceARN: identity.arn,
  };
}

/** A shard's records not yet behind its checkpoint, and the batch sizes it owes. */
export interface BatchQueue {
  readonly id: string;
  readonly buffer: _Record[];
  /** Sizes of the batches still owed from a split (bisect) or a retry; empty: normal batching. */
  readonly plan: number[];
  attempt: number;
}

/** The next batch from the buffer's head: the owed size if a retry/split is pending, else batchSize, within the payload limit. */
export function takeBatch(s: BatchQueue, batchSize: number, maxPayload: number, identity: EventSourceIdentity): KinesisStreamRecord[] {
  const limit = Math.min(s.plan[0] ?? batchSize, s.buffer.length);
  const out: KinesisStreamRecord[] = [];
  let bytes = '{"Records":[]}'.length;
  for (let i = 0; i < limit; i++) {
    const rec = toEventRecord(s.id, s.buffer[i], identity);
    const size = JSON.stringify(rec).length + 1;
    if (out.length > 0 && bytes + size > maxPayload) break;
    bytes += size;
    out.push(rec);
  }
  // A pending sub-batch cut by the payload limit keeps its remainder as the next one.
  if (s.plan.length > 0 && out.length < s.plan[0]) s.plan.splice(0, 1, out.length, s.plan[0] - out.length);
  return out;
}

/** Reads a handler's response the way Lambda does with ReportBatchItemFailures. */
export function judgeResponse(value: unknown, records: KinesisStreamRecord[], reportFailures: boolean): { outcome: InvocationOutcome; failedAt: number } {
  if (!reportFailures || value === undefined || value === null || typeof value !== 'object') {
    return { outcome: 'success', failedAt: -1 };
  }
  const failures = (value as { batchItemFailures?: unknown }).batchItemFailures;
  if (failures === undefined || failures === null) return { outcome: 'success', failedAt: -1 };
  if (!Array.isArray(failures)) return { outcome: 'invalid-response', failedAt: -1 };
  if (failures.length === 0) return { outcome: 'success', failedAt: -1 };
  let lowest = Infinity;
  for (const f of failures) {
    const id = f && typeof f === 'object' ? (f as { itemIdentifier?: unknown }).itemIdentifier : undefined;
    if (typeof id !== 'string' || id === '') return { outcome: 'invalid-response', failedAt: -1 };
    const idx = records.findIndex((r) => r.kinesis.sequenceNumber === id);
    if (idx < 0) return { outcome: 'invalid-response', failedAt: -1 };
    lowest = Math.min(lowest, idx);
  }
  return { outcome: 'partial', failedAt: lowest };
}

/**
 * Applies the outcome of a batch of `n` records to the shard's retry plan and attempt; returns how
 * many records from the head are done (the checkpoint moves past them), 0 when nothing was.
 */
export function applyOutcome(s: BatchQueue, outcome: InvocationOutcome, failedAt: number, n: number, bisect: boolean): number {
  if (outcome === 'success') {
    s.plan.shift();
    s.attempt = 0;
    return n;
  }
  if (outcome === 'partial' && failedAt > 0) {
    // With bisect on, Lambda retries only the rest of this batch; otherwise it reads afresh.
    if (bisect) s.plan.splice(0, 1, n - failedAt);
    else s.plan.shift();
    s.attempt = 1;
    return failedAt;
  }
  // Nothing processed: retry from the same first record.
  s.attempt++;
  const split = bisect && n > 1 && (outcome === 'error' || outcome === 'timeout');
  const half = Math.ceil(n / 2);
  s.plan.splice(0, 1, ...(split ? [half, n - half] : [n]));
  return 0;
}
