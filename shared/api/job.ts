/**
 * The job builder: a DataStream-style API that records a logical graph. Record types flow through
 * the generics, so a `map` after a `filter` sees the filtered type and a sink accepts only what the
 * stream carries. Nothing here touches AWS or the runtime.
 */
import type { PlanSource, RecordFormat } from '../plan/plan.js';
import { MAX_EVENT_TIME, type ExchangeNode, type LogicalNode, type SinkDefinition, type SourceNode, type WatermarkStrategy } from './graph.js';
import type { AggregateFunction, MapStateDescriptor, StateDescriptor } from './state.js';
import { checkStateDeclarations, listState, mapState, valueState } from './state.js';
import { UsageError } from '../util/errors.js';
import { checkSinkSpec } from './sinks.js';
import { checkStreamName } from './stream-names.js';
import { appendBufferMapSerializer, appended, type AppendBuffer } from './append-buffer.js';
import type {
  Collector,
  Key,
  KeyedBroadcastProcessFunction,
  KeyedCoProcessFunction,
  KeyedProcessFunction,
  OutputTag,
  ProcessFunction,
  RecordContext,
} from './types.js';
import { assignWindows } from './windows.js';
import type { ProcessWindowFunction, TimeWindow, WindowAssigner, WindowOptions, WindowResult } from './windows.js';

export interface CheckpointOptions {
  /** time between two checkpoints; @default 10 s */
  readonly intervalMs?: number;
  /**
   * the progress window: a checkpoint is aborted when no instance acknowledged it for this long
   * (doubled for each checkpoint aborted just before it), or once it has been open 10 × this long;
   * a checkpoint whose acknowledgements keep arriving is not aborted for being slow; @default 60 s
   */
  readonly timeoutMs?: number;
  /** least time between the end of one checkpoint and the start of the next; @default 0 */
  readonly minPauseMs?: number;
  /** completed checkpoints kept; @default 3 */
  readonly retained?: number;
  /**
   * checkpoints in flight at once (1–8): a new one starts every interval while earlier ones still
   * align, as long as fewer than this many are open; @default 1
   */
  readonly maxConcurrent?: number;
  /**
   * a source shard forwards at most this many records beyond its position at the barrier of the
   * last checkpoint that crossed the whole pipeline, then waits for the next one to cross: bounds
   * what queues between stages, so a checkpoint's barriers cross a stage slower than its input in
   * about this many records' processing (only with one checkpoint in flight); @default 50_000
   */
  readonly maxInFlightRecords?: number;
  /**
   * every this many checkpoints an instance applies the state rows of its snapshots to the state
   * table; the checkpoints between write only their delta, and a restore folds the deltas since the
   * last application (1–16; 1 writes the table at every checkpoint); @default about every two minutes:
   * ceil(120 s / the checkpoint interval), at most 16
   */
  readonly materializeEvery?: number;
}

export interface JobOptions {
  /** number of key groups: the upper bound of any stage's parallelism, fixed for the life of the state; @default 128 */
  readonly maxParallelism?: number;
  /** @default 'exactly-once' */
  readonly mode?: 'exactly-once' | 'at-least-once';
  /** what happens to a record that cannot be decoded or makes user code throw; @default 'dead-letter' */
  readonly poisonPolicy?: 'fail' | 'dead-letter';
  readonly checkpoint?: CheckpointOptions;
}

export interface KinesisSourceOptions<T> {
  /** logical name of the source (also names the stream the job creates) */
  readonly name: string;
  /** shards of the source stream = parallelism of the first stage; @default 1 */
  readonly shards?: number;
  /** how the producers' bytes are decoded; @default 'json' */
  readonly format?: RecordFormat;
  /** read an existing stream instead of creating one */
  readonly streamName?: string;
  /** de-aggregate KPL-aggregated records; @default true */
  readonly deaggregate?: boolean;
  /** validates/converts a decoded record; throw to reject it (it then goes to the dead letters) */
  readonly parse?: (raw: unknown) => T;
  /** event time of a record in ms since the epoch */
  readonly timestamp?: (value: T) => number;
  /** how watermarks follow event time; @default bounded out-of-orderness of 0 ms when `timestamp` is set */
  readonly watermarks?: WatermarkStrategy;
}

/** Watermark strategies for sources. */
export const WatermarkStrategies = {
  /** records may be up to `maxOutOfOrdernessMs` late relative to the latest event time seen */
  boundedOutOfOrderness: (maxOutOfOrdernessMs: number, options: { idleTimeoutMs?: number } = {}): WatermarkStrategy => ({
    maxOutOfOrdernessMs,
    ...options,
  }),
  /** event time never goes backwards within a shard */
  monotonous: (options: { idleTimeoutMs?: number } = {}): WatermarkStrategy => ({ maxOutOfOrdernessMs: 0, ...options }),
};

/** The job: a name, options, and the graph its streams record. */
export class Job {
  /** @internal the recorded graph, in creation order */
  readonly nodes: LogicalNode[] = [];
  private nextId = 0;

  constructor(
    readonly name: string,
    readonly options: JobOptions = {},
  ) {}

  /** Reads a Kinesis stream fed by ordinary producers. */
  source<T = unknown>(options: KinesisSourceOptions<T>): DataStream<T> {
    const bound = options.watermarks?.maxOutOfOrdernessMs;
    // a watermark the wire cannot carry (a fraction, or too far) would fail every batch of the shard
    if (bound !== undefined && !(Number.isInteger(bound) && bound >= 0 && bound <= MAX_EVENT_TIME)) {
      throw new UsageError(`source ${options.name}`, 'watermarks.maxOutOfOrdernessMs', `must be a whole number of ms from 0 to ${MAX_EVENT_TIME}, got ${String(bound)}`);
    }
    if (options.streamName !== undefined) checkStreamName(`source ${options.name}`, options.streamName);
    const idle = options.watermarks?.idleTimeoutMs;
    // a NaN, negative or infinite timeout is a mistake (leave it unset for never)
    if (idle !== undefined && !(Number.isInteger(idle) && idle >= 0 && idle <= MAX_EVENT_TIME)) {
      throw new UsageError(`source ${options.name}`, 'watermarks.idleTimeoutMs', `must be a whole number of ms from 0 to ${MAX_EVENT_TIME}, got ${String(idle)}`);
    }
    const id = this.newId('source');
    const spec: PlanSource = {
      id,
      kind: 'kinesis',
      name: options.name,
      shards: options.shards ?? 1,
      format: options.format ?? 'json',
      deaggregate: options.deaggregate ?? true,
      ...(options.streamName !== undefined ? { streamName: options.streamName } : {}),
    };
    const node: SourceNode = {
      id,
      kind: 'source',
      name: options.name,
      inputs: [],
      spec,
      ...(options.parse ? { parse: options.parse as (raw: unknown) => unknown } : {}),
      ...(options.timestamp ? { timestamp: options.timestamp } : {}),
      ...(options.watermarks ? { watermarks: options.watermarks } : options.timestamp ? { watermarks: { maxOutOfOrdernessMs: 0 } } : {}),
    };
    return new DataStream<T>(this, this.add(node));
  }

  /** @internal */
  add<N extends LogicalNode>(node: N): N {
    this.nodes.push(node);
    return node;
  }

  /** @internal */
  newId(kind: string): string {
    return `op${this.nextId++}-${kind}`;
  }
}

/** Creates a job. */
export function job(name: string, options?: JobOptions): Job {
  return new Job(name, options);
}

interface NameOption {
  /** shown in plans, diagrams, logs and metrics */
  readonly name?: string;
}

export class DataStream<T> {
  constructor(
    /** @internal */ readonly job: Job,
    /** @internal */ readonly node: LogicalNode,
  ) {}

  map<R>(fn: (value: T, ctx: RecordContext) => R, options: NameOption = {}): DataStream<R> {
    const id = this.job.newId('map');
    return this.next<R>({ id, kind: 'map', name: options.name ?? 'map', inputs: [this.node], fn });
  }

  filter(fn: (value: T, ctx: RecordContext) => boolean, options: NameOption = {}): DataStream<T> {
    const id = this.job.newId('filter');
    return this.next<T>({ id, kind: 'filter', name: options.name ?? 'filter', inputs: [this.node], fn });
  }

  flatMap<R>(fn: (value: T, ctx: RecordContext) => Iterable<R>, options: NameOption = {}): DataStream<R> {
    const id = this.job.newId('flatMap');
    return this.next<R>({ id, kind: 'flatMap', name: options.name ?? 'flatMap', inputs: [this.node], fn });
  }

  /**
   * Partitions the stream by key: all records of a key reach the same instance, which holds the
   * key's state. `parallelism` is the shard count of the stream between the two stages.
   */
  keyBy<K extends Key>(selector: (value: T) => K, options: { parallelism?: number } = {}): KeyedStream<K, T> {
    const id = this.job.newId('keyBy');
    const node: ExchangeNode = {
      id,
      kind: 'exchange',
      name: 'keyBy',
      inputs: [this.node],
      partitioning: 'key',
      keySelector: selector,
      ...(options.parallelism !== undefined ? { parallelism: options.parallelism } : {}),
    };
    return new KeyedStream<K, T>(this.job, this.job.add(node));
  }

  /** Spreads records round robin over `parallelism` instances of the next stage. */
  rebalance(options: { parallelism?: number } = {}): DataStream<T> {
    const id = this.job.newId('rebalance');
    return this.next<T>({
      id,
      kind: 'exchange',
      name: 'rebalance',
      inputs: [this.node],
      partitioning: 'rebalance',
      ...(options.parallelism !== undefined ? { parallelism: options.parallelism } : {}),
    });
  }

  /** Runs a non-keyed process function, with per-instance operator list state. */
  process<O>(fn: ProcessFunction<T, O>, options: NameOption = {}): DataStream<O> {
    const id = this.job.newId('process');
    const name = options.name ?? 'process';
    checkStateDeclarations(`process "${name}"`, fn.state ?? []);
    return this.next<O>({ id, kind: 'operatorProcess', name, inputs: [this.node], fn, operatorState: fn.state ?? [] });
  }

  /** Reads what the operator producing this stream emitted to a side output. */
  sideOutput<S>(tag: OutputTag<S>): DataStream<S> {
    const id = this.job.newId('sideOutput');
    return this.next<S>({ id, kind: 'sideOutput', name: `side:${tag.id}`, inputs: [this.node], tag: tag.id });
  }

  /** Merges streams of the same type (from the same stage: follow with keyBy to merge across stages). */
  union(...others: DataStream<T>[]): DataStream<T> {
    const id = this.job.newId('union');
    return this.next<T>({ id, kind: 'union', name: 'union', inputs: [this.node, ...others.map((o) => o.node)] });
  }

  /**
   * Sends every record to every instance of the operator it is connected to, which keeps the
   * given broadcast state (identical everywhere): rules, configuration, reference data.
   */
  broadcast(...state: MapStateDescriptor<string | number, unknown>[]): BroadcastStream<T> {
    const id = this.job.newId('broadcast');
    checkStateDeclarations('broadcast', state);
    const node = this.job.add({ id, kind: 'exchange', name: 'broadcast', inputs: [this.node], partitioning: 'broadcast', broadcastState: state });
    return new BroadcastStream<T>(this.job, node);
  }

  /** Joins with another stream on equal keys within event-time windows: `a.join(b).where(...).equalTo(...).window(...).apply(...)`. */
  join<U>(other: DataStream<U>): JoinBuilder<T, U> {
    return new JoinBuilder<T, U>(this, other);
  }

  /** Writes the stream to a sink. */
  sinkTo(sink: SinkDefinition<T>): void {
    checkSinkSpec(sink.spec);
    this.job.add({ id: this.job.newId('sink'), kind: 'sink', name: sink.spec.name, inputs: [this.node], spec: sink.spec, sink });
  }

  /** @internal */
  protected next<R>(node: LogicalNode): DataStream<R> {
    return new DataStream<R>(this.job, this.job.add(node));
  }
}

export class KeyedStream<K extends Key, T> {
  constructor(
    /** @internal */ readonly job: Job,
    /** @internal */ readonly node: LogicalNode,
  ) {}

  /** Runs a keyed process function: per-key state, outputs through a collector. */
  process<O>(fn: KeyedProcessFunction<K, T, O>, options: NameOption = {}): DataStream<O> {
    const id = this.job.newId('process');
    const name = options.name ?? 'process';
    checkStateDeclarations(`process "${name}"`, fn.state ?? []);
    const node = this.job.add({
      id,
      kind: 'process',
      name,
      inputs: [this.node],
      fn: fn as unknown as KeyedProcessFunction<Key, unknown, unknown>,
      state: (fn.state ?? []) as readonly StateDescriptor<unknown>[],
    });
    return new DataStream<O>(this.job, node);
  }

  /** Connects a second keyed stream (same key type): a co-process function sees both, with shared keyed state. */
  connect<U>(other: KeyedStream<K, U>): ConnectedKeyedStreams<K, T, U>;
  /** Connects a broadcast stream: every instance gets every broadcast record and keeps the broadcast state. */
  connect<B>(other: BroadcastStream<B>): BroadcastConnectedStream<K, T, B>;
  connect<U>(other: KeyedStream<K, U> | BroadcastStream<U>): ConnectedKeyedStreams<K, T, U> | BroadcastConnectedStream<K, T, U> {
    if (other instanceof BroadcastStream) return new BroadcastConnectedStream<K, T, U>(this.job, this.node, other.node);
    return new ConnectedKeyedStreams<K, T, U>(this.job, this.node, other.node);
  }

  /**
   * Joins each record of this stream with the records of `other` of the same key whose event time
   * lies in [t + lowerMs, t + upperMs]. Buffers are dropped once the watermark passes them.
   */
  intervalJoin<U>(other: KeyedStream<K, U>, bounds: { lowerMs: number; upperMs: number }): IntervalJoined<K, T, U> {
    if (!Number.isInteger(bounds.lowerMs) || !Number.isInteger(bounds.upperMs) || bounds.lowerMs > bounds.upperMs) {
      throw new UsageError('intervalJoin', 'bounds', `must be integers with lowerMs <= upperMs, got lowerMs ${bounds.lowerMs} and upperMs ${bounds.upperMs}`);
    }
    return new IntervalJoined<K, T, U>(this.connect(other), bounds);
  }

  /** Groups each key's records into event-time windows. */
  window(assigner: WindowAssigner, options: WindowOptions<T> = {}): WindowedStream<K, T> {
    return new WindowedStream<K, T>(this.job, this.node, assigner, options);
  }

  /** Keeps a running reduction per key and emits it after every record. */
  reduce(fn: (accumulator: T, value: T) => T, options: NameOption = {}): DataStream<T> {
    const id = this.job.newId('reduce');
    const node = this.job.add({
      id,
      kind: 'reduce',
      name: options.name ?? 'reduce',
      inputs: [this.node],
      fn,
      state: [valueState<T>('reduce')] as readonly StateDescriptor<unknown>[],
    });
    return new DataStream<T>(this.job, node);
  }
}

export class WindowedStream<K extends Key, T> {
  constructor(
    private readonly job: Job,
    private readonly input: LogicalNode,
    private readonly assigner: WindowAssigner,
    private readonly options: WindowOptions<T>,
  ) {
    const a = assigner;
    // window bounds are event times: beyond MAX_EVENT_TIME a window's end (or its timer) would not be a safe integer on the wire
    const bad = (field: string, v: unknown) => new Error(`window assigner ${a.kind}: ${field} must be a positive integer of ms up to ${MAX_EVENT_TIME}, got ${String(v)}`);
    const ms = (v: number) => Number.isInteger(v) && v > 0 && v <= MAX_EVENT_TIME;
    if (a.kind === 'session' && !ms(a.gapMs)) throw bad('gapMs', a.gapMs);
    if (a.kind !== 'session' && !ms(a.sizeMs)) throw bad('sizeMs', a.sizeMs);
    if (a.kind === 'sliding' && !ms(a.slideMs)) throw bad('slideMs', a.slideMs);
    if (a.kind !== 'session' && !(Number.isInteger(a.offsetMs) && Math.abs(a.offsetMs) <= MAX_EVENT_TIME)) {
      throw new Error(`window assigner ${a.kind}: offsetMs must be an integer of ms within ±${MAX_EVENT_TIME}, got ${String(a.offsetMs)}`);
    }
    const lateness = options.allowedLatenessMs;
    if (lateness !== undefined && !(Number.isInteger(lateness) && lateness >= 0 && lateness <= MAX_EVENT_TIME)) {
      throw new Error(`window: allowedLatenessMs must be a whole number of ms from 0 to ${MAX_EVENT_TIME}, got ${String(lateness)}`);
    }
  }

  private add<O>(name: string, fn: import('./windows.js').WindowFunctionSpec, state: StateDescriptor<unknown>, result?: (key: Key, w: TimeWindow, v: unknown) => unknown): DataStream<O> {
    const id = this.job.newId('window');
    const node = this.job.add({
      id,
      kind: 'window',
      name,
      inputs: [this.input],
      assigner: this.assigner,
      allowedLatenessMs: this.options.allowedLatenessMs ?? 0,
      ...(this.options.lateOutput ? { lateTag: this.options.lateOutput.id } : {}),
      function: fn,
      ...(result ? { result } : {}),
      state: [state],
    });
    return new DataStream<O>(this.job, node);
  }

  /** Reduces each window's records incrementally; emits `{ key, window, value }` (or what `result` makes of it). */
  reduce<O = WindowResult<K, T>>(fn: (a: T, b: T) => T, options: { name?: string; result?: (key: K, window: TimeWindow, value: T) => O } = {}): DataStream<O> {
    return this.add<O>(
      options.name ?? 'window-reduce',
      { type: 'reduce', reduce: fn as (a: unknown, b: unknown) => unknown },
      valueState('windows') as StateDescriptor<unknown>,
      options.result as ((key: Key, w: TimeWindow, v: unknown) => unknown) | undefined,
    );
  }

  /** Aggregates each window's records incrementally; emits `{ key, window, value: getResult(acc) }` (or what `result` makes of it). */
  aggregate<A, R, O = WindowResult<K, R>>(
    agg: AggregateFunction<T, A, R>,
    options: { name?: string; result?: (key: K, window: TimeWindow, value: R) => O } = {},
  ): DataStream<O> {
    return this.add<O>(
      options.name ?? 'window-aggregate',
      { type: 'aggregate', aggregate: agg as AggregateFunction<unknown, unknown, unknown> },
      valueState('windows') as StateDescriptor<unknown>,
      options.result as ((key: Key, w: TimeWindow, v: unknown) => unknown) | undefined,
    );
  }

  /** Keeps every record of a window and hands them all to `fn` when it fires. */
  process<O>(fn: ProcessWindowFunction<K, T, O>, options: { name?: string } = {}): DataStream<O> {
    return this.add<O>(
      options.name ?? 'window-process',
      { type: 'process', fn: fn as unknown as ProcessWindowFunction<Key, unknown, unknown> },
      listState('windows') as unknown as StateDescriptor<unknown>,
    );
  }
}

export class ConnectedKeyedStreams<K extends Key, A, B> {
  constructor(
    private readonly job: Job,
    private readonly left: LogicalNode,
    private readonly right: LogicalNode,
  ) {}

  process<O>(fn: KeyedCoProcessFunction<K, A, B, O>, options: NameOption = {}): DataStream<O> {
    const name = options.name ?? 'co-process';
    checkStateDeclarations(`co-process "${name}"`, fn.state ?? []);
    const node = this.job.add({
      id: this.job.newId('coProcess'),
      kind: 'coProcess',
      name,
      inputs: [this.left, this.right],
      fn: fn as unknown as KeyedCoProcessFunction<Key, unknown, unknown, unknown>,
      state: (fn.state ?? []) as readonly StateDescriptor<unknown>[],
    });
    return new DataStream<O>(this.job, node);
  }
}

export class BroadcastStream<T> {
  /** phantom field that carries T */
  declare readonly __type?: T;
  constructor(
    /** @internal */ readonly job: Job,
    /** @internal */ readonly node: LogicalNode,
  ) {}
}

export class BroadcastConnectedStream<K extends Key, T, B> {
  constructor(
    private readonly job: Job,
    private readonly keyed: LogicalNode,
    private readonly rules: LogicalNode,
  ) {}

  process<O>(fn: KeyedBroadcastProcessFunction<K, T, B, O>, options: NameOption = {}): DataStream<O> {
    const name = options.name ?? 'broadcast-process';
    checkStateDeclarations(`broadcast-process "${name}"`, fn.state ?? []);
    const node = this.job.add({
      id: this.job.newId('broadcastProcess'),
      kind: 'broadcastProcess',
      name,
      inputs: [this.keyed, this.rules],
      fn: fn as unknown as KeyedBroadcastProcessFunction<Key, unknown, unknown, unknown>,
      state: (fn.state ?? []) as readonly StateDescriptor<unknown>[],
    });
    return new DataStream<O>(this.job, node);
  }
}

/** What an interval-join function learns besides the two records. */
export interface JoinContext<K extends Key> {
  readonly key: K;
  readonly leftTimestamp: number;
  readonly rightTimestamp: number;
}

export class IntervalJoined<K extends Key, L, R> {
  constructor(
    private readonly connected: ConnectedKeyedStreams<K, L, R>,
    private readonly bounds: { lowerMs: number; upperMs: number },
  ) {}

  process<O>(fn: (left: L, right: R, ctx: JoinContext<K>, out: Collector<O>) => void, options: NameOption = {}): DataStream<O> {
    const { lowerMs, upperMs } = this.bounds;
    // buffers by event time; a timer per buffered time drops it once no future record can match
    // a buffer grows by a row per record without being copied (append-buffer.ts); stored as plain arrays
    const leftBuf = mapState<number, AppendBuffer<L>>('interval-join-left', { serializer: appendBufferMapSerializer() });
    const rightBuf = mapState<number, AppendBuffer<R>>('interval-join-right', { serializer: appendBufferMapSerializer() });
    const sorted = <V>(m: Array<[number, V]>) => m.sort((a, b) => a[0] - b[0]);
    const join: KeyedCoProcessFunction<K, L, R, O> = {
      state: [leftBuf, rightBuf] as StateDescriptor<unknown>[],
      processElement1(left, ctx, out) {
        const t = ctx.timestamp;
        if (t === undefined || t < ctx.currentWatermark()) return; // late: no future partner is waiting for it
        for (const [rt, rights] of sorted(ctx.getMapState(rightBuf).entries())) {
          if (rt < t + lowerMs || rt > t + upperMs) continue;
          for (let i = 0; i < rights.n; i++) fn(left, rights.items[i]!, { key: ctx.key, leftTimestamp: t, rightTimestamp: rt }, out);
        }
        const b = ctx.getMapState(leftBuf);
        b.put(t, appended(b.get(t), left));
        ctx.timerService.registerEventTimeTimer(t + upperMs + 1);
      },
      processElement2(right, ctx, out) {
        const t = ctx.timestamp;
        if (t === undefined || t < ctx.currentWatermark()) return;
        for (const [lt, lefts] of sorted(ctx.getMapState(leftBuf).entries())) {
          if (t < lt + lowerMs || t > lt + upperMs) continue;
          for (let i = 0; i < lefts.n; i++) fn(lefts.items[i]!, right, { key: ctx.key, leftTimestamp: lt, rightTimestamp: t }, out);
        }
        const b = ctx.getMapState(rightBuf);
        b.put(t, appended(b.get(t), right));
        ctx.timerService.registerEventTimeTimer(t - lowerMs + 1);
      },
      // a record at the watermark is still on time, so a buffer goes only once the watermark is past it
      onTimer(time, ctx) {
        const l = ctx.getMapState(leftBuf);
        for (const lt of l.keys()) if (lt + upperMs < time) l.remove(lt);
        const r = ctx.getMapState(rightBuf);
        for (const rt of r.keys()) if (rt - lowerMs < time) r.remove(rt);
      },
    };
    return this.connected.process(join, { name: options.name ?? 'interval-join' });
  }
}

export class JoinBuilder<L, R> {
  constructor(
    private readonly left: DataStream<L>,
    private readonly right: DataStream<R>,
  ) {}

  where<K extends Key>(leftKey: (v: L) => K, options: { parallelism?: number } = {}) {
    return {
      equalTo: (rightKey: (v: R) => K) => ({
        /** tumbling or sliding event-time windows; pairs of each window are joined when it closes */
        window: (assigner: WindowAssigner) => {
          if (assigner.kind === 'session') throw new UsageError('window join', 'window', 'must be tumbling or sliding, not session windows');
          return {
            apply: <O>(fn: (left: L, right: R, window: TimeWindow) => O, opts: NameOption = {}): DataStream<O> => {
              const buf = mapState<string, [L[], R[]]>('window-join');
              const add = (ctx: import('./types.js').KeyedContext<K>, side: 0 | 1, v: unknown) => {
                const t = ctx.timestamp;
                if (t === undefined) throw new UsageError('window join', 'timestamp', 'is missing: window joins need event time, give the sources a `timestamp` function');
                const state = ctx.getMapState(buf);
                for (const w of assignWindows(assigner, t)) {
                  if (w.end - 1 <= ctx.currentWatermark()) continue; // the window is gone
                  const id = `${w.start}:${w.end}`;
                  const cur = state.get(id) ?? [[], []];
                  const next: [L[], R[]] = side === 0 ? [[...cur[0], v as L], cur[1]] : [cur[0], [...cur[1], v as R]];
                  state.put(id, next);
                  ctx.timerService.registerEventTimeTimer(w.end - 1);
                }
              };
              const p = this.left.keyBy(leftKey, options).connect(this.right.keyBy(rightKey, options));
              return p.process<O>(
                {
                  state: [buf] as StateDescriptor<unknown>[],
                  processElement1: (v, ctx) => add(ctx, 0, v),
                  processElement2: (v, ctx) => add(ctx, 1, v),
                  onTimer: (time, ctx, out) => {
                    const state = ctx.getMapState(buf);
                    for (const [id, [ls, rs]] of state.entries().sort(([a], [b]) => (a < b ? -1 : 1))) {
                      const [start, end] = id.split(':').map(Number) as [number, number];
                      if (end - 1 !== time) continue;
                      for (const l of ls) for (const r of rs) out.collect(fn(l, r, { start, end }));
                      state.remove(id);
                    }
                  },
                },
                { name: opts.name ?? 'window-join' },
              );
            },
          };
        },
      }),
    };
  }
}

export type { Collector };
