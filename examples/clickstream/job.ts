/**
 * Clicks per user and page type, from a clickstream.
 *
 * Producers put JSON click events on the `clicks` stream; stage s0 validates and enriches them and
 * partitions by (user, page type); stage s1 keeps a running count per key and upserts it into the
 * `clicks-per-user-page` DynamoDB table.
 */
import { dynamoUpsertSink, job, valueState } from 'sluice';
import type { KeyedProcessFunction } from 'sluice';

export interface Click {
  readonly userId: string;
  readonly url: string;
  /** event time, ms since the epoch */
  readonly ts: number;
}

export interface PageTypeCount {
  readonly userId: string;
  readonly pageType: string;
  readonly clicks: number;
  readonly lastClickTs: number;
}

/** Page type from the URL's first path segment: /product/42 → product, / → home. */
export function pageTypeOf(url: string): string {
  const path = url.replace(/^https?:\/\/[^/]+/, '').split(/[?#]/)[0] ?? '';
  const first = path.split('/').filter(Boolean)[0];
  return first ? first.toLowerCase() : 'home';
}

function parseClick(raw: unknown): Click {
  const r = raw as Partial<Click> | null;
  if (!r || typeof r.userId !== 'string' || r.userId === '') throw new Error('userId must be a non-empty string');
  if (typeof r.url !== 'string') throw new Error('url must be a string');
  if (typeof r.ts !== 'number' || !Number.isFinite(r.ts)) throw new Error('ts must be a number (ms since epoch)');
  return { userId: r.userId, url: r.url, ts: r.ts };
}

const count = valueState<{ clicks: number; lastClickTs: number }>('count');

const countClicks: KeyedProcessFunction<string, Click & { pageType: string }, PageTypeCount> = {
  state: [count],
  processElement(click, ctx, out) {
    const prev = ctx.getState(count).value() ?? { clicks: 0, lastClickTs: 0 };
    const next = { clicks: prev.clicks + 1, lastClickTs: Math.max(prev.lastClickTs, click.ts) };
    ctx.getState(count).update(next);
    out.collect({ userId: click.userId, pageType: click.pageType, ...next });
  },
};

const clickstream = job('clickstream', {
  maxParallelism: 64,
  checkpoint: { intervalMs: 2_000, timeoutMs: 30_000 },
  poisonPolicy: 'dead-letter',
});

clickstream
  .source<Click>({ name: 'clicks', shards: 2, format: 'json', parse: parseClick, timestamp: (c) => c.ts })
  .filter((c) => !c.url.startsWith('/health'), { name: 'drop-health-checks' })
  .map((c) => ({ ...c, pageType: pageTypeOf(c.url) }), { name: 'page-type' })
  .keyBy((c) => `${c.userId}|${c.pageType}`, { parallelism: 2 })
  .process(countClicks, { name: 'count-clicks' })
  .sinkTo(
    dynamoUpsertSink<PageTypeCount>({
      name: 'clicks-per-user-page',
      key: (r) => `${r.userId}|${r.pageType}`,
    }),
  );

export default clickstream;
