/**
 * The jobs the benchmark runs. Events are `{ k, v, ts }`: a key (user id), a value and an event
 * time; stage s0 parses the JSON and keys the stream; stage s1 holds the keyed state.
 */
import { collectSink, job, TumblingEventTimeWindows, valueState, WatermarkStrategies, type Job, type KeyedProcessFunction } from '../shared/api/index.js';
import { mulberry32 } from '../shared/runtime/random.js';

export interface Ev {
  readonly k: string;
  readonly v: number;
  readonly ts: number;
}

export const WINDOW_MS = 10_000;

export interface BenchJobOptions {
  readonly maxParallelism?: number;
  readonly sourceShards?: number;
  readonly parallelism?: number;
  readonly checkpointIntervalMs?: number;
  /** the plan's checkpoint.materializeEvery (runtime/changelog.ts); absent: its default */
  readonly materializeEvery?: number;
}

const count = valueState<number>('count');

/** Keyed count: one ValueState per key, nothing emitted per record. */
const countFn: KeyedProcessFunction<string, Ev, never> = {
  state: [count],
  processElement(_e, ctx) {
    const s = ctx.getState(count);
    s.update((s.value() ?? 0) + 1);
  },
};

export function keyedCountJob(o: BenchJobOptions = {}): Job {
  const checkpoint = { intervalMs: o.checkpointIntervalMs ?? 10_000, ...(o.materializeEvery ? { materializeEvery: o.materializeEvery } : {}) };
  const j = job('bench-count', { maxParallelism: o.maxParallelism ?? 128, checkpoint });
  j.source<Ev>({ name: 'events', shards: o.sourceShards ?? 1, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
    .keyBy((e) => e.k, { parallelism: o.parallelism ?? 1 })
    .process(countFn, { name: 'count' })
    .sinkTo(collectSink('counts'));
  return j;
}

/** Tumbling event-time window of 10 s per key: count and sum, emitted when the watermark passes. */
export function windowJob(o: BenchJobOptions = {}): Job {
  const j = job('bench-window', { maxParallelism: o.maxParallelism ?? 128, checkpoint: { intervalMs: o.checkpointIntervalMs ?? 10_000 } });
  windowSums(j, o).sinkTo(collectSink('windows'));
  return j;
}

/** The window job's stream: events keyed by user, 10 s tumbling windows of count and sum. */
function windowSums(j: Job, o: BenchJobOptions) {
  return j
    .source<Ev>({ name: 'events', shards: o.sourceShards ?? 1, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
    .keyBy((e) => e.k, { parallelism: o.parallelism ?? 1 })
    .window(TumblingEventTimeWindows.of(WINDOW_MS))
    .aggregate(
      {
        createAccumulator: () => ({ n: 0, sum: 0 }),
        add: (e: Ev, a: { n: number; sum: number }) => ({ n: a.n + 1, sum: a.sum + e.v }),
        getResult: (a: { n: number; sum: number }) => a,
      },
      { name: 'window-sum', result: (key, w, a) => ({ k: key, start: w.start, n: a.n, sum: a.sum }) },
    );
}

/** Deterministic events: `keys` users drawn by a small PRNG, event time 1 ms apart. */
export function makeEvents(count: number, keys: number, seed = 7, start = Date.UTC(2026, 0, 1)): Ev[] {
  const rnd = mulberry32(seed);
  const out: Ev[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const r = rnd();
    out[i] = { k: `user-${Math.floor(r * keys)}`, v: 1 + (i % 7), ts: start + i };
  }
  return out;
}

export interface TimedEv extends Ev {
  readonly id: number;
}

/** End to end: counts per key and emits every update (with the event's id and send time) to a collect sink. */
export function e2eJob(): Job {
  const n = valueState<number>('n');
  const fn: KeyedProcessFunction<string, TimedEv, { id: number; k: string; n: number; ts: number }> = {
    state: [n],
    processElement(e, ctx, out) {
      const s = ctx.getState(n);
      const next = (s.value() ?? 0) + 1;
      s.update(next);
      out.collect({ id: e.id, k: e.k, n: next, ts: e.ts });
    },
  };
  const j = job('bench-e2e', { maxParallelism: 64, checkpoint: { intervalMs: 1_000, timeoutMs: 30_000 } });
  j.source<TimedEv>({ name: 'events', shards: 2, timestamp: (e) => e.ts })
    .keyBy((e) => e.k, { parallelism: 2 })
    .process(fn, { name: 'count' })
    .sinkTo(collectSink('out'));
  return j;
}

/**
 * Keyed count that emits every update (`{ k, n }`) to a next stage (a rebalance: a Kinesis stream
 * between the keyed stage and the sink's stage), as a job that feeds anything downstream does.
 */
export function keyedCountEmitJob(o: BenchJobOptions = {}): Job {
  const n = valueState<number>('count');
  const fn: KeyedProcessFunction<string, Ev, { k: string; n: number }> = {
    state: [n],
    processElement(e, ctx, out) {
      const s = ctx.getState(n);
      const next = (s.value() ?? 0) + 1;
      s.update(next);
      out.collect({ k: e.k, n: next });
    },
  };
  const j = job('bench-count-emit', { maxParallelism: o.maxParallelism ?? 128, checkpoint: { intervalMs: o.checkpointIntervalMs ?? 10_000 } });
  j.source<Ev>({ name: 'events', shards: o.sourceShards ?? 1, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
    .keyBy((e) => e.k, { parallelism: o.parallelism ?? 1 })
    .process(fn, { name: 'count' })
    .rebalance({ parallelism: 1 })
    .sinkTo(collectSink('counts'));
  return j;
}

/** The tumbling window job, its results sent to a next stage (a rebalance) instead of a sink in the same stage. */
export function windowEmitJob(o: BenchJobOptions = {}): Job {
  const j = job('bench-window-emit', { maxParallelism: o.maxParallelism ?? 128, checkpoint: { intervalMs: o.checkpointIntervalMs ?? 10_000 } });
  windowSums(j, o).rebalance({ parallelism: 1 }).sinkTo(collectSink('windows'));
  return j;
}

/** How events spread over keys. */
export type KeyDistribution =
  /** every key equally likely */
  | { readonly kind: 'uniform'; readonly keys: number }
  /** `share` of the events on the first `hot` keys, the rest uniform over all `keys` */
  | { readonly kind: 'hot'; readonly keys: number; readonly hot: number; readonly share: number }
  /** Zipf with exponent `s` over `keys` ranks (a long tail of keys seen once or twice) */
  | { readonly kind: 'zipf'; readonly keys: number; readonly s: number };

/** Deterministic events whose keys follow `dist`, event time 1 ms apart. */
export function makeEventsOf(count: number, dist: KeyDistribution, seed = 7, start = Date.UTC(2026, 0, 1)): Ev[] {
  const rnd = mulberry32(seed);
  let pick: () => number;
  if (dist.kind === 'uniform') pick = () => Math.floor(rnd() * dist.keys);
  else if (dist.kind === 'hot') pick = () => (rnd() < dist.share ? Math.floor(rnd() * dist.hot) : Math.floor(rnd() * dist.keys));
  else {
    const cdf = new Float64Array(dist.keys);
    let acc = 0;
    for (let i = 0; i < dist.keys; i++) cdf[i] = acc += 1 / Math.pow(i + 1, dist.s);
    pick = () => {
      const x = rnd() * acc;
      let lo = 0;
      let hi = dist.keys - 1;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (cdf[mid]! < x) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    };
  }
  const out: Ev[] = new Array(count);
  for (let i = 0; i < count; i++) out[i] = { k: `user-${pick()}`, v: 1 + (i % 7), ts: start + i };
  return out;
}
