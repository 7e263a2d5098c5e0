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
    expect(await checkDeterminism(counter(false), input)).toEqual({ deterministic: true, differences: [], functions: [] });
  });

  it('catches a function that calls Math.random()', async () => {
    const report = await checkDeterminism(counter(true), input);
    expect(report.deterministic).toBe(false);
    expect(report.differences.join('\n')).toMatch(/same id with other content|different outputs/);
    // a process function cannot be called twice: it is named as the suspect of the sink it reaches
    expect(report.functions.map((f) => f.operator)).toEqual([expect.stringMatching(/^process "process" \(op\d+-process\)$/)]);
  });

  const stamped = (how: 'clock' | 'random' | 'pure') => {
    const j = job(`stamp-${how}`, { maxParallelism: 8 });
    j.source<{ k: string }>({ name: 'in', shards: 2 })
      .map((e) => ({ ...e, at: how === 'clock' ? Date.now() : how === 'random' ? Math.random() : e.k.length }), { name: 'stamp' })
      .filter((e) => e.k !== 'none', { name: 'keep' })
      .sinkTo(collectSink('out'));
    return j;
  };

  it.each(['clock', 'random'] as const)('names the map that stamps records with the %s (the map is called twice per record, the first time with the clock moved on)', async (how) => {
    const report = await checkDeterminism(stamped(how), input);
    expect(report.deterministic).toBe(false);
    expect(report.functions).toEqual([{ operator: 'map "stamp" (op1-map)', function: 'map function', example: expect.stringMatching(/^on \{"k":"k\d"\} it returned \{"at":/) }]);
    expect(report.differences.join('\n')).toContain('map "stamp" (op1-map): its map function is not deterministic');
  });

  it('names no function of a deterministic job with maps and filters', async () => {
    expect(await checkDeterminism(stamped('pure'), input)).toEqual({ deterministic: true, differences: [], functions: [] });
  });
});
