/**
 * Top-N per tumbling window: the three most viewed products of every minute. Views are counted per
 * (product, minute) in parallel; the counts of a minute then meet in one place, where the top three
 * are picked once the watermark passes the minute.
 */
import { dynamoUpsertSink, job, TumblingEventTimeWindows, WatermarkStrategies } from 'sluice';

export interface View {
  readonly product: string;
  readonly ts: number;
}

export interface TopN {
  readonly minute: number;
  readonly top: Array<{ product: string; views: number }>;
}

export const N = 3;
const MINUTE = 60_000;

const topN = job('top-n', { maxParallelism: 64, checkpoint: { intervalMs: 5_000 } });

const top = topN
  .source<View>({ name: 'views', shards: 2, timestamp: (v) => v.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(2_000) })
  .keyBy((v) => v.product, { parallelism: 2 })
  .window(TumblingEventTimeWindows.of(MINUTE))
  .aggregate(
    { createAccumulator: () => 0, add: (_v: View, n: number) => n + 1, getResult: (n: number) => n, merge: (a: number, b: number) => a + b },
    { name: 'count-views', result: (product, w, views) => ({ product: String(product), minute: w.start, views }) },
  )
  .keyBy((c) => c.minute, { parallelism: 1 })
  .window(TumblingEventTimeWindows.of(MINUTE))
  .process<TopN>(
    {
      process(minute, _w, counts, out) {
        const sorted = [...counts].sort((a, b) => b.views - a.views || a.product.localeCompare(b.product));
        out.collect({ minute: Number(minute), top: sorted.slice(0, N).map((c) => ({ product: c.product, views: c.views })) });
      },
    },
    { name: 'top-n' },
  );
top.sinkTo(dynamoUpsertSink<TopN>({ name: 'top-products', key: (t) => String(t.minute) }));

export default topN;
