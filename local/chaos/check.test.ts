/** How `sluice run --chaos` compares the faulted and the fault-free run (no stack needed). */
import { describe, expect, it } from 'vitest';
import { collectSink, dynamoUpsertSink, job } from '../../shared/api/index.js';
import { planJob } from '../../shared/plan/planner.js';
import type { RunOutput } from '../run-output.js';
import { compareRuns, formatChaosReport, type ChaosReport } from './check.js';

const j = job('two-sinks');
const s = j.source<{ k: string; n: number }>({ name: 'in', shards: 1 });
s.sinkTo(dynamoUpsertSink({ name: 'totals', key: (r) => r.k }));
s.sinkTo(collectSink('events'));
const plan = planJob(j);

const run = (totals: unknown[], events: unknown[], letters: Array<{ line: number; reason: string }> = []): RunOutput => ({
  sinks: { totals, events },
  deadLetters: letters.map((l) => ({ source: 'in', file: 'in.jsonl', line: l.line, reason: l.reason, data: '{', stage: 's0', shardId: 'shardId-0', sequenceNumber: String(l.line), subSequence: 0 })),
  checkpoints: { completed: 2, aborted: 1, meanDurationMs: 10, recordsIn: 3, finished: true },
});

describe('chaos: comparing two runs', () => {
  it('finds no difference when each sink holds the same records, in any order, with keys in any order', () => {
    const a = run([{ pk: 'a', n: 1, m: 2 }, { pk: 'b', n: 2 }], [{ k: 'a', n: 1 }, { k: 'b', n: 2 }], [{ line: 3, reason: 'bad' }]);
    const b = run([{ pk: 'b', n: 2 }, { m: 2, n: 1, pk: 'a' }], [{ k: 'b', n: 2 }, { n: 1, k: 'a' }], [{ line: 3, reason: 'bad' }]);
    expect(compareRuns(plan, a, b)).toEqual([]);
  });

  it('reports an upsert sink per row key, any other sink per record (a duplicate, a loss), and the dead letters', () => {
    const faulted = run([{ pk: 'a', n: 2 }, { pk: 'b', n: 2 }], [{ k: 'a', n: 1 }, { k: 'a', n: 1 }], []);
    const faultFree = run([{ pk: 'a', n: 1 }, { pk: 'b', n: 2 }, { pk: 'c', n: 5 }], [{ k: 'a', n: 1 }, { k: 'b', n: 2 }], [{ line: 3, reason: 'bad' }]);
    expect(compareRuns(plan, faulted, faultFree)).toEqual([
      { sink: 'totals', key: 'a', faulted: [{ pk: 'a', n: 2 }], faultFree: [{ pk: 'a', n: 1 }] },
      { sink: 'totals', key: 'c', faulted: [], faultFree: [{ pk: 'c', n: 5 }] },
      { sink: 'events', key: '{"k":"a","n":1}', faulted: [{ k: 'a', n: 1 }, { k: 'a', n: 1 }], faultFree: [{ k: 'a', n: 1 }] },
      { sink: 'events', key: '{"k":"b","n":2}', faulted: [], faultFree: [{ k: 'b', n: 2 }] },
      { sink: 'dead letters', key: '{"at":"in.jsonl:3","data":"{","reason":"bad"}', faulted: [], faultFree: [{ at: 'in.jsonl:3', reason: 'bad', data: '{' }] },
    ]);
  });

  it('prints the faults by kind, each differing key, the function at fault and the summary line last', () => {
    const faulted = run([{ pk: 'a', n: 2 }], []);
    const faultFree = run([{ pk: 'a', n: 1 }], []);
    const differences = compareRuns(plan, faulted, faultFree);
    const report: ChaosReport = {
      seed: 3,
      profile: 'mixed',
      faults: new Map([['zombie', 2], ['lost-response', 1]]),
      totalFaults: 3,
      faulted,
      faultFree,
      differences,
      replayConflicts: 0,
      determinism: { deterministic: false, differences: [], functions: [{ operator: 'map "m" (op1-map)', function: 'map function', example: 'on 1 it returned 2, then 3' }] },
      ok: false,
      line: 'chaos: seed=3 profile=mixed faults=3 kinds=2 sinks=2 records=1 differences=1',
    };
    expect(formatChaosReport(report)).toEqual([
      'faults by kind: zombie=2 lost-response=1',
      'faulted run: checkpoints completed=2 aborted=1; fault-free run: completed=2 aborted=1',
      'totals: 1 key(s) differ',
      '  key a: under faults {"n":2,"pk":"a"}; without {"n":1,"pk":"a"}',
      'not deterministic: map "m" (op1-map), its map function: on 1 it returned 2, then 3',
      'chaos: seed=3 profile=mixed faults=3 kinds=2 sinks=2 records=1 differences=1',
    ]);
  });
});
