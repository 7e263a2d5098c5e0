/**
 * A local stand-in for Lambda's Kinesis event source mapping (ESM). It reads the (emulated) stream
 * through the Kinesis API and calls local handlers with AWS's own `KinesisStreamEvent` shape.
 *
 * What it reproduces, because the engine's correctness depends on it:
 * - each shard is polled on its own (GetShardIterator/GetRecords), with one batch in flight per
 *   shard; its checkpoint is the last sequence number whose batch succeeded;
 * - shard lineage: a child shard is read only once every parent has been read to its end (GetRecords
 *   returned no NextShardIterator) and all of the parent's records were processed; new shards are
 *   found by periodic ListShards;
 * - errors are retried forever (the product's ESMs use MaximumRetryAttempts -1), starting again at
 *   the same record; with BisectBatchOnFunctionError the failing batch is split in two and the halves
 *   are retried one after the other, as Lambda does;
 * - ReportBatchItemFailures: the checkpoint moves to just before the lowest reported sequence number;
 *   an empty, missing or unknown itemIdentifier fails the whole batch;
 * - a batching window, the batch size and Lambda's 6 MB payload limit;
 * - routing: every invocation goes to a free execution environment chosen at random (seeded), so
 *   consecutive batches of a shard land in different environments; an environment runs one
 *   invocation at a time;
 * - an optional invocation timeout: the batch is retried elsewhere while the timed-out call keeps
 *   running (a zombie) and keeps its environment busy; its result is ignored;
 * - Kinesis throttling (and any other Kinesis error) is retried with backoff, never skipped.
 *
 * Not reproduced: ParallelizationFactor > 1, MaximumRecordAge/MaximumRetryAttempts limits,
 * on-failure destinations, tumbling windows, event filtering, enhanced fan-out.
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
import type { KinesisStreamBatchResponse, KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import { mulberry32 } from '../shared/runtime/random.js';

export type KinesisHandler = (event: KinesisStreamEvent) => Promise<KinesisStreamBatchResponse | void>;

export interface ExecutionEnvironment {
  readonly id: string;
  readonly handler: KinesisHandler;
}

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

export interface InvocationInfo {
  shardId: string;
  environmentId: string;
  firstSequenceNumber: string;
  lastSequenceNumber: string;
  count: number;
  /** how many earlier invocations of a batch starting at this record failed */
  attempt: number;
  outcome: InvocationOutcome;
  error?: unknown;
  /** for 'partial': the lowest reported failed sequence number */
  failedSequenceNumber?: string;
  durationMs: number;
}

export interface EventSourcePollerOptions {
  kinesis: KinesisClient;
  streamName: string;
  /** Used only in the events. @default arn:aws:kinesis:<region>:000000000000:stream/<streamName> */
  streamArn?: string;
  /** @default the ARN's region, else the client's */
  region?: string;
  /**
   * The function's execution environments. A function is read before every invocation, so callers
   * can recycle environments (replace entries) while the poller runs.
   */
  environments: ExecutionEnvironment[] | (() => ExecutionEnvironment[]);
  /** @default 100 (Lambda's default for Kinesis); 1..10000 */
  batchSize?: number;
  /** Wait up to this long to fill a batch. @default 0 */
  maximumBatchingWindowMs?: number;
  /** For the shards that exist at start; shards found later are read from TRIM_HORIZON. @default 'TRIM_HORIZON' */
  startingPosition?: 'TRIM_HORIZON' | 'LATEST';
  /** @default true */
  bisectBatchOnFunctionError?: boolean;
  /** @default true */
  reportBatchItemFailures?: boolean;
  /** Delay between polls of a shard that had nothing new. @default 50 */
  pollIntervalMs?: number;
  /** How often ListShards looks for new shards (also run whenever a shard ends). @default 1000 */
  shardDiscoveryIntervalMs?: number;
  /** An invocation running longer counts as failed and its batch is retried. @default none */
  invocationTimeoutMs?: number;
  /** Lambda's synchronous invocation payload limit. @default 6 MiB */
  maxPayloadBytes?: number;
  /** Delay before retrying a failed batch, by attempt (1, 2, ...). @default 10 ms doubling, capped at 1 s */
  retryBackoffMs?: (attempt: number) => number;
  /** Seed of the routing randomness. @default random (see stats().seed) */
  seed?: number;
  onInvocation?: (info: InvocationInfo) => void;
  /** Kinesis errors (other than throttling) and listener errors; all are retried. */
  onError?: (err: unknown) => void;
}

export type ShardStatus = 'waiting-for-parents' | 'reading' | 'finished';

export interface ShardStats {
  status: ShardStatus;
  parents: string[];
  checkpoint?: string;
  buffered: number;
  inFlight: boolean;
  caughtUp: boolean;
}

export interface PollerStats {
  seed: number;
  invocations: number;
  byOutcome: Record<InvocationOutcome, number>;
  /** records handed to handlers, retries included */
  recordsDelivered: number;
  /** records behind a checkpoint */
  recordsCheckpointed: number;
  inFlight: number;
  zombies: number;
  throttles: number;
  kinesisErrors: number;
  perEnvironment: Record<string, number>;
  shards: Record<string, ShardStats>;
}

const THROTTLING = new Set([
  'ProvisionedThroughputExceededException',
  'LimitExceededException',
  'ThrottlingException',
  'KMSThrottlingException',
]);

const DEFAULT_ACCOUNT = '000000000000';

interface ShardState {
  id: string;
  parents: string[];
  initial: boolean;
  status: ShardStatus;
  /** undefined: none yet (or expired); null: the closed shard was read to its end */
  iterator: string | null | undefined;
  lastFetched?: string;
  buffer: _Record[];
  checkpoint?: string;
  caughtUp: boolean;
  /** Sizes of the batches still owed from a split (bisect) or a retry; empty: normal batching. */
  plan: number[];
  attempt: number;
  inFlight: boolean;
  windowStart: number;
  loop?: Promise<void>;
}

class Stopped extends Error {}

function errorName(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { name?: unknown; Code?: unknown; __type?: unknown };
    for (const v of [e.name, e.Code, e.__type]) if (typeof v === 'string') return v.split('#').pop() ?? v;
  }
  return '';
}

function requireInt(name: string, v: number | undefined, min: number, max: number): void {
  if (v === undefined) return;
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`EventSourcePoller: ${name} must be an integer in [${min}, ${max}], got ${String(v)}`);
  }
}

export class EventSourcePoller {
  private readonly o: EventSourcePollerOptions;
  private readonly batchSize: number;
  private readonly windowMs: number;
  private readonly pollMs: number;
  private readonly discoveryMs: number;
  private readonly maxPayload: number;
  private readonly bisect: boolean;
  private readonly reportFailures: boolean;
  private readonly backoff: (attempt: number) => number;
  private readonly seed: number;
  private readonly rand: () => number;

  private readonly shards = new Map<string, ShardState>();
  private readonly busy = new Set<string>();
  private readonly sleepers = { shards: new Set<() => void>(), discovery: new Set<() => void>() };
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly abort = new AbortController();
  private started = false;
  private stopped = false;
  private discoveredOnce = false;
  private mainLoop?: Promise<void>;
  private region = 'us-east-1';
  private arn = '';
  private identityArn = '';

  private readonly counters = {
    invocations: 0,
    recordsDelivered: 0,
    recordsCheckpointed: 0,
    inFlight: 0,
    zombies: 0,
    throttles: 0,
    kinesisErrors: 0,
  };
  private readonly byOutcome: Record<InvocationOutcome, number> = {
    success: 0,
    partial: 0,
    error: 0,
    timeout: 0,
    'invalid-response': 0,
  };
  private readonly perEnvironment: Record<string, number> = {};

  constructor(opts: EventSourcePollerOptions) {
    if (!opts.streamName) throw new TypeError('EventSourcePoller: streamName is required');
    requireInt('batchSize', opts.batchSize, 1, 10_000);
    requireInt('maximumBatchingWindowMs', opts.maximumBatchingWindowMs, 0, 300_000);
    requireInt('pollIntervalMs', opts.pollIntervalMs, 1, 60_000);
    requireInt('shardDiscoveryIntervalMs', opts.shardDiscoveryIntervalMs, 1, 3_600_000);
    requireInt('invocationTimeoutMs', opts.invocationTimeoutMs, 1, 900_000);
    requireInt('maxPayloadBytes', opts.maxPayloadBytes, 1, 1 << 30);
    if (opts.startingPosition && opts.startingPosition !== 'TRIM_HORIZON' && opts.startingPosition !== 'LATEST') {
      throw new RangeError(`EventSourcePoller: startingPosition must be TRIM_HORIZON or LATEST, got ${String(opts.startingPosition)}`);
    }
    this.o = opts;
    this.batchSize = opts.batchSize ?? 100;
    this.windowMs = opts.maximumBatchingWindowMs ?? 0;
    this.pollMs = opts.pollIntervalMs ?? 50;
    this.discoveryMs = opts.shardDiscoveryIntervalMs ?? 1_000;
    this.maxPayload = opts.maxPayloadBytes ?? 6 * 1024 * 1024;
    this.bisect = opts.bisectBatchOnFunctionError ?? true;
    this.reportFailures = opts.reportBatchItemFailures ?? true;
    this.backoff = opts.retryBackoffMs ?? ((n) => Math.min(1_000, 10 * 2 ** (n - 1)));
    this.seed = opts.seed ?? Math.floor(Math.random() * 2 ** 32);
    this.rand = mulberry32(this.seed);
  }

  start(): void {
    if (this.started) throw new Error('EventSourcePoller: start() was already called');
    this.started = true;
    this.mainLoop = this.runDiscovery();
  }

  /** Ends every loop and timer; waits for in-flight invocations (not for zombies). */
  async stop(): Promise<void> {
    if (this.stopped) {
      await this.mainLoop;
      return;
    }
    this.stopped = true;
    this.abort.abort();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.wake('shards');
    this.wake('discovery');
    await this.mainLoop;
    await Promise.all([...this.shards.values()].map((s) => s.loop));
  }

  /**
   * True when, as far as the poller knows, every shard has been read to its current end, nothing is
   * buffered and no invocation is in flight (zombies do not count).
   */
  idle(): boolean {
    if (!this.started || !this.discoveredOnce || this.counters.inFlight > 0) return false;
    for (const s of this.shards.values()) {
      if (s.status === 'finished') continue;
      if (s.status !== 'reading' || s.buffer.length > 0 || !s.caughtUp || s.inFlight) return false;
    }
    return true;
  }

  /** Resolves once idle() has held for `settleMs` without a break. */
  async whenIdle(opts: { timeoutMs?: number; settleMs?: number } = {}): Promise<void> {
    const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
    const settle = opts.settleMs ?? Math.max(3 * this.pollMs, 100);
    let since: number | undefined;
    for (;;) {
      if (this.idle()) {
        since ??= Date.now();
        if (Date.now() - since >= settle) return;
      } else since = undefined;
      if (Date.now() > deadline) throw new Error(`EventSourcePoller(${this.o.streamName}): not idle after ${opts.timeoutMs ?? 30_000} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  stats(): PollerStats {
    const shards: Record<string, ShardStats> = {};
    for (const s of this.shards.values()) {
      shards[s.id] = {
        status: s.status,
        parents: [...s.parents],
        checkpoint: s.checkpoint,
        buffered: s.buffer.length,
        inFlight: s.inFlight,
        caughtUp: s.caughtUp,
      };
    }
    return {
      seed: this.seed,
      ...this.counters,
      byOutcome: { ...this.byOutcome },
      perEnvironment: { ...this.perEnvironment },
      shards,
    };
  }

  // -------------------------------------------------------------------------------------------
  // Sleeping that stop() and progress elsewhere can cut short

  private nap(ms: number, channel: 'shards' | 'discovery' = 'shards'): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.timers.delete(t);
        this.sleepers[channel].delete(done);
        resolve();
      };
      const t = setTimeout(done, Math.max(0, ms));
      this.timers.add(t);
      this.sleepers[channel].add(done);
    });
  }

  /** A sleep that only stop() interrupts (backoffs must not be shortened by unrelated progress). */
  private pause(ms: number): Promise<void> {
    if (this.stopped || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        this.abort.signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(t);
        this.timers.delete(t);
        resolve();
      };
      this.timers.add(t);
      this.abort.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  private wake(channel: 'shards' | 'discovery'): void {
    for (const f of [...this.sleepers[channel]]) f();
  }

  private report(err: unknown): void {
    try {
      this.o.onError?.(err);
    } catch {
      // a failing listener must not stop the poller
    }
  }

  // -------------------------------------------------------------------------------------------
  // Kinesis calls, retried on any error until they pass or the poller stops

  private async kinesisCall<T>(what: string, call: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (this.stopped) throw new Stopped();
      try {
        return await call();
      } catch (err) {
        if (this.stopped) throw new Stopped();
        const name = errorName(err);
        if (name === 'ExpiredIteratorException') throw err;
        if (THROTTLING.has(name)) this.counters.throttles++;
        else {
          this.counters.kinesisErrors++;
          this.report(Object.assign(new Error(`EventSourcePoller(${this.o.streamName}): ${what} failed: ${String((err as Error)?.message ?? err)}`), { cause: err }));
        }
        const cap = Math.min(2_000, 50 * 2 ** Math.min(attempt - 1, 10));
        await this.pause(cap / 2 + this.rand() * (cap / 2));
      }
    }
  }

  private async init(): Promise<void> {
    const fromArn = this.o.streamArn?.split(':');
    let region = this.o.region ?? (fromArn && fromArn[3]) ?? undefined;
    if (!region) {
      try {
        const r = this.o.kinesis.config.region;
        region = typeof r === 'function' ? await r() : (r as unknown as string);
      } catch {
        region = undefined;
      }
    }
    this.region = region || 'us-east-1';
    const account = (fromArn && fromArn[4]) || DEFAULT_ACCOUNT;
    this.arn = this.o.streamArn ?? `arn:aws:kinesis:${this.region}:${account}:stream/${this.o.streamName}`;
    this.identityArn = `arn:aws:iam::${account}:role/sluice-local-esm`;
  }

  private async listShards(): Promise<Shard[]> {
    const out: Shard[] = [];
    let next: string | undefined;
    do {
      const input: ListShardsCommandInput = next ? { NextToken: next } : { StreamName: this.o.streamName };
      const res = await this.kinesisCall('ListShards', () =>
        this.o.kinesis.send(new ListShardsCommand(input), { abortSignal: this.abort.signal }),
      );
      out.push(...(res.Shards ?? []));
      next = res.NextToken;
    } while (next);
    return out;
  }

  private async runDiscovery(): Promise<void> {
    try {
      await this.init();
      while (!this.stopped) {
        const listed = await this.listShards();
        for (const sh of listed) {
          if (!sh.ShardId || this.shards.has(sh.ShardId)) continue;
          const state: ShardState = {
            id: sh.ShardId,
            parents: [sh.ParentShardId, sh.AdjacentParentShardId].filter((p): p is string => !!p),
            initial: !this.discoveredOnce,
            status: 'waiting-for-parents',
            iterator: undefined,
            buffer: [],
            caughtUp: false,
            plan: [],
            attempt: 0,
            inFlight: false,
            windowStart: 0,
          };
          this.shards.set(state.id, state);
          state.loop = this.runShard(state);
        }
        this.discoveredOnce = true;
        await this.nap(this.discoveryMs, 'discovery');
      }
    } catch (err) {
      if (!(err instanceof Stopped)) this.report(err);
    }
  }

  // -------------------------------------------------------------------------------------------
  // One loop per shard

  private parentsDone(s: ShardState): boolean {
    // A parent missing from ListShards has aged out of the stream: nothing left to read there.
    return s.parents.every((p) => this.shards.get(p)?.status !== 'reading' && this.shards.get(p)?.status !== 'waiting-for-parents');
  }

  private async getIterator(s: ShardState): Promise<void> {
    const input = s.lastFetched
      ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER' as const, StartingSequenceNumber: s.lastFetched }
      : { ShardIteratorType: s.initial && this.o.startingPosition === 'LATEST' ? ('LATEST' as const) : ('TRIM_HORIZON' as const) };
    const res = await this.kinesisCall(`GetShardIterator(${s.id})`, () =>
      this.o.kinesis.send(new GetShardIteratorCommand({ StreamName: this.o.streamName, ShardId: s.id, ...input }), {
        abortSignal: this.abort.signal,
      }),
    );
    s.iterator = res.ShardIterator ?? null;
  }

  /** One GetRecords when the buffer has room. */
  private async fill(s: ShardState): Promise<void> {
    if (s.iterator === null || s.buffer.length >= this.batchSize) return;
    if (s.iterator === undefined) await this.getIterator(s);
    if (s.iterator === null || s.iterator === undefined) return;
    let res: GetRecordsCommandOutput;
    try {
      const iterator = s.iterator;
      res = await this.kinesisCall(`GetRecords(${s.id})`, () =>
        this.o.kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: Math.min(10_000, this.batchSize) }), {
          abortSignal: this.abort.signal,
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

  private async runShard(s: ShardState): Promise<void> {
    try {
      // LATEST means "at start": take the position now even if parents are still being read.
      if (s.initial && this.o.startingPosition === 'LATEST') await this.getIterator(s);
      while (!this.stopped && !this.parentsDone(s)) await this.nap(this.pollMs);
      if (this.stopped) return;
      s.status = 'reading';
      let failures = 0;
      while (!this.stopped) {
        try {
          if (await this.step(s)) return;
          failures = 0;
        } catch (err) {
          if (err instanceof Stopped) return;
          // e.g. an environments() callback that threw: report, back off, keep the shard going
          this.report(err);
          await this.pause(Math.min(2_000, 50 * 2 ** Math.min(failures++, 10)));
        }
      }
    } catch (err) {
      if (!(err instanceof Stopped)) this.report(err);
    }
  }

  /** One round of a shard's loop; true once the shard is finished. */
  private async step(s: ShardState): Promise<boolean> {
    await this.fill(s);
    if (s.buffer.length === 0) {
      if (s.iterator === null) {
        s.status = 'finished';
        this.wake('shards'); // children may start
        this.wake('discovery'); // and may not be listed yet
        return true;
      }
      await this.nap(this.pollMs);
      return false;
    }
    if (s.plan.length === 0 && this.windowMs > 0 && s.buffer.length < this.batchSize && s.iterator !== null) {
      const left = s.windowStart + this.windowMs - Date.now();
      if (left > 0) {
        if (s.caughtUp) await this.nap(Math.min(this.pollMs, left));
        return false;
      }
    }
    await this.invoke(s, this.takeBatch(s));
    return false;
  }

  private toEventRecord(shardId: string, r: _Record): KinesisStreamRecord {
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
      invokeIdentityArn: this.identityArn,
      awsRegion: this.region,
      eventSourceARN: this.arn,
    };
  }

  /** The next batch from the buffer's head: the owed size if a retry/split is pending, else batchSize, within the payload limit. */
  private takeBatch(s: ShardState): KinesisStreamRecord[] {
    const limit = Math.min(s.plan[0] ?? this.batchSize, s.buffer.length);
    const out: KinesisStreamRecord[] = [];
    let bytes = '{"Records":[]}'.length;
    for (let i = 0; i < limit; i++) {
      const rec = this.toEventRecord(s.id, s.buffer[i]);
      const size = JSON.stringify(rec).length + 1;
      if (out.length > 0 && bytes + size > this.maxPayload) break;
      bytes += size;
      out.push(rec);
    }
    // A pending sub-batch cut by the payload limit keeps its remainder as the next one.
    if (s.plan.length > 0 && out.length < s.plan[0]) s.plan.splice(0, 1, out.length, s.plan[0] - out.length);
    return out;
  }

  private async acquireEnvironment(): Promise<ExecutionEnvironment | undefined> {
    while (!this.stopped) {
      const all = typeof this.o.environments === 'function' ? this.o.environments() : this.o.environments;
      const free = all.filter((e) => !this.busy.has(e.id));
      if (free.length > 0) {
        const env = free[Math.floor(this.rand() * free.length)];
        this.busy.add(env.id);
        return env;
      }
      await this.nap(this.pollMs);
    }
    return undefined;
  }

  private release(envId: string): void {
    this.busy.delete(envId);
    this.wake('shards');
  }

  private async invoke(s: ShardState, records: KinesisStreamRecord[]): Promise<void> {
    const env = await this.acquireEnvironment();
    if (!env) return;
    const n = records.length;
    const first = records[0].kinesis.sequenceNumber;
    const last = records[n - 1].kinesis.sequenceNumber;
    const attempt = s.attempt;
    s.inFlight = true;
    this.counters.inFlight++;
    this.counters.invocations++;
    this.counters.recordsDelivered += n;
    this.perEnvironment[env.id] = (this.perEnvironment[env.id] ?? 0) + 1;
    const t0 = Date.now();

    type Result = { kind: 'ok'; value: unknown } | { kind: 'error'; error: unknown } | { kind: 'timeout' };
    const call: Promise<Result> = Promise.resolve()
      // A copy, as Lambda hands over deserialized JSON: the handler cannot alter what the poller judges.
      .then(() => env.handler(structuredClone({ Records: records })))
      .then(
        (value): Result => ({ kind: 'ok', value }),
        (error): Result => ({ kind: 'error', error }),
      );
    let result: Result;
    let timer: NodeJS.Timeout | undefined;
    if (this.o.invocationTimeoutMs !== undefined) {
      const timeout = new Promise<Result>((resolve) => {
        timer = setTimeout(() => resolve({ kind: 'timeout' }), this.o.invocationTimeoutMs);
      });
      result = await Promise.race([call, timeout]);
      clearTimeout(timer);
    } else {
      result = await call;
    }
    if (result.kind === 'timeout') {
      // The environment stays busy until the zombie returns; its result is dropped.
      this.counters.zombies++;
      void call.then(() => {
        this.counters.zombies--;
        this.release(env.id);
      });
    } else {
      this.release(env.id);
    }
    this.counters.inFlight--;
    s.inFlight = false;

    let outcome: InvocationOutcome;
    let failedAt = -1;
    let error: unknown;
    if (result.kind === 'timeout') {
      outcome = 'timeout';
      error = new Error(`Task timed out after ${this.o.invocationTimeoutMs} ms`);
    } else if (result.kind === 'error') {
      outcome = 'error';
      error = result.error;
    } else {
      ({ outcome, failedAt } = this.judge(result.value, records));
    }

    // Apply the outcome to the checkpoint and the retry plan.
    if (outcome === 'success') {
      this.advance(s, n);
      s.plan.shift();
      s.attempt = 0;
    } else if (outcome === 'partial' && failedAt > 0) {
      this.advance(s, failedAt);
      // With bisect on, Lambda retries only the rest of this batch; otherwise it reads afresh.
      if (this.bisect) s.plan.splice(0, 1, n - failedAt);
      else s.plan.shift();
      s.attempt = 1;
    } else {
      // Nothing processed: retry from the same first record.
      s.attempt++;
      const split = this.bisect && n > 1 && (outcome === 'error' || outcome === 'timeout');
      const half = Math.ceil(n / 2);
      s.plan.splice(0, 1, ...(split ? [half, n - half] : [n]));
    }

    try {
      this.o.onInvocation?.({
        shardId: s.id,
        environmentId: env.id,
        firstSequenceNumber: first,
        lastSequenceNumber: last,
        count: n,
        attempt,
        outcome,
        ...(error !== undefined ? { error } : {}),
        ...(outcome === 'partial' ? { failedSequenceNumber: records[failedAt].kinesis.sequenceNumber } : {}),
        durationMs: Date.now() - t0,
      });
    } catch (err) {
      this.report(err);
    }
    this.byOutcome[outcome]++;

    if (s.attempt > 0 && !(outcome === 'partial' && failedAt > 0)) await this.pause(this.backoff(s.attempt));
  }

  /** Reads a handler's response the way Lambda does with ReportBatchItemFailures. */
  private judge(value: unknown, records: KinesisStreamRecord[]): { outcome: InvocationOutcome; failedAt: number } {
    if (!this.reportFailures || value === undefined || value === null || typeof value !== 'object') {
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

  private advance(s: ShardState, count: number): void {
    const done = s.buffer.splice(0, count);
    s.checkpoint = done[done.length - 1].SequenceNumber;
    this.counters.recordsCheckpointed += done.length;
    if (s.buffer.length > 0) s.windowStart = Date.now();
  }
}
