/**
 * `mode: 'at-least-once'`: barriers are tracked but not aligned — nothing is held back, so outputs are
 * never delayed by a slow channel, and a restore may apply some records twice. It must never lose one.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, valueState, type KeyedProcessFunction } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import type { StageRunner } from './stage-runner.js';

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

/**
 * Half of each slice goes in after the checkpoint's barriers, before any stage runs: the source stage
 * forwards one shard at a time, so the keyed stage reads a channel's barrier and the next epoch's
 * records while the other channels' barriers are still to come. One environment, never recycled: the
 * instances (and their stats) live through the whole run.
 */
async function runAcrossBarriers(mode: 'exactly-once' | 'at-least-once') {
  const r = new MemoryJobRunner(counting(mode), { seed: 21, environments: 1, recycleProbability: 0, batchSize: 4 });
  for (let i = 0; i < input.length; i += 20) {
    r.produce('in', input.slice(i, i + 10));
    const { checkpointId: n } = await r.coordinator.allocate();
    await r.coordinator.inject(n);
    r.produce('in', input.slice(i + 10, i + 20));
    await r.coordinator.await(n, `token-${n}`);
    await r.runUntilIdle();
    await r.coordinator.commit(n);
  }
  await r.drain();
  // the runner keeps its environments to itself; the keyed stage's instances are what matter here
  const envs = (r as unknown as { envs: Map<string, StageRunner[]> }).envs;
  const keyed = [...envs.entries()].filter(([stage]) => stage !== r.plan.stages[0]!.id).flatMap(([, runners]) => runners.flatMap((x) => x.cached()));
  return { out: r.published<{ id: string; k: string; n: number }>('out'), keyed };
}

describe('at-least-once mode', () => {
  it('holds nothing back at a barrier: records of the next epoch are applied at once, where exactly-once holds them', async () => {
    const alo = await runAcrossBarriers('at-least-once');
    const eo = await runAcrossBarriers('exactly-once');
    for (const run of [alo, eo]) {
      expect(run.keyed).toHaveLength(2);
      expect(run.out.map((o) => o.id).sort()).toEqual(input.map((e) => e.id).sort());
    }
    const held = (run: typeof alo) => run.keyed.reduce((a, i) => a + i.stats.held + i.stats.spills, 0);
    // the same input and seed make exactly-once wait for slower channels' barriers ...
    expect(held(eo)).toBeGreaterThan(0);
    // ... while at-least-once applies those records as they come
    expect(held(alo)).toBe(0);
    expect(alo.keyed.reduce((a, i) => a + i.stats.recordsIn, 0)).toBe(eo.keyed.reduce((a, i) => a + i.stats.recordsIn, 0));
  });

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
