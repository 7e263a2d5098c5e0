/**
 * Event-time windows against an independent computation over the same shuffled, out-of-order input:
 * which records are late, which windows fire and with what, and that losing caches mid-window
 * (restore from checkpoint + replay) changes nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  collectSink,
  EventTimeSessionWindows,
  job,
  OutputTag,
  SlidingEventTimeWindows,
  TumblingEventTimeWindows,
  WatermarkStrategies,
  type WindowAssigner,
} from '../api/index.js';
import { jsonSerializer } from '../api/serializers.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { windowListSerializer } from './window-list-serializer.js';

interface Ev {
  id: number;
  key: string;
  ts: number;
  v: number;
}

const INTERVAL = 200; // the source's watermark interval (InstanceOptions default)

function windowJob(assigner: WindowAssigner, bound: number, lateness: number) {
  const late = new OutputTag<Ev>('late');
  const j = job('windows', { maxParallelism: 16 });
  const windowed = j
    .source<Ev>({ name: 'ev', shards: 1, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(bound) })
    .keyBy((e) => e.key, { parallelism: 2 })
    .window(assigner, { lateOutput: late, allowedLatenessMs: lateness })
    .aggregate(
      { createAccumulator: () => 0, add: (e: Ev, acc: number) => acc + e.v, getResult: (a: number) => a, merge: (a: number, b: number) => a + b },
      { result: (key, w, sum) => ({ key, start: w.start, end: w.end, sum }) },
    );
  windowed.sinkTo(collectSink('out'));
  windowed.sideOutput(late).sinkTo(collectSink('late'));
  return j;
}

/**
 * The oracle: one source shard, so the watermark a record sees is the source's last emitted one.
 * With allowed lateness (tumbling and sliding windows only), a window fires when the watermark
 * passes its end and is kept until it passes its end + lateness; a record that still reaches a
 * window the watermark has passed fires it at once, and only then (as Flink's event-time trigger).
 */
function oracle(events: readonly Ev[], assigner: WindowAssigner, bound: number, lateness = 0) {
  let emitted = Number.NEGATIVE_INFINITY;
  let maxTs = Number.NEGATIVE_INFINITY;
  const lateIds: number[] = [];
  const onTime: Ev[] = [];
  const windowsOf = (ts: number): Array<[number, number]> => {
    if (assigner.kind === 'tumbling') {
      const s = Math.floor(ts / assigner.sizeMs) * assigner.sizeMs;
      return [[s, s + assigner.sizeMs]];
    }
    if (assigner.kind === 'sliding') {
      const out: Array<[number, number]> = [];
      for (let s = Math.floor(ts / assigner.slideMs) * assigner.slideMs; s > ts - assigner.sizeMs; s -= assigner.slideMs) out.push([s, s + assigner.sizeMs]);
      return out;
    }
    return [[ts, ts + assigner.gapMs]];
  };
  // per key, for sessions: the sessions still open (not yet fired)
  const fired: Array<{ key: string; start: number; end: number; sum: number }> = [];
  const open = new Map<string, Array<{ start: number; end: number; sum: number; due: boolean }>>();
  const fire = (wm: number) => {
    for (const [key, list] of open) {
      for (const w of [...list]) {
        if (w.due && w.end - 1 <= wm) {
          fired.push({ key, start: w.start, end: w.end, sum: w.sum });
          w.due = false;
        }
        if (w.end - 1 + lateness <= wm) list.splice(list.indexOf(w), 1);
      }
    }
  };
  for (const e of events) {
    let taken = false;
    for (const [s, en] of windowsOf(e.ts)) {
      if (en - 1 + lateness <= emitted) continue;
      taken = true;
      const list = open.get(e.key) ?? [];
      open.set(e.key, list);
      if (assigner.kind === 'session') {
        let w = { start: s, end: en, sum: e.v, due: true };
        for (const o of [...list]) {
          if (o.start < w.end && w.start < o.end) {
            w = { start: Math.min(o.start, w.start), end: Math.max(o.end, w.end), sum: o.sum + w.sum, due: true };
            list.splice(list.indexOf(o), 1);
          }
        }
        list.push(w);
      } else {
        let o = list.find((x) => x.start === s && x.end === en);
        if (o) o.sum += e.v;
        else list.push((o = { start: s, end: en, sum: e.v, due: true }));
        if (en - 1 <= emitted) {
          fired.push({ key: e.key, start: s, end: en, sum: o.sum });
          o.due = false;
        }
      }
    }
    if (!taken && e.ts + lateness <= emitted) lateIds.push(e.id);
    else if (taken) onTime.push(e);
    if (e.ts > maxTs) {
      maxTs = e.ts;
      const wm = maxTs - bound - 1;
      if (wm >= emitted + INTERVAL || emitted === Number.NEGATIVE_INFINITY) {
        emitted = wm;
        fire(emitted);
      }
    }
  }
  fire(Number.MAX_SAFE_INTEGER);
  return { fired, lateIds };
}

type Fired = { key: string; start: number; end: number; sum: number };
const sortW = (a: Fired, b: Fired) => a.key.localeCompare(b.key) || a.start - b.start || a.end - b.end || a.sum - b.sum;

async function run(
  events: readonly Ev[],
  assigner: WindowAssigner,
  bound: number,
  opts: { seed: number; recycle: number; checkpointEvery: number; batchSize: number; maxCachedKeys?: number },
  lateness = 0,
) {
  const r = new MemoryJobRunner(windowJob(assigner, bound, lateness), {
    seed: opts.seed,
    environments: 2,
    recycleProbability: opts.recycle,
    batchSize: opts.batchSize,
    ...(opts.maxCachedKeys === undefined ? {} : { runner: { maxCachedKeys: opts.maxCachedKeys } }),
  });
  for (let i = 0; i < events.length; i += opts.checkpointEvery) {
    r.produce('ev', events.slice(i, i + opts.checkpointEvery));
    await r.runUntilIdle();
    await r.checkpoint();
  }
  r.endOfInput();
  await r.drain();
  return {
    fired: r.published<Fired>('out').slice().sort(sortW),
    late: r.published<Ev>('late').map((e) => e.id).sort((a, b) => a - b),
    /** state rows left in the store (every window has fired and been purged by the end) */
    rows: r.mem.state.rows().length,
  };
}

/** Events in rough time order with bounded disorder, some of them far too late. */
const eventsArb = fc
  .array(fc.record({ key: fc.constantFrom('a', 'b', 'c', 'd'), jitter: fc.integer({ min: -1500, max: 300 }), v: fc.integer({ min: 1, max: 9 }) }), {
    minLength: 1,
    maxLength: 120,
  })
  .map((xs) => xs.map((x, i) => ({ id: i, key: x.key, ts: 10_000 + i * 97 + x.jitter, v: x.v })));

describe('event-time windows', () => {
  for (const [name, assigner] of [
    ['tumbling', TumblingEventTimeWindows.of(1000)],
    // a whole number of slides: on panes (sliding-panes.ts); else each record goes to every window
    ['sliding', SlidingEventTimeWindows.of(1000, 500)],
    ['sliding, not on panes', SlidingEventTimeWindows.of(1000, 300)],
    ['session', EventTimeSessionWindows.withGap(400)],
  ] as const) {
    it(`${name}: fires what the oracle fires, sends late records to the side output, and survives cache loss`, async () => {
      await fc.assert(
        fc.asyncProperty(
          eventsArb,
          fc.integer({ min: 0, max: 800 }),
          fc.record({ seed: fc.integer({ min: 1, max: 1e6 }), recycle: fc.constantFrom(0, 0.3), checkpointEvery: fc.integer({ min: 5, max: 60 }), batchSize: fc.integer({ min: 1, max: 50 }) }),
          async (events, bound, opts) => {
            const want = oracle(events, assigner, bound);
            const got = await run(events, assigner, bound, opts);
            expect(got.late).toEqual([...want.lateIds].sort((a, b) => a - b));
            expect(got.fired).toEqual([...want.fired].sort(sortW));
          },
        ),
        { numRuns: 25, seed: 4242 },
      );
    });
  }

  for (const [name, assigner] of [
    ['tumbling', TumblingEventTimeWindows.of(1000)],
    ['sliding', SlidingEventTimeWindows.of(1000, 300)],
    ['sliding on panes', SlidingEventTimeWindows.of(1000, 250)],
  ] as const) {
    it(`${name} with allowed lateness: fires what the oracle fires, once more for each record that reaches a fired window, and survives cache loss`, async () => {
      await fc.assert(
        fc.asyncProperty(
          eventsArb,
          fc.integer({ min: 0, max: 800 }),
          fc.constantFrom(1, 250, 700, 2000),
          fc.record({ seed: fc.integer({ min: 1, max: 1e6 }), recycle: fc.constantFrom(0, 0.3), checkpointEvery: fc.integer({ min: 5, max: 60 }), batchSize: fc.integer({ min: 1, max: 50 }) }),
          async (events, bound, lateness, opts) => {
            const want = oracle(events, assigner, bound, lateness);
            const got = await run(events, assigner, bound, opts, lateness);
            expect(got.late).toEqual([...want.lateIds].sort((a, b) => a - b));
            expect(got.fired).toEqual([...want.fired].sort(sortW));
          },
        ),
        { numRuns: 25, seed: 4243 },
      );
    });
  }

  it('an idle source shard does not hold the watermark back once its idle timeout passed', async () => {
    const j = job('idle', { maxParallelism: 8 });
    j.source<Ev>({ name: 'ev', shards: 2, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0, { idleTimeoutMs: 1500 }) })
      .keyBy((e) => e.key, { parallelism: 1 })
      .window(TumblingEventTimeWindows.of(1000))
      .reduce((a, b) => ({ ...a, v: a.v + b.v }), { result: (key, w, e) => ({ key, start: w.start, sum: e.v }) })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { seed: 3 });
    // every record lands on whichever shard its partition key hashes to; produce until both have data, then only one
    r.produce('ev', [{ id: 0, key: 'a', ts: 1000, v: 1 }]);
    await r.runUntilIdle();
    for (let i = 0; i < 4; i++) await r.checkpoint(); // ticks advance processing time by 1 s each: the empty shard goes idle
    r.produce('ev', [{ id: 1, key: 'a', ts: 5000, v: 1 }]);
    await r.drain();
    // the window [1000, 2000) fired without an end of input, though one shard never saw a record
    expect(r.published<{ start: number; sum: number }>('out').some((w) => w.start === 1000)).toBe(true);
  });

  // a window's timer keeps its key's state entry: an entry evicted between the timer's record and
  // its firing is the cache's no longer, and the firing must purge the window from the key's current
  // entry (else the emptied list is written to an entry no checkpoint sees, and the row stays)
  for (const [name, assigner, lateness] of [
    ['tumbling', TumblingEventTimeWindows.of(1000), 0],
    ['sliding', SlidingEventTimeWindows.of(1000, 300), 250],
    ['sliding on panes', SlidingEventTimeWindows.of(1000, 250), 250],
  ] as const) {
    it(`${name} with a cache that evicts every clean key: fires what the oracle fires and leaves no window state behind`, async () => {
      await fc.assert(
        fc.asyncProperty(
          eventsArb,
          fc.integer({ min: 0, max: 800 }),
          fc.record({ seed: fc.integer({ min: 1, max: 1e6 }), checkpointEvery: fc.integer({ min: 5, max: 60 }), batchSize: fc.integer({ min: 1, max: 50 }) }),
          async (events, bound, opts) => {
            const want = oracle(events, assigner, bound, lateness);
            const got = await run(events, assigner, bound, { ...opts, recycle: 0, maxCachedKeys: 0 }, lateness);
            expect(got.fired).toEqual([...want.fired].sort(sortW));
            expect(got.rows).toBe(0);
          },
        ),
        { numRuns: 25, seed: 4244 },
      );
    });
  }

  it("writes a key's window list as the JSON serializer does, whatever its bounds and accumulators", () => {
    const json = jsonSerializer<unknown>();
    // one serializer for every list: the bytes it keeps per window are reused across lists
    const lists = windowListSerializer();
    // few starts (kept bytes reused, one start with another end), any number (not finite, -0)
    const bound = fc.oneof(fc.constantFrom(0, -0, 1000, 1_767_225_600_000), fc.integer(), fc.double());
    const acc = fc.oneof(
      fc.anything(),
      fc.string({ unit: 'binary' }),
      fc.constantFrom(undefined, null, () => 1, Symbol('s'), new Date(0), { n: 1, sum: 2 }),
      // a `toJSON` is called with the accumulator's key: '2' inside the list, '' alone
      fc.constant({ toJSON: (k: string) => `at ${k}` }),
      // flat objects of numbers (written without JSON.stringify): names to escape, integer-like
      // names (JSON puts them first), numbers JSON writes as null or in exponent form
      fc.dictionary(
        fc.oneof(fc.constantFrom('n', 'sum', '10', '2', '__proto__', 'a"b', 'ü', '\ud800', 'toJSON'), fc.string({ maxLength: 4 })),
        fc.oneof(fc.integer(), fc.double(), fc.constantFrom(-0, 1e21, 5e-7, 2 ** 53)),
        { maxKeys: 4, noNullPrototype: true },
      ),
      // an inherited enumerable name (JSON leaves it out), a value that is not a number
      fc.constant(Object.assign(Object.create({ inherited: 1 }) as object, { n: 1 })),
      fc.constant({ n: 1, sum: '2' }),
      fc.constantFrom({ n: 1, sum: Number.NaN }, { n: Number.POSITIVE_INFINITY }, { n: 2, sum: Number.NEGATIVE_INFINITY }),
      fc.constant({ n: 1, nested: { sum: 2 } }),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(bound, bound, acc), { maxLength: 4 }), (list) => {
        const bytes = lists.encode(list);
        expect([...bytes]).toEqual([...json.encode(list)]);
        expect(lists.decode(bytes)).toEqual(JSON.parse(JSON.stringify(list)));
      }),
      { numRuns: 2000, seed: 4245 },
    );
  });
});
