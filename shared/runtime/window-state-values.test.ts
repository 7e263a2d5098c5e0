/**
 * A window keeps its accumulators (or reduced values) in JSON state. One JSON cannot
 * write — a Set (written as {}: a distinct count's members lost at a restore), a Map, a bigint (the
 * checkpoint fails at every try) — is refused by the record that makes it: a dead letter naming the
 * window's function, its effects undone; the other records' windows fire as they would alone.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, TumblingEventTimeWindows, WatermarkStrategies } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface Ev {
  k: string;
  ts: number;
  /** 2: the accumulator takes a Set; 3: a bigint; 4: a Map; else a number */
  v: number;
}

const events: Ev[] = [1, 2, 3, 4, 5, 6].map((v, i) => ({ k: v % 2 ? 'odd' : 'even', ts: 100 * i, v }));

function run(windowed: (s: ReturnType<typeof source>) => void) {
  const j = job('window-values', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
  windowed(source(j));
  const r = new MemoryJobRunner(j, { environments: 2, recycleProbability: 0.5, batchSize: 2, seed: 11 });
  return r;
}
function source(j: ReturnType<typeof job>) {
  return j.source<Ev>({ name: 'ev', shards: 1, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) }).keyBy((e) => e.k);
}
function odd(v: number): unknown {
  if (v === 2) return new Set([v]);
  if (v === 3) return BigInt(v);
  if (v === 4) return new Map([[v, v]]);
  return v;
}

describe("a window's state", () => {
  it('aggregate: an accumulator JSON cannot write is a dead letter naming aggregate.add; the other records fire', async () => {
    const r = run((s) =>
      s
        .window(TumblingEventTimeWindows.of(1000))
        .aggregate(
          {
            createAccumulator: () => ({ sum: 0 }) as { sum: number; extra?: unknown },
            add: (e: Ev, acc: { sum: number; extra?: unknown }) => ({ sum: acc.sum + e.v, ...(e.v >= 2 && e.v <= 4 ? { extra: odd(e.v) } : {}) }),
            getResult: (acc: { sum: number }) => acc.sum,
          },
          { result: (k, _w, sum) => ({ k, sum }) },
        )
        .sinkTo(collectSink('out')),
    );
    r.produce('ev', events);
    await r.drain();
    r.endOfInput();
    await r.drain();
    const reasons = r.deadLetters().map((l) => l.reason);
    expect(reasons).toHaveLength(3);
    for (const re of [/aggregate\.add gave a value the window's state cannot keep: at \.extra: a Set is written by JSON as \{\}/, /at \.extra: 3n is a bigint/, /at \.extra: a Map is written by JSON/]) {
      expect(reasons.some((x) => re.test(x))).toBe(true);
    }
    // each key's sum over [0, 1000) without the refused records: even 6 (2 and 4 refused), odd 1 + 5 (3 refused)
    expect(r.published<{ k: string; sum: number }>('out').sort((a, b) => a.k.localeCompare(b.k))).toEqual([
      { k: 'even', sum: 6 },
      { k: 'odd', sum: 6 },
    ]);
  });

  it('reduce: a reduced value JSON cannot write is a dead letter naming reduce', async () => {
    const r = run((s) =>
      s
        .window(TumblingEventTimeWindows.of(1000))
        .reduce((a, b) => ({ ...a, v: a.v + b.v, ...(b.v === 3 ? { seen: odd(2) } : {}) }), { result: (k, _w, e) => ({ k, sum: e.v }) })
        .sinkTo(collectSink('out')),
    );
    r.produce('ev', events);
    await r.drain();
    r.endOfInput();
    await r.drain();
    expect(r.deadLetters().map((l) => l.reason)).toEqual([expect.stringMatching(/reduce gave a value the window's state cannot keep: at \.seen: a Set is written by JSON as \{\}/)]);
    expect(r.published<{ k: string; sum: number }>('out').sort((a, b) => a.k.localeCompare(b.k))).toEqual([
      { k: 'even', sum: 12 },
      { k: 'odd', sum: 6 },
    ]);
  });
});
