import { describe, expect, it } from 'vitest';
import { collectSink, job, valueState } from '../../api/index.js';
import { planJob } from '../../plan/planner.js';
import { restoreIncompatibility, SAVEPOINT_FORMAT, validSavepointId, type SavepointManifest } from './savepoints.js';

const count = valueState<number>('count');

function counting(parallelism: number, options: { maxParallelism?: number; shards?: number; stateName?: string } = {}) {
  const j = job('counts', { maxParallelism: options.maxParallelism ?? 16 });
  const s = options.stateName ? valueState<number>(options.stateName) : count;
  j.source<{ k: string }>({ name: 'in', shards: options.shards ?? 2 })
    .keyBy((e) => e.k, { parallelism })
    .process({ state: [s], processElement() {} }, { name: 'count' })
    .sinkTo(collectSink('out'));
  return planJob(j);
}

function manifestOf(plan: ReturnType<typeof counting>): SavepointManifest {
  return {
    format: SAVEPOINT_FORMAT,
    version: 1,
    id: 'sp',
    job: plan.job,
    planHash: plan.hash,
    checkpointId: 5,
    createdAt: '2026-01-01T00:00:00.000Z',
    maxParallelism: plan.maxParallelism,
    operators: plan.stages.flatMap((st) => st.operators.filter((o) => o.state.length).map((o) => ({ id: o.id, stage: st.id, states: o.state.map((x) => x.name), keyGroups: [0, 3] }))),
    sources: [],
    stages: plan.stages.map((st) => ({ id: st.id, parallelism: st.parallelism, watermark: null, processingTime: 0 })),
    rows: 2,
    timers: 0,
    bytes: 10,
  };
}

describe('restoring a savepoint into a plan', () => {
  it('accepts another parallelism of the keyed stage: state is addressed by key group', () => {
    expect(restoreIncompatibility(counting(4), manifestOf(counting(2)))).toBeUndefined();
    expect(restoreIncompatibility(counting(1), manifestOf(counting(3)))).toBeUndefined();
  });

  it('refuses other key groups, a lost state, other source shards or another job', () => {
    expect(restoreIncompatibility(counting(2, { maxParallelism: 32 }), manifestOf(counting(2)))).toMatch(/16 key groups, the job 32/);
    expect(restoreIncompatibility(counting(2, { stateName: 'total' }), manifestOf(counting(2)))).toMatch(/no longer declares state count/);
    expect(restoreIncompatibility(counting(2, { shards: 3 }), manifestOf(counting(2)))).toMatch(/source stage s0 had 2 shards and now has 3/);
    expect(restoreIncompatibility(counting(2), { ...manifestOf(counting(2)), job: 'other' })).toMatch(/belongs to job "other"/);
  });

  it('takes savepoint ids that are safe S3 key segments', () => {
    expect(validSavepointId('sp-20261129t154552z')).toBe(true);
    expect(validSavepointId('before.upgrade_2')).toBe(true);
    for (const bad of ['', '../x', 'a/b', '-x', 'x'.repeat(101)]) expect(validSavepointId(bad), bad).toBe(false);
  });
});
