/**
 * Keyed state with the default JSON serializer: a record that writes a value JSON cannot write (a
 * bigint, a Map, a cycle) is a dead letter naming the state and where in the value, its effects
 * undone; the checkpoints complete and the other records' state survives a restore.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, valueState } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface In {
  k: string;
  v: number;
}

function made(v: number): unknown {
  if (v === 2) return { total: 10n };
  if (v === 3) return { seen: new Map([['a', 1]]) };
  if (v === 4) {
    const o: Record<string, unknown> = {};
    o.self = o;
    return o;
  }
  return { total: v };
}

describe('keyed state written with the JSON serializer', () => {
  it('refuses what JSON cannot write at the write: dead letters, and every checkpoint completes', async () => {
    const s = valueState<unknown>('s');
    const j = job('json-state', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<In>({ name: 'in', shards: 1, format: 'json' })
      .keyBy((r) => r.k)
      .process<string>({
        state: [s],
        processElement(r, ctx, out) {
          out.collect(`${r.k} before`);
          ctx.getState(s).update(made(r.v));
          out.collect(`${r.k} ${r.v}`);
        },
      })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { batchSize: 2 });
    r.produce('in', [1, 2, 3, 4, 5].map((v) => ({ k: `k${v}`, v })));
    await r.drain();
    r.produce('in', [{ k: 'k1', v: 6 }]);
    await r.drain();

    const reasons = r.deadLetters().map((l) => l.reason).join('\n');
    expect(r.deadLetters()).toHaveLength(3);
    expect(reasons).toMatch(/state "s".*at \.total: 10n is a bigint/);
    expect(reasons).toMatch(/state "s".*at \.seen: a Map is written by JSON as \{\}/);
    expect(reasons).toMatch(/state "s".*at \.self: the value holds itself here \(a cycle\)/);
    // a refused record's outputs are undone with it
    expect(r.published<string>('out').sort()).toEqual(['k1 1', 'k1 6', 'k1 before', 'k1 before', 'k5 5', 'k5 before']);
  });
});
