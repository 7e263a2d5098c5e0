/**
 * The keyed state types, TTL, timers and large state, through whole jobs on the in-memory twins
 * with caches lost between batches (so every value also makes the round trip through DynamoDB rows).
 */
import { describe, expect, it } from 'vitest';
import {
  aggregatingState,
  collectSink,
  job,
  listState,
  mapState,
  reducingState,
  valueState,
  type KeyedProcessFunction,
} from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface Ev {
  k: string;
  v: number;
  ts: number;
}

const lossy = { seed: 11, environments: 3, recycleProbability: 0.5, batchSize: 3 };

describe('keyed state types', () => {
  it('list, map, reducing and aggregating state keep their values across restores', async () => {
    const list = listState<number>('list');
    const map = mapState<string, number>('map');
    const sum = reducingState<number>('sum', (a, b) => a + b);
    const avg = aggregatingState<number, [number, number], number>('avg', {
      createAccumulator: () => [0, 0],
      add: (v, [s, n]) => [s + v, n + 1],
      getResult: ([s, n]) => s / n,
    });
    const fn: KeyedProcessFunction<string, Ev, unknown> = {
      state: [list, map, sum, avg],
      processElement(e, ctx, out) {
        ctx.getListState(list).add(e.v);
        const m = ctx.getMapState(map);
        m.put(`v${e.v % 3}`, (m.get(`v${e.v % 3}`) ?? 0) + 1);
        ctx.getReducingState(sum).add(e.v);
        ctx.getAggregatingState(avg).add(e.v);
        out.collect({ k: ctx.key, list: ctx.getListState(list).get(), map: Object.fromEntries(m.entries()), sum: ctx.getReducingState(sum).get(), avg: ctx.getAggregatingState(avg).get() });
      },
    };
    const j = job('types', { maxParallelism: 8 });
    j.source<Ev>({ name: 'ev', shards: 2 }).keyBy((e) => e.k, { parallelism: 2 }).process(fn).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, lossy);
    const evs = Array.from({ length: 40 }, (_, i) => ({ k: `k${i % 3}`, v: i, ts: i }));
    for (let i = 0; i < evs.length; i += 8) {
      r.produce('ev', evs.slice(i, i + 8));
      await r.runUntilIdle();
      await r.checkpoint();
    }
    await r.drain();
    const last = new Map<string, { list: number[]; sum: number; avg: number; map: Record<string, number> }>();
    for (const o of r.published<{ k: string; list: number[]; sum: number; avg: number; map: Record<string, number> }>('out')) last.set(o.k, o);
    for (const k of ['k0', 'k1', 'k2']) {
      const mine = evs.filter((e) => e.k === k).map((e) => e.v);
      const got = last.get(k)!;
      expect([...got.list].sort((a, b) => a - b)).toEqual(mine);
      expect(got.sum).toBe(mine.reduce((a, b) => a + b, 0));
      expect(got.avg).toBeCloseTo(mine.reduce((a, b) => a + b, 0) / mine.length);
      const counts: Record<string, number> = {};
      for (const v of mine) counts[`v${v % 3}`] = (counts[`v${v % 3}`] ?? 0) + 1;
      expect(got.map).toEqual(counts);
    }
  });

  it('state with a TTL reads as absent once processing time (the coordinator ticks) moved past it', async () => {
    const seen = valueState<number>('seen', { ttl: { ttlMs: 2500 } });
    const fn: KeyedProcessFunction<string, Ev, { k: string; fresh: boolean }> = {
      state: [seen],
      processElement(e, ctx, out) {
        const s = ctx.getState(seen);
        out.collect({ k: e.k, fresh: s.value() === undefined });
        s.update(1);
      },
    };
    const j = job('ttl', { maxParallelism: 4 });
    j.source<Ev>({ name: 'ev', shards: 1 }).keyBy((e) => e.k, { parallelism: 1 }).process(fn).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, lossy); // each checkpoint advances the coordinator clock by 1 s
    r.produce('ev', [{ k: 'a', v: 1, ts: 1 }]);
    await r.drain(); // t = 1 s
    r.produce('ev', [{ k: 'a', v: 1, ts: 2 }]);
    await r.drain(); // t = 2 s: still fresh in state
    for (let i = 0; i < 3; i++) await r.checkpoint(); // t = 5 s
    r.produce('ev', [{ k: 'a', v: 1, ts: 3 }]);
    await r.drain();
    expect(r.published<{ fresh: boolean }>('out').map((o) => o.fresh)).toEqual([true, false, true]);
  });

  it('event-time timers are checkpointed and fire once, after restores', async () => {
    const count = valueState<number>('count');
    const fn: KeyedProcessFunction<string, Ev, { k: string; at: number; count: number }> = {
      state: [count],
      processElement(e, ctx) {
        ctx.getState(count).update((ctx.getState(count).value() ?? 0) + 1);
        ctx.timerService.registerEventTimeTimer(Math.floor(e.ts / 1000) * 1000 + 999);
      },
      onTimer(t, ctx, out) {
        out.collect({ k: String(ctx.key), at: t, count: ctx.getState(count).value() ?? 0 });
        ctx.getState(count).clear();
      },
    };
    const j = job('timers', { maxParallelism: 8 });
    j.source<Ev>({ name: 'ev', shards: 2, timestamp: (e) => e.ts }).keyBy((e) => e.k, { parallelism: 2 }).process(fn).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, lossy);
    const evs = Array.from({ length: 30 }, (_, i) => ({ k: `k${i % 2}`, v: 1, ts: i * 200 }));
    for (let i = 0; i < evs.length; i += 6) {
      r.produce('ev', evs.slice(i, i + 6));
      await r.runUntilIdle();
      await r.checkpoint();
    }
    r.endOfInput();
    await r.drain();
    const fired = r.published<{ k: string; at: number; count: number }>('out');
    // every registered timer fired exactly once...
    const wantTimers = [...new Set(evs.map((e) => `${e.k}@${Math.floor(e.ts / 1000) * 1000 + 999}`))].sort();
    expect(fired.map((f) => `${f.k}@${f.at}`).sort()).toEqual(wantTimers);
    // ...and between them they saw every record once (each firing clears the count)
    for (const k of ['k0', 'k1']) {
      expect(fired.filter((f) => f.k === k).reduce((a, f) => a + f.count, 0)).toBe(evs.filter((e) => e.k === k).length);
    }
  });

  it('a key whose state outgrows a DynamoDB item spills to the blob store and reads back whole', async () => {
    const blob = listState<string>('blob');
    const fn: KeyedProcessFunction<string, Ev, { k: string; n: number; bytes: number }> = {
      state: [blob],
      processElement(e, ctx, out) {
        const l = ctx.getListState(blob);
        l.add('x'.repeat(100_000));
        const all = l.get();
        out.collect({ k: e.k, n: all.length, bytes: all.reduce((a, s) => a + s.length, 0) });
      },
    };
    const j = job('big', { maxParallelism: 4 });
    j.source<Ev>({ name: 'ev', shards: 1 }).keyBy((e) => e.k, { parallelism: 1 }).process(fn).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { seed: 2, environments: 2, recycleProbability: 1, batchSize: 1 });
    for (let i = 0; i < 6; i++) {
      r.produce('ev', [{ k: 'big', v: i, ts: i }]);
      await r.drain(); // every batch restores: the 600 KB list comes back from the blob store
    }
    const out = r.published<{ n: number; bytes: number }>('out');
    expect(out.map((o) => o.n)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(r.blobs.objects.size).toBeGreaterThan(0);
  });
});
