/**
 * The Kinesis side of the local event source mapping: ListShards, GetShardIterator and GetRecords,
 * each retried on any error with jittered backoff until it passes or the poller stops (throttles are
 * counted, other errors counted and reported), and a shard's read position: its iterator (taken again
 * after the last record fetched when it expires), the records fetched and not yet checkpointed, and
 * whether the last read reached the shard's tip.
 */
import {
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListShardsCommand,
  type GetRecordsCommandOutput,
  type KinesisClient,
  type ListShardsCommandInput,
  type Shard,
  type _Record,
} from '@aws-sdk/client-kinesis';

const THROTTLING = new Set([
  'ProvisionedThroughputExceededException',
  'LimitExceededException',
  'ThrottlingException',
  'KMSThrottlingException',
]);

/** Thrown out of a Kinesis call once the poller has stopped. */
export class Stopped extends Error {}

function errorName(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { name?: unknown; Code?: unknown; __type?: unknown };
    for (const v of [e.name, e.Code, e.__type]) if (typeof v === 'string') return v.split('#').pop() ?? v;
  }
  return '';
}

/** Where a shard's reading stands. */
export interface ShardReadState {
  readonly id: string;
  /** the shard was listed by the first ListShards (startingPosition applies to it) */
  readonly initial: boolean;
  /** undefined: none yet (or expired); null: the closed shard was read to its end */
  iterator: string | null | undefined;
  lastFetched?: string;
  readonly buffer: _Record[];
  caughtUp: boolean;
  /** when the oldest buffered record arrived in the buffer (the batching window starts there) */
  windowStart: number;
}

/** What the reads take from the poller that runs them. */
export interface KinesisReadContext {
  readonly kinesis: KinesisClient;
  readonly streamName: string;
  readonly batchSize: number;
  readonly startingPosition: 'TRIM_HORIZON' | 'LATEST' | undefined;
  readonly signal: AbortSignal;
  readonly counters: { throttles: number; kinesisErrors: number };
  stopped(): boolean;
  /** a backoff that only stopping cuts short */
  pause(ms: number): Promise<void>;
  rand(): number;
  report(err: unknown): void;
}

export class KinesisShardReads {
  constructor(private readonly x: KinesisReadContext) {}

  /** One Kinesis call, retried on any error until it passes or the poller stops. */
  async call<T>(what: string, call: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (this.x.stopped()) throw new Stopped();
      try {
        return await call();
      } catch (err) {
        if (this.x.stopped()) throw new Stopped();
        const name = errorName(err);
        if (name === 'ExpiredIteratorException') throw err;
        if (THROTTLING.has(name)) this.x.counters.throttles++;
        else {
          this.x.counters.kinesisErrors++;
          this.x.report(Object.assign(new Error(`EventSourcePoller(${this.x.streamName}): ${what} failed: ${String((err as Error)?.message ?? err)}`), { cause: err }));
        }
        const cap = Math.min(2_000, 50 * 2 ** Math.min(attempt - 1, 10));
        await this.x.pause(cap / 2 + this.x.rand() * (cap / 2));
      }
    }
  }

  async listShards(): Promise<Shard[]> {
    const out: Shard[] = [];
    let next: string | undefined;
    do {
      const input: ListShardsCommandInput = next ? { NextToken: next } : { StreamName: this.x.streamName };
      const res = await this.call('ListShards', () => this.x.kinesis.send(new ListShardsCommand(input), { abortSignal: this.x.signal }));
      out.push(...(res.Shards ?? []));
      next = res.NextToken;
    } while (next);
    return out;
  }

  async getIterator(s: ShardReadState): Promise<void> {
    const input = s.lastFetched
      ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER' as const, StartingSequenceNumber: s.lastFetched }
      : { ShardIteratorType: s.initial && this.x.startingPosition === 'LATEST' ? ('LATEST' as const) : ('TRIM_HORIZON' as const) };
    const res = await this.call(`GetShardIterator(${s.id})`, () =>
      this.x.kinesis.send(new GetShardIteratorCommand({ StreamName: this.x.streamName, ShardId: s.id, ...input }), {
        abortSignal: this.x.signal,
      }),
    );
    s.iterator = res.ShardIterator ?? null;
  }

  /** One GetRecords when the buffer has room. */
  async fill(s: ShardReadState): Promise<void> {
    if (s.iterator === null || s.buffer.length >= this.x.batchSize) return;
    if (s.iterator === undefined) await this.getIterator(s);
    if (s.iterator === null || s.iterator === undefined) return;
    let res: GetRecordsCommandOutput;
    try {
      const iterator = s.iterator;
      res = await this.call(`GetRecords(${s.id})`, () =>
        this.x.kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: Math.min(10_000, this.x.batchSize) }), {
          abortSignal: this.x.signal,
        }),
      );
    } catch (err) {
      if (errorName(err) === 'ExpiredIteratorException') {
        s.iterator = undefined; // re-read after the last record fetched
        return;
      }
      throw err;
    }
    const records = res.Records ?? [];
    if (records.length > 0) {
      if (s.buffer.length === 0) s.windowStart = Date.now();
      s.buffer.push(...records);
      s.lastFetched = records[records.length - 1].SequenceNumber;
    }
    s.iterator = res.NextShardIterator ?? null;
    // Only an empty read proves the tip was reached: kinesis-local reports MillisBehindLatest 0
    // while more records are waiting.
    s.caughtUp = records.length === 0 || s.iterator === null;
  }
}
