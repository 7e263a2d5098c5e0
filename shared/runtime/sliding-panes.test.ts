/**
 * Sliding windows on panes against the per-window layout, operator against operator over the same
 * records and watermarks: the same aggregate without `merge` keeps each record in every window
 * (window-operator.ts), with it on panes (sliding-panes.ts). Both must fire the same windows with
 * the same results and metas, in the same order, with late records, allowed lateness and records
 * undone after a failure mid-batch; state written per window must restore into panes; and both
 * must leave no state and no timer behind.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectSink, job, OutputTag, SlidingEventTimeWindows, WatermarkStrategies } from '../api/index.js';
import type { WindowNode } from '../api/graph.js';
import type { AggregateFunction } from '../api/state.js';
import { BroadcastStateStore } from './broadcast-state.js';
import { KeyedStateCache } from './keyed-state.js';
import type { OperatorEnv, Push, RecordMeta } from './operator-context.js';
import { slidesOnPanes } from './sliding-panes.js';
import { TimerIndex, type Timer } from './timers.js';
import { compileWindow, windowStateDescriptor } from './window-operator.js';
import type { Windows } from './window-parts.js';

interface Ev {
  id: number;
  key: string;
  ts: number;
  v: number;
  /** 'add': the aggregate's add throws; 'after': an operator after the window throws (its effects are undone) */
  fail?: 'add' | 'after';
}

const sum = (merge: boolean): AggregateFunction<Ev, number, number> => ({
  createAccumulator: () => 0,
  add: (e, acc) => {
    if (e.fail === 'add') throw new Error(`record ${e.id} fails`);
    return acc + e.v;
  },
  getResult: (acc) => acc,
  ...(merge ? { merge: (a: number, b: number) => a + b } : {}),
});

/** The window node of a job: on panes when its aggregate merges, per window when not (the same operator id either way). */
function windowNode(sizeMs: number, slideMs: number, offsetMs: number, lateness: number, merge: boolean): WindowNode {
  const j = job('panes', { maxParallelism: 8 });
  const late = new OutputTag<Ev>('late');
  const w = j
    .source<Ev>({ name: 'ev', shards: 1, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
    .keyBy((e) => e.key)
    .window(SlidingEventTimeWindows.of(sizeMs, slideMs, offsetMs), { lateOutput: late, allowedLatenessMs: lateness })
    .aggregate(sum(merge));
  w.sinkTo(collectSink('out'));
  w.sideOutput(late).sinkTo(collectSink('late'));
  const node = j.nodes.find((n): n is WindowNode => n.kind === 'window')!;
  expect(slidesOnPanes(node)).toBe(merge);
  return node;
}

const GROUPS: Record<string, number> = { a: 1, b: 5, c: 6 };

/** where a watermark's firings begin and end in `Harness.out` */
const ADVANCE = '>>';
const ADVANCED = '<<';

/**
 * What a harness emitted, each watermark's firings put in (time, text) order: timers of one time
 * fire in the order they were registered, which the two layouts register differently (one pane's
 * timers at its first record, one window's at its own), so only that order may differ between them.
 */
function canonical(out: readonly string[]): string[] {
  const res: string[] = [];
  let firing: string[] | undefined;
  const at = (x: string) => Number(/ @(-?\d+) /.exec(x)?.[1] ?? 0);
  for (const x of out) {
    if (x === ADVANCE) firing = [];
    else if (x === ADVANCED) {
      res.push(...firing!.sort((a, b) => at(a) - at(b) || (a < b ? -1 : a > b ? 1 : 0)));
      firing = undefined;
    } else (firing ?? res).push(x);
  }
  return res;
}

/**
 * One window operator applied as a chain applies it: each record and each timer firing begun,
 * then committed, or rolled back (its state, timers and outputs) when it throws.
 */
class Harness {
  readonly out: string[] = [];
  readonly late: number[] = [];
  dropped = 0;
  wm = Number.NEGATIVE_INFINITY;
  private handler: ((t: Timer) => void) | undefined;
  private readonly push: Push;

  constructor(
    readonly node: WindowNode,
    readonly state = new KeyedStateCache(),
    readonly timers = new TimerIndex(),
  ) {
    state.register(node.id, [windowStateDescriptor(node)], true);
    const env: OperatorEnv = {
      state,
      timers,
      broadcast: new BroadcastStateStore(),
      clock: { processingTime: () => 0, watermark: () => this.wm },
      onTimer: (_id, fn) => (this.handler = fn),
      dropLate: () => void this.dropped++,
      recordTimers: () => undefined,
    };
    const next: Push = (v, m) => {
      const r = v as { key: string; window: { start: number; end: number }; value: number };
      this.out.push(`${r.key} [${r.window.start},${r.window.end}) ${r.value} @${m.timestamp} ${m.recordId}`);
    };
    const late: Push = (v) => void this.late.push((v as Ev).id);
    this.push = compileWindow(node, next, new Map([['late', late]]), env);
  }

  private apply(fn: () => void): void {
    const outs = this.out.length;
    const lates = this.late.length;
    const dropped = this.dropped;
    this.state.beginRecord();
    this.timers.beginRecord();
    try {
      fn();
      this.state.commitRecord();
      this.timers.commitRecord();
    } catch {
      this.state.rollbackRecord();
      this.timers.rollbackRecord();
      this.out.length = outs;
      this.late.length = lates;
      this.dropped = dropped;
      this.out.push(`dead letter`);
    }
  }

  record(e: Ev): void {
    const m: RecordMeta = { timestamp: e.ts, recordId: `r${e.id}`, key: e.key, keyGroup: GROUPS[e.key]! };
    this.apply(() => {
      this.push(e, m);
      if (e.fail === 'after') throw new Error(`an operator after the window fails on record ${e.id}`);
    });
  }

  advance(wm: number): void {
    this.wm = wm;
    this.out.push(ADVANCE);
    for (let t = this.timers.popDue('event-time', wm); t !== undefined; t = this.timers.popDue('event-time', wm)) this.apply(() => this.handler!(t));
    this.out.push(ADVANCED);
  }

  /** every key's window list (empty when none) */
  lists(): Record<string, Windows> {
    const d = windowStateDescriptor(this.node);
    return Object.fromEntries(Object.keys(GROUPS).map((k) => [k, (this.state.read(this.node.id, k, GROUPS[k]!, d) as Windows | undefined) ?? []]));
  }

  /** A restore from a checkpoint taken now: the state's rows and the timers, decoded into a new cache and index, for `node`. */
  restoredAs(node: WindowNode): Harness {
    const rows = this.state.dirtyRows();
    const state = new KeyedStateCache();
    state.register(node.id, [windowStateDescriptor(node)], true);
    state.load(rows, rows);
    const h = new Harness(node, state, TimerIndex.fromJSON(this.timers.toJSON()));
    h.wm = this.wm;
    return h;
  }
}

/** Records in rough time order (some far too late, some failing) and a watermark that trails them. */
const inputArb = fc
  .array(
    fc.record({
      key: fc.constantFrom('a', 'b', 'c'),
      jitter: fc.integer({ min: -1500, max: 300 }),
      v: fc.integer({ min: 1, max: 9 }),
      fail: fc.constantFrom(undefined, undefined, undefined, undefined, undefined, undefined, 'add' as const, 'after' as const),
      // how far behind the newest record the watermark goes after this one (none: it stays)
      lag: fc.option(fc.integer({ min: 0, max: 900 }), { freq: 2 }),
    }),
    { minLength: 1, maxLength: 100 },
  )
  .map((xs) => xs.map((x, i) => ({ e: { id: i, key: x.key, ts: 10_000 + i * 97 + x.jitter, v: x.v, ...(x.fail ? { fail: x.fail } : {}) } as Ev, lag: x.lag })));

const shapeArb = fc.record({
  slides: fc.integer({ min: 2, max: 5 }),
  slideMs: fc.constantFrom(100, 250, 300),
  offsetMs: fc.constantFrom(0, 70),
  lateness: fc.constantFrom(0, 1, 250, 700, 2000),
});

type Input = Array<{ e: Ev; lag: number | null }>;

/** Feeds records from `from` to `to` of the input, each followed by its watermark. */
function feed(h: Harness, input: Input, from: number, to: number, maxTs: { v: number }): void {
  for (let i = from; i < to; i++) {
    const { e, lag } = input[i]!;
    h.record(e);
    maxTs.v = Math.max(maxTs.v, e.ts);
    if (lag !== null && maxTs.v - lag > h.wm) h.advance(maxTs.v - lag);
  }
}

/**
 * Feeds both layouts the input from `from` on and then every watermark: the panes fire what the
 * per-window layout fires, in its order, take and drop the same late records, and leave no pane and
 * no timer (every window fired and was purged).
 */
function expectAlike(panes: Harness, windows: Harness, input: Input, from: number, maxTs: { v: number }): void {
  for (const h of [panes, windows]) {
    feed(h, input, from, input.length, { ...maxTs });
    h.advance(Number.MAX_SAFE_INTEGER);
  }
  // each fires a watermark's timers in time order; the order within one time is its registration order
  for (const h of [panes, windows]) {
    let last = Number.NEGATIVE_INFINITY;
    for (const x of h.out) {
      if (x === ADVANCE) last = Number.NEGATIVE_INFINITY;
      const t = / @(-?\d+) timer\//.exec(x);
      if (!t) continue;
      expect(Number(t[1])).toBeGreaterThanOrEqual(last);
      last = Number(t[1]);
    }
  }
  expect(canonical(panes.out)).toEqual(canonical(windows.out));
  expect(panes.late).toEqual(windows.late);
  expect(panes.dropped).toBe(windows.dropped);
  expect(panes.lists()).toEqual({ a: [], b: [], c: [] });
  expect(panes.timers.size).toBe(0);
}

describe('sliding windows on panes', () => {
  it('fire what the per-window layout fires, in its order, with late records, allowed lateness and undone records', () => {
    fc.assert(
      fc.property(inputArb, shapeArb, (input, s) => {
        const size = s.slides * s.slideMs;
        const panes = new Harness(windowNode(size, s.slideMs, s.offsetMs, s.lateness, true));
        const windows = new Harness(windowNode(size, s.slideMs, s.offsetMs, s.lateness, false));
        expectAlike(panes, windows, input, 0, { v: Number.NEGATIVE_INFINITY });
      }),
      { numRuns: 300, seed: 5151 },
    );
  });

  it('restore state written per window: a firing merges the whole window with the panes, and purges it', () => {
    fc.assert(
      fc.property(inputArb, shapeArb, fc.double({ min: 0, max: 1, noNaN: true }), (input, s, at) => {
        const size = s.slides * s.slideMs;
        const cut = Math.floor(at * input.length);
        const perWindow = windowNode(size, s.slideMs, s.offsetMs, s.lateness, false);
        const before = new Harness(perWindow);
        const maxTs = { v: Number.NEGATIVE_INFINITY };
        feed(before, input, 0, cut, maxTs);
        // the same checkpoint restored on panes and per window; both go on with the rest of the input
        const panes = before.restoredAs(windowNode(size, s.slideMs, s.offsetMs, s.lateness, true));
        const windows = before.restoredAs(perWindow);
        expectAlike(panes, windows, input, cut, maxTs);
      }),
      { numRuns: 300, seed: 5152 },
    );
  });

  it('a window restored whole and a record after the restore fire as one sum', () => {
    // size 300, slide 100: a record at 150 is in windows [-100,200), [0,300), [100,400)
    const before = new Harness(windowNode(300, 100, 0, 0, false));
    before.record({ id: 1, key: 'a', ts: 150, v: 2 });
    expect(before.lists().a.map(([s, e]) => [s, e])).toEqual([
      [-100, 200],
      [0, 300],
      [100, 400],
    ]);
    const h = before.restoredAs(windowNode(300, 100, 0, 0, true));
    // pane [200, 300): in windows [0,300), [100,400), [200,500)
    h.record({ id: 2, key: 'a', ts: 250, v: 5 });
    expect(h.lists().a.map(([s, e, acc]) => [s, e, acc])).toEqual([
      [-100, 200, 2],
      [0, 300, 2],
      [100, 400, 2],
      [200, 300, 5],
    ]);
    h.advance(Number.MAX_SAFE_INTEGER);
    const timer = (time: number) => `@${time} timer/${h.node.id}/a/${time}`;
    expect(canonical(h.out)).toEqual([`a [-100,200) 2 ${timer(199)}`, `a [0,300) 7 ${timer(299)}`, `a [100,400) 7 ${timer(399)}`, `a [200,500) 5 ${timer(499)}`]);
    expect(h.lists().a).toEqual([]);
  });

  it('state on panes restored without merge: records and firings go to the dead letters, none fires a pane as a window', () => {
    const before = new Harness(windowNode(300, 100, 0, 0, true));
    before.record({ id: 1, key: 'a', ts: 150, v: 2 });
    const h = before.restoredAs(windowNode(300, 100, 0, 0, false));
    h.record({ id: 2, key: 'a', ts: 160, v: 5 });
    h.advance(Number.MAX_SAFE_INTEGER);
    expect(canonical(h.out)).toEqual(['dead letter', 'dead letter', 'dead letter', 'dead letter']);
    // nothing was lost: the pane is still there for a job given its merge back
    expect(h.lists().a).toEqual([[100, 200, 2]]);
  });

  it('keep one entry per pane, and an undone record leaves the pane as it was', () => {
    const h = new Harness(windowNode(400, 100, 0, 0, true));
    h.record({ id: 1, key: 'a', ts: 110, v: 1 });
    h.record({ id: 2, key: 'a', ts: 120, v: 2 });
    h.record({ id: 3, key: 'a', ts: 130, v: 4, fail: 'after' });
    h.record({ id: 4, key: 'a', ts: 330, v: 8, fail: 'after' });
    expect(h.lists().a).toEqual([[100, 200, 3]]);
    // the windows' end timers, as per window: [−200,200) … [100,500)
    expect(h.timers.toJSON().map((t) => t[4])).toEqual([199, 299, 399, 499]);
  });
});
