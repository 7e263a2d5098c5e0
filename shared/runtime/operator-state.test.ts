import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectSink, job, operatorListState, unionListState, type ProcessFunction } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { redistributeOperatorLists, type OperatorListRow } from './operator-state.js';

describe('operator list state', () => {
  it('keeps each instance its own list across restores', async () => {
    const seen = operatorListState<string>('seen');
    const fn: ProcessFunction<{ id: string }, { id: string; before: number }> = {
      state: [seen],
      processElement(e, ctx, out) {
        const l = ctx.getOperatorListState(seen);
        out.collect({ id: e.id, before: l.get().length });
        l.add(e.id);
      },
    };
    const j = job('oplist', { maxParallelism: 8 });
    j.source<{ id: string }>({ name: 'in', shards: 1 }).process(fn).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { seed: 9, environments: 2, recycleProbability: 0.5, batchSize: 2 });
    for (let i = 0; i < 5; i++) {
      r.produce('in', Array.from({ length: 4 }, (_, k) => ({ id: `e${i * 4 + k}` })));
      await r.drain();
    }
    // one source shard, one instance: the list grew by one per record, whatever was restored
    expect(r.published<{ before: number }>('out').map((o) => o.before)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('redistributes on a parallelism change: split lists deal every item to exactly one instance, union lists give all to each', () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.integer(), { maxLength: 12 }), { minLength: 1, maxLength: 6 }), fc.integer({ min: 1, max: 9 }), (perInstance, p) => {
        const old: OperatorListRow[][] = perInstance.map((items) => [
          ['op1', 'offsets', 'split', items],
          ['op1', 'config', 'union', items.map((x) => x * 10)],
        ]);
        const next = redistributeOperatorLists(old, p);
        expect(next).toHaveLength(p);
        const all = perInstance.flat();
        const split = next.flatMap((rows) => rows.find((r) => r[1] === 'offsets')![3] as number[]);
        expect([...split].sort((a, b) => a - b)).toEqual([...all].sort((a, b) => a - b));
        const sizes = next.map((rows) => (rows.find((r) => r[1] === 'offsets')![3] as number[]).length);
        expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1); // evenly
        for (const rows of next) expect(rows.find((r) => r[1] === 'config')![3]).toEqual(all.map((x) => x * 10));
      }),
      { numRuns: 200 },
    );
  });

  it('union list state is declared with its mode in the plan', () => {
    const j = job('decl', {});
    j.source<{ id: string }>({ name: 'in' })
      .process({ state: [operatorListState('a'), unionListState('b')], processElement: () => undefined })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    expect(r.plan.stages[0]!.operators[1]!.state).toEqual([
      { name: 'a', kind: 'operator-list', scope: 'operator' },
      { name: 'b', kind: 'operator-list', scope: 'union' },
    ]);
  });
});
