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
 *
 * This module runs the loops (shard discovery and lineage, one loop per shard, routing to
 * environments, timeouts, stats); the Kinesis calls and read positions are in esm-kinesis-reads.ts,
 * the batches, responses and retry plans in esm-batches.ts.
 */
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { KinesisStreamBatchResponse, KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import { mulberry32 } from '../shared/runtime/random.js';
import { applyOutcome, eventSourceIdentity, judgeResponse, takeBatch, type BatchQueue, type EventSourceIdentity, type InvocationOutcome } from './esm-batches.js';
import { KinesisShardReads, Stopped, type ShardReadState } from './esm-kinesis-reads.js';
import { StoppableSleeps } from './stoppable-sleeps.js';

export type { InvocationOutcome } from './esm-batches.js';

export type KinesisHandler = (event: KinesisStreamEvent) => Promise<KinesisStreamBatchResponse | void>;

export interface ExecutionEnvironment {
  readonly id: string;
  readonly handler: KinesisHandler;
}

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

/** A shard as the poller tracks it: its reads, its batches, and its place in the lineage. */
interface ShardState extends ShardReadState, BatchQueue {
  parents: string[];
  status: ShardStatus;
  checkpoint?: string;
  inFlight: boolean;
  loop?: Promise<void>;
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
  private readonly sleeps = new StoppableSleeps<'shards' | 'discovery'>(['shards', 'discovery']);
  private readonly reads: KinesisShardReads;
  private started = false;
  private stopped = false;
  private discoveredOnce = false;
  private mainLoop?: Promise<void>;
  private identity: EventSourceIdentity = { region: 'us-east-1', arn: '', identityArn: '' };

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
    this.reads = new KinesisShardReads({
      kinesis: opts.kinesis,
      streamName: opts.streamName,
      batchSize: this.batchSize,
      startingPosition: opts.startingPosition,
      signal: this.sleeps.signal,
      counters: this.counters,
      stopped: () => this.stopped,
      pause: (ms) => this.sleeps.pause(ms),
      rand: this.rand,
      report: (err) => this.report(err),
    });
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
    this.sleeps.stop();
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

  private report(err: unknown): void {
    try {
      this.o.onError?.(err);
    } catch {
      // a failing listener must not stop the poller
    }
  }

  private async runDiscovery(): Promise<void> {
    try {
      this.identity = await eventSourceIdentity(this.o.kinesis, this.o.streamName, this.o.streamArn, this.o.region);
      while (!this.stopped) {
        const listed = await this.reads.listShards();
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
        await this.sleeps.nap(this.discoveryMs, 'discovery');
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

  private async runShard(s: ShardState): Promise<void> {
    try {
      // LATEST means "at start": take the position now even if parents are still being read.
      if (s.initial && this.o.startingPosition === 'LATEST') await this.reads.getIterator(s);
      while (!this.stopped && !this.parentsDone(s)) await this.sleeps.nap(this.pollMs, 'shards');
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
          await this.sleeps.pause(Math.min(2_000, 50 * 2 ** Math.min(failures++, 10)));
        }
      }
    } catch (err) {
      if (!(err instanceof Stopped)) this.report(err);
    }
  }

  /** One round of a shard's loop; true once the shard is finished. */
  private async step(s: ShardState): Promise<boolean> {
    await this.reads.fill(s);
    if (s.buffer.length === 0) {
      if (s.iterator === null) {
        s.status = 'finished';
        this.sleeps.wake('shards'); // children may start
        this.sleeps.wake('discovery'); // and may not be listed yet
        return true;
      }
      await this.sleeps.nap(this.pollMs, 'shards');
      return false;
    }
    if (s.plan.length === 0 && this.windowMs > 0 && s.buffer.length < this.batchSize && s.iterator !== null) {
      const left = s.windowStart + this.windowMs - Date.now();
      if (left > 0) {
        if (s.caughtUp) await this.sleeps.nap(Math.min(this.pollMs, left), 'shards');
        return false;
      }
    }
    await this.invoke(s, takeBatch(s, this.batchSize, this.maxPayload, this.identity));
    return false;
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
      await this.sleeps.nap(this.pollMs, 'shards');
    }
    return undefined;
  }

  private release(envId: string): void {
    this.busy.delete(envId);
    this.sleeps.wake('shards');
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
      ({ outcome, failedAt } = judgeResponse(result.value, records, this.reportFailures));
    }

    // Apply the outcome to the checkpoint and the retry plan.
    const done = applyOutcome(s, outcome, failedAt, n, this.bisect);
    if (done > 0) this.advance(s, done);

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

    if (s.attempt > 0 && !(outcome === 'partial' && failedAt > 0)) await this.sleeps.pause(this.backoff(s.attempt));
  }

  private advance(s: ShardState, count: number): void {
    const done = s.buffer.splice(0, count);
    s.checkpoint = done[done.length - 1].SequenceNumber;
    this.counters.recordsCheckpointed += done.length;
    if (s.buffer.length > 0) s.windowStart = Date.now();
  }
}
