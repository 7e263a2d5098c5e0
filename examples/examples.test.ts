/**
 * The examples as users would test their own jobs: in-process on the in-memory twins, with caches
 * lost between batches, each result compared with a plain computation over the same input.
 */
import { describe, expect, it } from 'vitest';
import { MemoryJobRunner } from 'sluice/testing';
import fraud, { type Alert, type Rule, type Txn } from './fraud-detection/job.js';
import sessions, { SESSION_GAP_MS, type Click, type Session } from './sessionization/job.js';
import topN, { N, type TopN, type View } from './top-n/job.js';

function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 4294967296);
}

async function feed<T>(r: MemoryJobRunner, source: string, records: T[], every = 25, partitionKey?: (r: T) => string) {
  for (let i = 0; i < records.length; i += every) {
    r.produce(source, records.slice(i, i + every), partitionKey ? { partitionKey: partitionKey as (r: unknown) => string } : {});
    await r.runUntilIdle();
    await r.checkpoint();
  }
  r.endOfInput();
  await r.drain();
}

const lossy = { seed: 3, environments: 2, recycleProbability: 0.3, batchSize: 10 };

describe('examples', () => {
  it('sessionization: sessions split where a user paused longer than the gap', async () => {
    const rnd = rng(1);
    const clicks: Click[] = [];
    const t0 = Date.UTC(2026, 0, 1);
    for (const user of ['ann', 'bob', 'cid']) {
      let t = t0 + Math.floor(rnd() * 1000);
      for (let i = 0; i < 40; i++) {
        t += rnd() < 0.15 ? SESSION_GAP_MS + Math.floor(rnd() * 3_600_000) : Math.floor(rnd() * 600_000);
        clicks.push({ userId: user, url: `/p/${Math.floor(rnd() * 5)}`, ts: t });
      }
    }
    const inOrder = [...clicks].sort((a, b) => a.ts - b.ts);
    const r = new MemoryJobRunner(sessions, lossy);
    await feed(r, 'clicks', inOrder);
    const want: string[] = [];
    for (const user of ['ann', 'bob', 'cid']) {
      const mine = inOrder.filter((c) => c.userId === user);
      let start = mine[0]!;
      let prev = mine[0]!;
      let n = 1;
      for (const c of mine.slice(1)) {
        if (c.ts - prev.ts >= SESSION_GAP_MS) {
          want.push(`${user}|${start.ts}|${prev.ts}|${n}`);
          start = c;
          n = 0;
        }
        prev = c;
        n++;
      }
      want.push(`${user}|${start.ts}|${prev.ts}|${n}`);
    }
    const got = [...r.upserts('sessions').values()].map((s) => s as unknown as Session).map((s) => `${s.userId}|${s.start}|${s.end}|${s.clicks}`);
    expect(got.sort()).toEqual(want.sort());
  });

  it('fraud detection: alerts follow the broadcast rules exactly', async () => {
    const rnd = rng(2);
    const ruleList: Rule[] = [
      { category: 'grocery', maxAmount: 300, maxPerMinute: 3 },
      { category: 'travel', maxAmount: 2000, maxPerMinute: 2 },
    ];
    const txns: Txn[] = Array.from({ length: 150 }, (_, i) => ({
      id: `t${i}`,
      account: `acc${Math.floor(rnd() * 6)}`,
      category: rnd() < 0.6 ? 'grocery' : 'travel',
      amount: Math.floor(rnd() * 2500),
      ts: 1_000_000 + i * 5_000,
    }));
    const r = new MemoryJobRunner(fraud, lossy);
    r.produce('rules', ruleList);
    await r.runUntilIdle();
    await r.checkpoint();
    // like a real producer, transactions of an account share a partition key: they stay in order
    await feed(r, 'transactions', txns, 25, (t) => t.account);
    const want: string[] = [];
    const seen = new Map<string, number[]>();
    for (const t of txns) {
      const rule = ruleList.find((x) => x.category === t.category)!;
      if (t.amount > rule.maxAmount) want.push(`${t.id}|amount`);
      const recent = [...(seen.get(t.account) ?? []).filter((ts) => ts > t.ts - 60_000), t.ts];
      seen.set(t.account, recent);
      if (recent.length > rule.maxPerMinute) want.push(`${t.id}|burst`);
    }
    const got = [...r.upserts('alerts').values()].map((a) => a as unknown as Alert).map((a) => `${a.txn}|${a.rule}`);
    expect(got.sort()).toEqual(want.sort());
  });

  it('top-N: the most viewed products of every minute', async () => {
    const rnd = rng(3);
    const views: View[] = Array.from({ length: 400 }, (_, i) => ({ product: `p${Math.floor(rnd() * rnd() * 10)}`, ts: 60_000 * 100 + i * 900 + Math.floor(rnd() * 1500) }));
    const r = new MemoryJobRunner(topN, lossy);
    await feed(r, 'views', views, 40);
    const perMinute = new Map<number, Map<string, number>>();
    for (const v of views) {
      const m = Math.floor(v.ts / 60_000) * 60_000;
      const c = perMinute.get(m) ?? new Map<string, number>();
      c.set(v.product, (c.get(v.product) ?? 0) + 1);
      perMinute.set(m, c);
    }
    const got = new Map([...r.upserts('top-products').values()].map((t) => t as unknown as TopN).map((t) => [t.minute, t.top]));
    expect([...got.keys()].sort()).toEqual([...perMinute.keys()].sort());
    for (const [minute, counts] of perMinute) {
      const want = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, N).map(([product, views]) => ({ product, views }));
      expect(got.get(minute), String(minute)).toEqual(want);
    }
  });
});
