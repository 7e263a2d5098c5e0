/**
 * PutRecords until every entry is accepted: the one way the engine, its sinks, the bounded reader,
 * the local runner, the CLI producer and the bench get records into a Kinesis stream.
 *
 * The rules, as Kinesis sets them:
 * - a request carries at most 500 entries and 5 MiB (data plus partition keys), so entries go in
 *   chunks within those limits;
 * - a request may fail as a whole with a throttling error: it is sent again after a backoff;
 * - a request may succeed partly: each entry has its own result, and only the rejected entries are
 *   sent again (after a backoff), so a retried entry can land after entries that followed it in the
 *   same chunk. Order *across* chunks holds when the chunks go one at a time (the default): a chunk
 *   is sent only once every entry of the one before was accepted;
 * - nothing is dropped: throttles and rejections are retried for as long as they last.
 *
 * It talks to a `KinesisApi` (one PutRecords request, ListShards): the SDK client behind the AWS
 * adapter, or the in-memory twin's service with its fault hooks.
 */
import type { OutgoingRecord, ShardInfo, StoredRecord, StreamWriter, Telemetry } from '../runtime/ports.js';
import { isThrottling, jitteredBackoff, type RetryPause } from './throttling.js';

export interface PutEntry {
  readonly data: Uint8Array;
  readonly partitionKey: string;
  readonly explicitHashKey?: string;
}

/** One entry's answer: where it landed, or why it was rejected. */
export type PutResult =
  | { readonly shardId: string; readonly sequenceNumber: string; readonly errorCode?: undefined }
  | { readonly errorCode: string; readonly errorMessage: string; readonly shardId?: undefined; readonly sequenceNumber?: undefined };

/** Where an accepted entry landed. */
export interface PutPosition {
  readonly shardId: string;
  readonly sequenceNumber: string;
}

/** Where a shard iterator starts. */
export type IteratorStart =
  | { readonly type: 'TRIM_HORIZON' }
  | { readonly type: 'AT_SEQUENCE_NUMBER' | 'AFTER_SEQUENCE_NUMBER'; readonly sequenceNumber: string };

/** One GetRecords page. */
export interface RecordsPage {
  readonly records: StoredRecord[];
  /** absent once a closed shard was read to its end */
  readonly nextIterator?: string;
  /** 0 at the tip of the shard */
  readonly millisBehindLatest: number;
}

/**
 * The Kinesis calls the engine's writers and readers make, as the service answers them (no retries
 * inside): the SDK client behind the AWS adapters, or the in-memory twin's service.
 */
export interface KinesisApi {
  /**
   * One PutRecords request: a result per entry, in request order; throws when the request fails as
   * a whole. `attempt` says which retry of its entries this is (the service ignores it; the twin's
   * fault hooks read it).
   */
  putRecords(stream: string, entries: readonly PutEntry[], attempt?: number): Promise<PutResult[]>;
  /** every shard of the stream, open and closed (ListShards, every page) */
  listShards(stream: string): Promise<ShardInfo[]>;
  /** GetShardIterator; a sequence number the shard no longer holds fails with InvalidArgumentException (or starts at the oldest retained record) */
  getShardIterator(stream: string, shardId: string, start: IteratorStart): Promise<string>;
  /** GetRecords; an old iterator fails with ExpiredIteratorException */
  getRecords(iterator: string, limit: number): Promise<RecordsPage>;
}

export const MAX_RECORDS_PER_PUT = 500;
export const MAX_BYTES_PER_PUT = 5 * 1024 * 1024;

export interface PutOptions {
  /** send every chunk at once instead of one after another (no order across chunks); @default false */
  readonly parallel?: boolean;
  /** entries per request; @default 500 (the API's limit) */
  readonly maxRecordsPerRequest?: number;
  /** waits before retry n of a chunk; @default jittered exponential backoff */
  readonly pause?: RetryPause;
  /** whole-request throttles retried before the error is thrown; @default forever (nothing is dropped) */
  readonly maxThrottleRetries?: number;
  /** told how many entries go again after a partial failure (the PutRecordsRetried metric) */
  readonly onRetry?: (entries: number) => void;
  /** called once every entry of a chunk was accepted, with the index after its last entry (progress cursors) */
  readonly afterChunk?: (end: number) => void | Promise<void>;
}

const entryBytes = (e: PutEntry) => e.data.length + Buffer.byteLength(e.partitionKey, 'utf8');

/** Splits entries into requests within PutRecords' limits, keeping their order. */
export function chunkForPut(entries: readonly PutEntry[], maxRecords = MAX_RECORDS_PER_PUT): Array<{ start: number; entries: readonly PutEntry[] }> {
  const chunks: Array<{ start: number; entries: readonly PutEntry[] }> = [];
  let start = 0;
  let bytes = 0;
  for (let i = 0; i < entries.length; i++) {
    const size = entryBytes(entries[i]!);
    if (i > start && (i - start === maxRecords || bytes + size > MAX_BYTES_PER_PUT)) {
      chunks.push({ start, entries: entries.slice(start, i) });
      start = i;
      bytes = 0;
    }
    bytes += size;
  }
  if (entries.length > start) chunks.push({ start, entries: entries.slice(start) });
  return chunks;
}

/**
 * Puts every entry, retrying throttled requests and rejected entries until all are accepted.
 * Returns where each entry landed, in the order given.
 */
export async function putRecordsUntilAccepted(api: KinesisApi, stream: string, entries: readonly PutEntry[], options: PutOptions = {}): Promise<PutPosition[]> {
  const positions: PutPosition[] = new Array(entries.length);
  const chunks = chunkForPut(entries, options.maxRecordsPerRequest);
  if (options.parallel) {
    await Promise.all(chunks.map((c) => putChunk(api, stream, c.entries, c.start, positions, options)));
    if (options.afterChunk) await options.afterChunk(entries.length);
  } else {
    for (const c of chunks) {
      await putChunk(api, stream, c.entries, c.start, positions, options);
      await options.afterChunk?.(c.start + c.entries.length);
    }
  }
  return positions;
}

async function putChunk(api: KinesisApi, stream: string, chunk: readonly PutEntry[], start: number, positions: PutPosition[], options: PutOptions): Promise<void> {
  const pause = options.pause ?? jitteredBackoff;
  const maxThrottleRetries = options.maxThrottleRetries ?? Infinity;
  // indexes (into `positions`) of the entries still to be accepted
  let pending = chunk.map((_, i) => start + i);
  let entries = chunk;
  for (let attempt = 0, throttles = 0; ; ) {
    let results: PutResult[];
    try {
      results = await api.putRecords(stream, entries, attempt);
    } catch (err) {
      if (!isThrottling(err) || throttles >= maxThrottleRetries) throw err;
      await pause(throttles++);
      continue;
    }
    throttles = 0;
    const failed: number[] = [];
    pending.forEach((at, i) => {
      const r = results[i];
      if (r && !r.errorCode && r.sequenceNumber) positions[at] = { shardId: r.shardId, sequenceNumber: r.sequenceNumber };
      else failed.push(i);
    });
    if (!failed.length) return;
    // partial failure: only the rejected entries go again (so they may land after later ones)
    options.onRetry?.(failed.length);
    pending = failed.map((i) => pending[i]!);
    entries = failed.map((i) => entries[i]!);
    await pause(attempt++);
  }
}

/**
 * The engine's stream writer over a `KinesisApi`. Its chunks go at once: the engine needs no order
 * across them (a barrier is put only after the records it follows were all accepted).
 */
export class PutRecordsStreamWriter implements StreamWriter {
  constructor(
    private readonly api: KinesisApi,
    private readonly telemetry?: Telemetry,
    private readonly retry: Pick<PutOptions, 'pause' | 'maxThrottleRetries'> = {},
  ) {}

  async putAll(stream: string, records: readonly OutgoingRecord[]): Promise<void> {
    const entries = records.map((r): PutEntry => ({ data: r.data, partitionKey: 'p', explicitHashKey: r.hashKey }));
    await putRecordsUntilAccepted(this.api, stream, entries, { ...this.retry, parallel: true, onRetry: (n) => this.telemetry?.count('PutRecordsRetried', n) });
  }
}
