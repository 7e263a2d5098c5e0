/** Exceptions from users' key selectors and functions reach the dead letters named by their operator. */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface Reading {
  sensor?: string;
  value: number;
}

function letters(r: MemoryJobRunner): string[] {
  return r.deadLetters().map((d) => d.reason);
}

describe('errors from user code name the operator', () => {
  it('a key selector reading a field the records lack: the keyBy is named, not the engine', async () => {
    const j = job('missing-key');
    j.source<Reading>({ name: 'readings', shards: 1, format: 'json' })
      .keyBy((r) => (r as unknown as { device: string }).device)
      .reduce((a, b) => ({ ...a, value: a.value + b.value }))
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    r.produce('readings', [{ sensor: 'a', value: 1 }, { sensor: 'b', value: 2 }]);
    await r.drain();
    const reasons = letters(r);
    expect(reasons).toHaveLength(2);
    for (const reason of reasons) {
      expect(reason).toMatch(/keyBy \(op\d+-keyBy\): the key selector returned undefined \(does the field exist in the records\?\), not a string or a finite number/);
      expect(reason).not.toMatch(/startsWith|key-groups/);
    }
  });

  it('a key selector that throws, and a map that throws: each names its operator and keeps the original message', async () => {
    const j = job('throwing');
    const src = j.source<Reading>({ name: 'readings', shards: 1, format: 'json' });
    src
      .map((r) => ({ ...r, scaled: r.value * 2 }), { name: 'scale' })
      .keyBy((r) => r.sensor!.toUpperCase())
      .reduce((a, b) => ({ ...a, value: a.value + b.value }))
      .sinkTo(collectSink('sums'));
    src
      .map((r) => {
        if (r.value < 0) throw new RangeError(`negative reading ${r.value}`);
        return r;
      }, { name: 'validate' })
      .sinkTo(collectSink('valid'));
    const r = new MemoryJobRunner(j);
    r.produce('readings', [{ value: 1 }, { sensor: 'x', value: -3 }]);
    await r.drain();
    const reasons = letters(r).sort();
    // one record per failure: a record is dead-lettered on the first operator that throws on it
    expect(reasons).toHaveLength(2);
    expect(reasons.some((x) => /keyBy \(op\d+-keyBy\): TypeError: Cannot read properties of undefined \(reading 'toUpperCase'\)/.test(x))).toBe(true);
    expect(reasons.some((x) => /map "validate" \(op\d+-map\): RangeError: negative reading -3/.test(x))).toBe(true);
  });
});
