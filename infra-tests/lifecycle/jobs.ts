/**
 * Small jobs for the checkpoint-lifecycle tests: one with every transactional sink, one with
 * keyed state and event-time windows (timers) whose keyed stage's parallelism is a parameter.
 */
import {
  collectSink,
  dynamoUpsertSink,
  job,
  kinesisSink,
  s3FileSink,
  TumblingEventTimeWindows,
  valueState,
  WatermarkStrategies,
  type CheckpointOptions,
  type Job,
  type KeyedProcessFunction,
} from '../../shared/api/index.js';

export interface Ev {
  readonly user: string;
  readonly ts: number;
}

export interface UserCount {
  readonly user: string;
  readonly count: number;
}

export interface WindowCount {
  readonly user: string;
  readonly start: number;
  readonly count: number;
}

const count = valueState<number>('count');

const runningCount: KeyedProcessFunction<string, Ev, UserCount> = {
  state: [count],
  processElement(e, ctx, out) {
    const n = (ctx.getState(count).value() ?? 0) + 1;
    ctx.getState(count).update(n);
    out.collect({ user: e.user, count: n });
  },
};

/** source → keyBy(user) → running count → a file sink, a Kinesis sink and a collect sink (the same values). */
export function txSinksJob(): Job {
  const j = job('txsinks', { maxParallelism: 16, checkpoint: { intervalMs: 300, timeoutMs: 20_000, retained: 2 } });
  const counts = j
    .source<Ev>({ name: 'events', shards: 2 })
    .keyBy((e) => e.user, { parallelism: 2 })
    .process(runningCount, { name: 'running-count' });
  counts.sinkTo(s3FileSink<UserCount>({ name: 'files' }));
  counts.sinkTo(kinesisSink<UserCount>({ name: 'stream' }));
  counts.sinkTo(collectSink<UserCount>('collected'));
  return j;
}

/**
 * source → keyBy(user) with `parallelism` → tumbling 1 s event-time windows counting records →
 * collect sink; with `withTotals`, also the running count per user into an upsert sink (a second keyed
 * stage with the same parallelism).
 */
export function windowJob(parallelism: number, withTotals = true, checkpoint: CheckpointOptions = {}): Job {
  const j = job('windows', { maxParallelism: 16, checkpoint: { intervalMs: 300, timeoutMs: 20_000, retained: 2, ...checkpoint } });
  const events = j.source<Ev>({ name: 'events', shards: 2, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) });
  events
    .keyBy((e) => e.user, { parallelism })
    .window(TumblingEventTimeWindows.of(1000))
    .aggregate<number, number, WindowCount>(
      { createAccumulator: () => 0, add: (_e, acc) => acc + 1, getResult: (acc) => acc, merge: (a, b) => a + b },
      { name: 'count-per-window', result: (user, w, c) => ({ user, start: w.start, count: c }) },
    )
    .sinkTo(collectSink<WindowCount>('windows'));
  if (!withTotals) return j;
  events
    .keyBy((e) => e.user, { parallelism })
    .process(runningCount, { name: 'running-count' })
    .sinkTo(dynamoUpsertSink<UserCount>({ name: 'totals', key: (c) => c.user }));
  return j;
}
