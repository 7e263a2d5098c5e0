/** `sluice run` without the stack: which files feed which sources, and when a run must fail. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../shared/api/index.js';
import type { LocatedDeadLetter } from '../local/runner.js';
import { planJob } from '../shared/plan/planner.js';
import { allDeadLettered, runInputs } from './run.js';

describe('sluice run', () => {
  const j = job('two');
  j.source<{ x: number }>({ name: 'a', shards: 1 }).sinkTo(collectSink('out-a'));
  j.source<{ x: number }>({ name: 'b', shards: 1 }).sinkTo(collectSink('out-b'));
  const plan = planJob(j);
  const dir = mkdtempSync(join(tmpdir(), 'sluice-run-'));
  for (const f of ['a.jsonl', 'b.jsonl', 'x=y.jsonl']) writeFileSync(join(dir, f), '{"x":1}\n');

  it('maps --events to sources: source=file, repeatable; a bare file feeds the first source', () => {
    expect(runInputs(plan, [`b=${dir}/b.jsonl`, `${dir}/a.jsonl`, `a=${dir}/b.jsonl`])).toEqual([
      { source: 'b', file: `${dir}/b.jsonl` },
      { source: 'a', file: `${dir}/a.jsonl` },
      { source: 'a', file: `${dir}/b.jsonl` },
    ]);
    // a bare path holding '=' that names a file is a file
    expect(runInputs(plan, [`${dir}/x=y.jsonl`])).toEqual([{ source: 'a', file: `${dir}/x=y.jsonl` }]);
    expect(() => runInputs(plan, [`c=${dir}/a.jsonl`])).toThrow(/job "two" has no source "c" \(sources: a, b\)/);
    expect(() => runInputs(plan, [`a=${dir}/none.jsonl`])).toThrow(/no file .*none\.jsonl/);
  });

  it('fails with a one-line diagnosis when every input record was dead-lettered, and only then', () => {
    const letter = (line: number): LocatedDeadLetter => ({ source: 'a', file: 'a.jsonl', line, reason: 'user function failed: keyBy (op1-keyBy): the key selector returned undefined', data: '{}', stage: 's0', shardId: 'shardId-0', sequenceNumber: String(line), subSequence: 0 });
    const inner: LocatedDeadLetter = { reason: 'window failed', data: '{}', stage: 's1', shardId: 'shardId-0', sequenceNumber: '9', subSequence: 0 };
    expect(allDeadLettered(2, [letter(1), letter(2)])).toBe('every one of the 2 input records was dead-lettered; the first: a.jsonl:1: user function failed: keyBy (op1-keyBy): the key selector returned undefined');
    expect(allDeadLettered(3, [letter(1), letter(2), inner])).toBeUndefined();
    expect(allDeadLettered(0, [])).toBeUndefined();
  });
});
