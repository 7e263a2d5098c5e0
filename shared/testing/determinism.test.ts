import { describe, expect, it } from 'vitest';
import { collectSink, job, valueState, type KeyedProcessFunction } from '../api/index.js';
import { checkDeterminism } from './determinism.js';

const counter = (impure: boolean) => {
  const n = valueState<number>('n');
  const fn: KeyedProcessFunction<string, { k: string }, { k: string; n: number; r: number }> = {
    state: [n],
    processElement(e, ctx, out) {
      const next = (ctx.getState(n).value() ?? 0) + 1;
      ctx.getState(n).update(next);
      // ctx.random() replays; Math.random() does not
      out.collect({ k: e.k, n: next, r: impure ? Math.random() : ctx.random() });
    },
  };
  const j = job(impure ? 'impure' : 'pure', { maxParallelism: 8 });
  j.source<{ k: string }>({ name: 'in', shards: 2 }).keyBy((e) => e.k, { parallelism: 2 }).process(fn).sinkTo(collectSink('out'));
  return j;
};

const input = { in: Array.from({ length: 60 }, (_, i) => ({ k: `k${i % 5}` })) };

describe('checkDeterminism', () => {
  it('passes a function that draws randomness from the context', async () => {
    expect(await checkDeterminism(counter(false), input)).toEqual({ deterministic: true, differences: [] });
  });

  it('catches a function that calls Math.random()', async () => {
    const report = await checkDeterminism(counter(true), input);
    expect(report.deterministic).toBe(false);
    expect(report.differences.join('\n')).toMatch(/same id with other content|different outputs/);
  });
});
