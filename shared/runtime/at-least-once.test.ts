/**
 * `mode: 'at-least-once'`: barriers are tracked but not aligned — nothing is held back, so outputs are
 * never delayed by a slow channel, and a restore may apply some records twice. It must never lose one.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, valueState, type KeyedProcessFunction } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

function counting(mode: 'exactly-once' | 'at-least-once') {
  const n = valueState<number>('n');
  const fn: KeyedProcessFunction<string, { id: string; k: string }, { id: string; k: string; n: number }> = {
    state: [n],
    processElement(e, ctx, out) {
      const next = (ctx.getState(n).value() ?? 0) + 1;
      ctx.getState(n).update(next);
      out.collect({ id: e.id, k: e.k, n: next });
    },
  };
  const j = job(`alo-${mode}`, { maxParallelism: 8, mode });
  j.source<{ id: string; k: string }>({ name: 'in', shards: 3 }).keyBy((e) => e.k, { parallelism: 2 }).process(fn).sinkTo(collectSink('out'));
  return j;
}

const input = Array.from({ length: 120 }, (_, i) => ({ id: `r${i}`, k: `k${i % 4}` }));

async function run(mode: 'exactly-once' | 'at-least-once', recycle: number) {
  // one environment and no recycling: no restore at all; two and recycling: restores and replays
  const r = new MemoryJobRunner(counting(mode), { seed: 21, environments: recycle ? 2 : 1, recycleProbability: recycle, batchSize: 4 });
  for (let i = 0; i < input.length; i += 20) {
    r.produce('in', input.slice(i, i + 20));
    // barriers go in while records are still arriving, so channels run ahead of each other
    await r.checkpoint();
  }
  await r.drain();
  return r.published<{ id: string; k: string; n: number }>('out');
}

describe('at-least-once mode', () => {
  it('without failures it gives the exact result', async () => {
    const out = await run('at-least-once', 0);
    expect(out.map((o) => o.id).sort()).toEqual(input.map((e) => e.id).sort());
  });

  it('with restores it may repeat a record but never loses one', async () => {
    const out = await run('at-least-once', 0.5);
    const ids = new Set(out.map((o) => o.id));
    for (const e of input) expect(ids.has(e.id), e.id).toBe(true);
    // per key the final count is at least the number of records
    for (const k of ['k0', 'k1', 'k2', 'k3']) {
      const last = Math.max(...out.filter((o) => o.k === k).map((o) => o.n));
      expect(last).toBeGreaterThanOrEqual(input.filter((e) => e.k === k).length);
    }
  });
});
