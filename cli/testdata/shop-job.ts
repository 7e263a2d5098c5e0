// A job as a user writes it in a project of their own: two sources, event-time windows, and a
// sink of each kind (DynamoDB, S3 files, Kinesis). Used by cli/package.test.ts against the packed package.
import { dynamoUpsertSink, job, kinesisSink, s3FileSink, TumblingEventTimeWindows, WatermarkStrategies, type AggregateFunction } from 'sluice';

export interface Order {
  readonly user: string;
  readonly amount: number;
  readonly ts: number;
}
export interface Click {
  readonly user: string;
  readonly page: string;
  readonly ts: number;
}

export const WINDOW_MS = 5_000;

function order(raw: unknown): Order {
  const o = raw as Partial<Order>;
  if (typeof o.user !== 'string' || typeof o.amount !== 'number' || typeof o.ts !== 'number') throw new Error('an order needs a user, an amount and a ts');
  return o as Order;
}
function click(raw: unknown): Click {
  const c = raw as Partial<Click>;
  if (typeof c.user !== 'string' || typeof c.page !== 'string' || typeof c.ts !== 'number') throw new Error('a click needs a user, a page and a ts');
  return c as Click;
}

const count: AggregateFunction<Click, number, number> = { createAccumulator: () => 0, add: (_v, n) => n + 1, getResult: (n) => n, merge: (a, b) => a + b };
const total: AggregateFunction<Order, number, number> = { createAccumulator: () => 0, add: (o, n) => n + o.amount, getResult: (n) => n, merge: (a, b) => a + b };

const shop = job('shop', { checkpoint: { intervalMs: 1_000 } });
const watermarks = WatermarkStrategies.boundedOutOfOrderness(2_000);
const orders = shop.source<Order>({ name: 'a', shards: 2, parse: order, timestamp: (o) => o.ts, watermarks });
const clicks = shop.source<Click>({ name: 'b', shards: 2, parse: click, timestamp: (c) => c.ts, watermarks });

orders
  .keyBy((o) => o.user)
  .window(TumblingEventTimeWindows.of(WINDOW_MS))
  .aggregate(total, { name: 'revenue', result: (user, w, sum) => ({ user: String(user), start: w.start, revenue: sum }) })
  .sinkTo(dynamoUpsertSink({ name: 'revenue', key: (r) => `${r.user}@${r.start}` }));

clicks
  .keyBy((c) => c.page)
  .window(TumblingEventTimeWindows.of(WINDOW_MS))
  .aggregate(count, { name: 'page-views', result: (page, w, n) => ({ page: String(page), start: w.start, views: n }) })
  .sinkTo(s3FileSink({ name: 'page-views' }));

// each order with the clicks of its user in the same window: a window join of the two sources
orders
  .join(clicks)
  .where((o) => o.user)
  .equalTo((c) => c.user)
  .window(TumblingEventTimeWindows.of(WINDOW_MS))
  .apply((o, c, w) => ({ user: o.user, start: w.start, amount: o.amount, page: c.page }), { name: 'orders-with-clicks' })
  .sinkTo(kinesisSink({ name: 'orders-with-clicks' }));

export default shop;
