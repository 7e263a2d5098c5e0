/**
 * A window's add, merge and reduce may change the accumulator they are given and return it (as
 * Flink allows). They are given copies, so the state's own object stays as it was: a record that
 * fails after its add changed the accumulator leaves no trace once undone, and a pane merged into
 * one window's result is the same pane for the next window. A process window's function gets its
 * own copy of the elements list.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, SlidingEventTimeWindows, TumblingEventTimeWindows, WatermarkStrategies } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { ownCopy } from './window-operator.js';

interface Ev {
  k: string;
  ts: number;
  v: number;
}

interface Sum {
  sum: number;
  n: number;
}

function runner(build: (s: ReturnType<typeof source>) => void) {
  const j = job('window-copies', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
  build(source(j));
  return new MemoryJobRunner(j, { environments: 2, recycleProbability: 0.3, batchSize: 3, seed: 5 });
}
function source(j: ReturnType<typeof job>) {
  return j.source<Ev>({ name: 'ev', shards: 1, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) }).keyBy((e) => e.k);
}
async function finish(r: MemoryJobRunner, events: Ev[]) {
  r.produce('ev', events);
  await r.drain();
  r.endOfInput();
  await r.drain();
}

/** The oracle: each window's sum and count, by key and start (`starts`: the starts of a record's windows) */
function sums(events: readonly Ev[], starts: (ts: number) => number[]): Map<string, Sum> {
  const want = new Map<string, Sum>();
  for (const e of events) {
    for (const start of starts(e.ts)) {
      const s = want.get(`${e.k}@${start}`) ?? { sum: 0, n: 0 };
      want.set(`${e.k}@${start}`, { sum: s.sum + e.v, n: s.n + 1 });
    }
  }
  return want;
}
function fired(r: MemoryJobRunner): Map<string, Sum> {
  return new Map(r.published<{ k: string; start: number; sum: number; n: number }>('out').map((o) => [`${o.k}@${o.start}`, { sum: o.sum, n: o.n }]));
}

/** Flink's habit: the accumulator changed in place and returned; a record of a negative value fails after the change */
const inPlace = {
  createAccumulator: (): Sum => ({ sum: 0, n: 0 }),
  add: (e: Ev, acc: Sum): Sum => {
    acc.sum += e.v;
    acc.n++;
    if (e.v < 0) throw new Error('unlucky');
    return acc;
  },
  getResult: (acc: Sum) => acc,
  merge: (a: Sum, b: Sum): Sum => {
    a.sum += b.sum;
    a.n += b.n;
    return a;
  },
};

describe("a window's user functions get copies of the state's accumulators", () => {
  it('tumbling: a record whose add changed the accumulator and then failed is not counted', async () => {
    const r = runner((s) =>
      s
        .window(TumblingEventTimeWindows.of(1000))
        .aggregate(inPlace, { result: (k, w, a) => ({ k, start: w.start, ...a }) })
        .sinkTo(collectSink('out')),
    );
    // every key's window gets several records, the failing one among them
    const events: Ev[] = [];
    for (let i = 0; i < 40; i++) events.push({ k: `k${i % 4}`, ts: 50 * i, v: i === 9 || i === 22 ? -1 : i + 1 });
    await finish(r, events);
    expect(r.deadLetters()).toHaveLength(2);
    expect(fired(r)).toEqual(sums(events.filter((e) => e.v >= 0), (ts) => [ts - (ts % 1000)]));
  });

  it('sliding on panes: a merge that changes its first accumulator leaves the pane as it was for the next windows', async () => {
    const r = runner((s) =>
      s
        .window(SlidingEventTimeWindows.of(1000, 250))
        .aggregate(inPlace, { result: (k, w, a) => ({ k, start: w.start, ...a }) })
        .sinkTo(collectSink('out')),
    );
    const events: Ev[] = [];
    for (let i = 0; i < 60; i++) events.push({ k: `k${i % 3}`, ts: 37 * i, v: (i % 5) + 1 });
    await finish(r, events);
    const starts = (ts: number) => [0, 1, 2, 3].map((i) => ts - (ts % 250) - 250 * i).filter((start) => start > ts - 1000);
    expect(fired(r)).toEqual(sums(events, starts));
  });

  it('reduce: a record whose reduce changed the value and then failed is not counted', async () => {
    const r = runner((s) =>
      s
        .window(TumblingEventTimeWindows.of(1000))
        .reduce(
          (a, b) => {
            a.v += b.v;
            if (b.v < 0) throw new Error('unlucky');
            return a;
          },
          { result: (k, _w, e) => ({ k, sum: e.v }) },
        )
        .sinkTo(collectSink('out')),
    );
    const events: Ev[] = [1, 2, -1, 4, 5, 6].map((v, i) => ({ k: 'only', ts: 100 * i, v }));
    await finish(r, events);
    expect(r.deadLetters()).toHaveLength(1);
    expect(r.published<{ k: string; sum: number }>('out')).toEqual([{ k: 'only', sum: 18 }]);
  });

  it("process: a function that empties its elements in place leaves the window's own list whole for a late record's firing", async () => {
    const j = job('window-elements', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    source(j)
      .window(TumblingEventTimeWindows.of(1000), { allowedLatenessMs: 5000 })
      .process<{ start: number; n: number; sum: number }>({
        process: (_k, w, elements, out) => {
          // a JavaScript caller (or a cast) can change what the type says is read-only
          const mine = elements as Ev[];
          const taken = mine.splice(0);
          out.collect({ start: w.start, n: taken.length, sum: taken.reduce((a, e) => a + e.v, 0) });
        },
      })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { environments: 1, batchSize: 1, seed: 5 });
    // two records of the first window, one past it (the watermark fires the first), then a late one
    // inside the allowed lateness: the first window fires again with all three
    await finish(r, [
      { k: 'a', ts: 100, v: 1 },
      { k: 'a', ts: 200, v: 2 },
      { k: 'a', ts: 1500, v: 10 },
      { k: 'a', ts: 300, v: 4 },
    ]);
    expect(r.published<{ start: number; n: number; sum: number }>('out').filter((o) => o.start === 0)).toEqual([
      { start: 0, n: 2, sum: 3 },
      { start: 0, n: 3, sum: 7 },
    ]);
  });

  it('a copy is equal to the accumulator and shares no object with it', () => {
    const flat = { a: 1, b: 'x', c: null, d: true };
    const nested = { a: [1, { b: 2 }], c: { d: [3] } };
    for (const x of [flat, nested, [1, 2, 3], [[1], { a: 2 }]]) {
      const c = ownCopy(x);
      expect(c).toEqual(x);
      expect(c).not.toBe(x);
      const inner = (v: unknown): unknown[] => (typeof v === 'object' && v !== null ? [v, ...Object.values(v).flatMap(inner)] : []);
      const mine = new Set(inner(x));
      for (const o of inner(c)) expect(mine.has(o)).toBe(false);
    }
    for (const p of [0, 'text', null, undefined, true]) expect(ownCopy(p)).toBe(p);
  });
});
