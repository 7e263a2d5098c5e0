/**
 * Multi-input operators — interval joins, window joins, co-process and the broadcast state pattern —
 * against pair-wise oracles over the same input, with environments losing their caches on the way.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectSink, job, mapState, TumblingEventTimeWindows, WatermarkStrategies, type KeyedBroadcastProcessFunction } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface L {
  id: string;
  k: string;
  ts: number;
}
interface R {
  id: string;
  k: string;
  ts: number;
}

const pairs = (ps: Array<{ l: string; r: string }>) => ps.map((p) => `${p.l}~${p.r}`).sort();

/** Two sources with bounded disorder (under the watermark bound, so nothing is late). */
const inputArb = fc
  .tuple(
    fc.array(fc.record({ k: fc.constantFrom('a', 'b', 'c'), jitter: fc.integer({ min: 0, max: 300 }) }), { maxLength: 40 }),
    fc.array(fc.record({ k: fc.constantFrom('a', 'b', 'c'), jitter: fc.integer({ min: 0, max: 300 }) }), { maxLength: 40 }),
  )
  .map(([ls, rs]) => ({
    lefts: ls.map((x, i) => ({ id: `l${i}`, k: x.k, ts: 1000 + i * 100 + x.jitter })),
    rights: rs.map((x, i) => ({ id: `r${i}`, k: x.k, ts: 1000 + i * 100 + x.jitter })),
  }));

async function runTwoSources(j: ReturnType<typeof job>, lefts: L[], rights: R[], seed: number) {
  const r = new MemoryJobRunner(j, { seed, environments: 2, recycleProbability: 0.25, batchSize: 7 });
  for (let i = 0; i < Math.max(lefts.length, rights.length); i += 10) {
    r.produce('left', lefts.slice(i, i + 10));
    r.produce('right', rights.slice(i, i + 10));
    await r.runUntilIdle();
    await r.checkpoint();
  }
  r.endOfInput();
  await r.drain();
  return r;
}

describe('joins', () => {
  it('interval join emits exactly the pairs with the same key and right time in [left + lower, left + upper]', async () => {
    await fc.assert(
      fc.asyncProperty(inputArb, fc.integer({ min: -500, max: 0 }), fc.integer({ min: 0, max: 500 }), fc.integer({ min: 1, max: 1e6 }), async ({ lefts, rights }, lower, upper, seed) => {
        const j = job('ij', { maxParallelism: 8 });
        const wm = WatermarkStrategies.boundedOutOfOrderness(1000);
        const l = j.source<L>({ name: 'left', shards: 2, timestamp: (e) => e.ts, watermarks: wm }).keyBy((e) => e.k, { parallelism: 2 });
        const rr = j.source<R>({ name: 'right', shards: 1, timestamp: (e) => e.ts, watermarks: wm }).keyBy((e) => e.k, { parallelism: 2 });
        l.intervalJoin(rr, { lowerMs: lower, upperMs: upper })
          .process<{ l: string; r: string }>((a, b, _ctx, out) => out.collect({ l: a.id, r: b.id }))
          .sinkTo(collectSink('pairs'));
        const r = await runTwoSources(j, lefts, rights, seed);
        const want = lefts.flatMap((a) => rights.filter((b) => b.k === a.k && b.ts >= a.ts + lower && b.ts <= a.ts + upper).map((b) => ({ l: a.id, r: b.id })));
        expect(pairs(r.published('pairs'))).toEqual(pairs(want));
      }),
      { numRuns: 20, seed: 99 },
    );
  });

  it('window join pairs records of the same key and tumbling window', async () => {
    await fc.assert(
      fc.asyncProperty(inputArb, fc.integer({ min: 1, max: 1e6 }), async ({ lefts, rights }, seed) => {
        const j = job('wj', { maxParallelism: 8 });
        const wm = WatermarkStrategies.boundedOutOfOrderness(1000);
        const a = j.source<L>({ name: 'left', shards: 1, timestamp: (e) => e.ts, watermarks: wm });
        const b = j.source<R>({ name: 'right', shards: 2, timestamp: (e) => e.ts, watermarks: wm });
        a.join(b)
          .where((x) => x.k, { parallelism: 2 })
          .equalTo((y) => y.k)
          .window(TumblingEventTimeWindows.of(700))
          .apply((x, y) => ({ l: x.id, r: y.id }))
          .sinkTo(collectSink('pairs'));
        const r = await runTwoSources(j, lefts, rights, seed);
        const w = (t: number) => Math.floor(t / 700);
        const want = lefts.flatMap((x) => rights.filter((y) => y.k === x.k && w(y.ts) === w(x.ts)).map((y) => ({ l: x.id, r: y.id })));
        expect(pairs(r.published('pairs'))).toEqual(pairs(want));
      }),
      { numRuns: 15, seed: 7 },
    );
  });

  it('the broadcast state pattern: rules reach every instance, survive restores, and are applied to keyed records', async () => {
    interface Txn {
      account: string;
      type: string;
      amount: number;
    }
    interface Rule {
      type: string;
      limit: number;
    }
    const limits = mapState<string, number>('limits');
    const check: KeyedBroadcastProcessFunction<string, Txn, Rule, { account: string; amount: number }> = {
      processElement(t, ctx, out) {
        const limit = ctx.getBroadcastState(limits).get(t.type);
        if (limit !== undefined && t.amount > limit) out.collect({ account: t.account, amount: t.amount });
      },
      processBroadcastElement(rule, ctx) {
        ctx.getBroadcastState(limits).put(rule.type, rule.limit);
      },
    };
    const j = job('fraud-mini', { maxParallelism: 16 });
    const rules = j.source<Rule>({ name: 'rules', shards: 1 }).broadcast(limits as never);
    j.source<Txn>({ name: 'txns', shards: 2 })
      .keyBy((t) => t.account, { parallelism: 3 })
      .connect(rules)
      .process(check)
      .sinkTo(collectSink('alerts'));
    const r = new MemoryJobRunner(j, { seed: 5, environments: 2, recycleProbability: 0.3, batchSize: 5 });
    r.produce('rules', [
      { type: 'card', limit: 100 },
      { type: 'wire', limit: 1000 },
    ]);
    await r.runUntilIdle();
    await r.checkpoint();
    const txns: Txn[] = Array.from({ length: 60 }, (_, i) => ({ account: `acc${i % 7}`, type: i % 3 ? 'card' : 'wire', amount: (i * 37) % 1500 }));
    for (let i = 0; i < txns.length; i += 12) {
      r.produce('txns', txns.slice(i, i + 12));
      await r.runUntilIdle();
      await r.checkpoint();
    }
    await r.drain();
    const want = txns.filter((t) => t.amount > (t.type === 'card' ? 100 : 1000)).map((t) => `${t.account}:${t.amount}`).sort();
    expect(r.published<{ account: string; amount: number }>('alerts').map((a) => `${a.account}:${a.amount}`).sort()).toEqual(want);
  });

  it('rejects connecting an unkeyed stream at plan time, naming the operator', () => {
    const j = job('bad', {});
    const a = j.source<L>({ name: 'a' });
    const b = j.source<L>({ name: 'b' });
    // a broadcast stream in the keyed position
    const rules = b.broadcast();
    a.keyBy((x) => x.k)
      .connect(rules)
      .process({ processElement: () => undefined, processBroadcastElement: () => undefined })
      .sinkTo(collectSink('x'));
    expect(() => new MemoryJobRunner(j)).not.toThrow();
    const j2 = job('bad2', {});
    const c = j2.source<L>({ name: 'c' });
    const d = j2.source<L>({ name: 'd' });
    expect(() => {
      c.union(d).sinkTo(collectSink('y'));
      new MemoryJobRunner(j2);
    }).toThrow(/op\d+-union.*can only merge streams of the same stage/);
  });
});
