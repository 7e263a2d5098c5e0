/**
 * Values a staged sink cannot carry — JSON cannot write them, or a Kinesis record cannot hold them —
 * are refused where the record emits them: the record is a dead letter naming the sink and why, and
 * the checkpoints that stage and publish the other records complete.
 */
import { describe, expect, it } from 'vitest';
import { job, kinesisSink, s3FileSink } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { MAX_KINESIS_VALUE_BYTES, stagedValueProblem } from './staged-values.js';

interface In {
  v: number;
}

/** v 2: a bigint; 3: a cycle; 4: a string past a Kinesis record; 8: a Set; anything else: a plain value */
function made(v: number): unknown {
  if (v === 2) return { v, n: 10n };
  if (v === 8) return { v, tags: new Set(['a']) };
  if (v === 3) {
    const o: Record<string, unknown> = { v };
    o.self = o;
    return o;
  }
  if (v === 4) return { v, s: 'é'.repeat(MAX_KINESIS_VALUE_BYTES / 2) };
  return { v };
}

async function runWith(sink: 'kinesis' | 's3'): Promise<MemoryJobRunner> {
  const j = job(`staged-${sink}`, { maxParallelism: 8, poisonPolicy: 'dead-letter' });
  j.source<In>({ name: 'in', shards: 1, format: 'json' })
    .map((r) => made(r.v))
    .sinkTo(sink === 'kinesis' ? kinesisSink({ name: 'out' }) : s3FileSink({ name: 'out' }));
  const r = new MemoryJobRunner(j, { batchSize: 3 });
  r.produce('in', [1, 2, 3, 4, 5, 6, 8].map((v) => ({ v })));
  await r.drain();
  r.produce('in', [7].map((v) => ({ v })));
  await r.drain();
  return r;
}

describe('staged sinks refuse what they cannot carry', () => {
  it('a Kinesis sink: a bigint, a cycle and a value past 1 MiB are dead letters; the rest is published', async () => {
    const r = await runWith('kinesis');
    const reasons = r.deadLetters().map((l) => l.reason).sort();
    expect(reasons).toHaveLength(4);
    expect(reasons.join('\n')).toMatch(/sink "out": value cannot be written as JSON: at \.n: 10n is a bigint/);
    expect(reasons.join('\n')).toMatch(/sink "out": value cannot be written as JSON: at \.self: the value holds itself here \(a cycle\)/);
    expect(reasons.join('\n')).toMatch(/sink "out": value cannot be written as JSON: at \.tags: a Set is written by JSON as \{\}/);
    expect(reasons.join('\n')).toMatch(/sink "out": value is \d+ bytes as JSON, beyond/);
    const published = r.published<{ v: number }>('out').map((x) => x.v).sort();
    expect(published).toEqual([1, 5, 6, 7]);
  });

  it('an S3 file sink: what JSON cannot write is a dead letter; a large value is not refused', async () => {
    const r = await runWith('s3');
    expect(r.deadLetters()).toHaveLength(3);
    expect(r.published<{ v: number }>('out').map((x) => x.v).sort()).toEqual([1, 4, 5, 6, 7]);
  });

  it('counts bytes as UTF-8, exactly near the limit', () => {
    expect(stagedValueProblem('a'.repeat(100), 102)).toBeUndefined();
    expect(stagedValueProblem('é'.repeat(50), 101)).toMatch(/102 bytes as JSON/);
    expect(stagedValueProblem(undefined)).toMatch(/undefined has no JSON form/);
    expect(stagedValueProblem(() => 1)).toMatch(/function has no JSON form/);
  });
});
