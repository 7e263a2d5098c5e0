/**
 * The window operator compiled for the chain: per key, a list of its windows ([start, end,
 * accumulator or elements], sorted by start) in one value state, replaced whole when it changes so
 * that an undone record leaves the stored list as it was — but for a tumbling window's accumulator,
 * replaced in place with a note for the undo (`changedInPlace`); an event-time timer at each
 * window's last instant fires it (and, with allowed lateness, another purges it). A sliding window
 * that can be kept on per-slide panes is kept on them instead (sliding-panes.ts).
 */
import type { WindowNode } from '../api/graph.js';
import type { ValueStateDescriptor } from '../api/state.js';
import { jsonSerializer } from '../api/serializers.js';
import { windowListSerializer } from './window-list-serializer.js';
import { jsonValueProblem } from '../util/encodable-values.js';
import { assignWindows, type TimeWindow } from '../api/windows.js';
import { keyFromString } from '../plan/key-groups.js';
import type { OperatorEnv, Push, RecordMeta } from './operator-context.js';
import { compileSlidingPanes, slidesOnPanes } from './sliding-panes.js';
import { byWindow, eventTime, FiringMeta, keptAfter, mod, SharedBounds, WindowResultMeta, type WindowParts, type Windows } from './window-parts.js';
import { UsageError } from '../util/errors.js';

/** The value state a window operator keeps its list in (registered as replaced whole). */
export const windowStateDescriptor = (node: WindowNode): ValueStateDescriptor<Windows> => ({ name: node.state[0]!.name, kind: 'value', serializer: windowListSerializer() });

/**
 * A copy of a stored accumulator for a user function to change as it likes: a plain object or array
 * of primitives copied shallowly (an aggregate's usual one), any other object through the JSON
 * serializer — the window state's encoding, so the copy is what a restore would give; a primitive
 * as it is.
 */
export function ownCopy(x: unknown): unknown {
  if (typeof x !== 'object' || x === null) return x;
  if (Array.isArray(x)) return x.every(primitive) ? x.slice() : viaJson(x);
  if (x.constructor === Object) {
    for (const k in x) if (!primitive((x as Record<string, unknown>)[k])) return viaJson(x);
    return { ...x };
  }
  return viaJson(x);
}

const primitive = (v: unknown): boolean => typeof v !== 'object' || v === null;
const json = jsonSerializer<unknown>();
const viaJson = (x: unknown): unknown => json.decode(json.encode(x));

export function compileWindow(node: WindowNode, next: Push, side: Map<string, Push>, env: OperatorEnv): Push {
  const { state, timers, clock } = env;
  const opId = node.id;
  const a = node.assigner;
  const lateness = node.allowedLatenessMs;
  const f = node.function;
  // per key: [start, end, accumulator or elements][], sorted by start
  const d = windowStateDescriptor(node);
  const lateOut = node.lateTag ? side.get(node.lateTag) : undefined;

  /** emits a window's result with `out` as its meta (the window's last instant is its timestamp) */
  const emit = (out: RecordMeta, w: TimeWindow, acc: unknown) => {
    const key = keyFromString(out.key!);
    if (f.type === 'process') {
      // a copy of the list: a function that sorts or empties its elements (a cast away from their
      // `readonly`) leaves the window's kept ones as they are for a late record's firing
      f.fn.process(key, w, (acc as unknown[]).slice(), { collect: (v) => next(v, out) });
      return;
    }
    const value = f.type === 'aggregate' ? f.aggregate.getResult(acc) : acc;
    next(node.result ? node.result(key, w, value) : { key, window: w, value }, out);
  };
  // an accumulator or a reduced value the window's JSON state cannot write fails the record that
  // makes it (a dead letter, its effects undone), not every later checkpoint; a Set kept in an
  // accumulator would otherwise come back from a restore as {}. (A process window's elements came
  // through the exchange's MessagePack, which refuses the same values.)
  const storable = <T>(x: T, what: string): T => {
    const why = jsonValueProblem(x);
    if (why !== undefined) throw new UsageError(`window ${opId}`, what, `gave a value the window's state cannot keep: ${why}`);
    return x;
  };
  // add, merge and reduce are given copies of the accumulators (reduced values) the state holds: a
  // function that changes one in place and returns it, as Flink allows, would otherwise change the
  // state's own object — which a failed record's undo puts back as it is, and which a pane's later
  // windows merge again
  const add = (acc: unknown, v: unknown): unknown => {
    switch (f.type) {
      case 'reduce':
        return storable(acc === undefined ? v : f.reduce(ownCopy(acc), v), 'reduce');
      case 'aggregate':
        return storable(f.aggregate.add(v, acc === undefined ? f.aggregate.createAccumulator() : ownCopy(acc)), 'aggregate.add');
      case 'process':
        return [...((acc as unknown[] | undefined) ?? []), v];
    }
  };
  const merge = (x: unknown, y: unknown): unknown => {
    switch (f.type) {
      case 'reduce':
        return storable(f.reduce(ownCopy(x), ownCopy(y)), 'reduce');
      case 'aggregate':
        return storable(f.aggregate.merge!(ownCopy(x), ownCopy(y)), 'aggregate.merge');
      case 'process':
        return [...(x as unknown[]), ...(y as unknown[])];
    }
  };
  // a window the watermark has passed fires at once (late but allowed) and not again: its end's
  // timer would be due at the next watermark and fire it a second time (Flink's trigger fires once)
  // each timer keeps the key's state entry, which its firing reads without a lookup. `isNew`: the
  // window was not in the key's list, so without lateness the timer at its end is not registered
  // either (windows of one size end at distinct times; a fired window leaves the list, and a record
  // for it comes too late) — the index need not look for it. With lateness an earlier window's
  // purge timer can fall on that time.
  const schedule = (key: string, kg: number, end: number, wm: number, isNew = false) => {
    const e = state.current(opId, key, kg);
    if (end - 1 > wm) {
      if (isNew && lateness === 0) timers.registerNew('event-time', opId, key, kg, end - 1, e);
      else timers.register('event-time', opId, key, kg, end - 1, e);
    }
    if (lateness > 0) timers.register('event-time', opId, key, kg, end - 1 + lateness, e);
  };
  const unschedule = (key: string, end: number) => {
    timers.remove('event-time', opId, key, end - 1);
    if (lateness > 0) timers.remove('event-time', opId, key, end - 1 + lateness);
  };
  const late = (v: unknown, m: RecordMeta, ts: number, wm: number) => {
    // no window took the record: it is late (as Flink decides it: only when every window skipped it)
    if (ts + lateness <= wm) {
      if (lateOut) lateOut(v, m);
      else env.dropLate();
    }
  };
  if (slidesOnPanes(node)) return compileSlidingPanes(node, env, d, { emit, add, merge, late } satisfies WindowParts);

  // per-slide panes (sliding-panes.ts) in state this path would fire as whole windows: refused
  // loudly (the record or timer goes to the dead letters) rather than giving wrong results
  const wholeSize = a.kind === 'sliding' ? a.sizeMs : undefined;
  const refusePanes = (list: Windows) => {
    for (let i = 0; i < list.length; i++) {
      if (list[i]![1] - list[i]![0] !== wholeSize) {
        throw new UsageError(`window ${opId}`, 'aggregate.merge', 'is missing, but the state holds per-slide panes, kept while the aggregate had one: give it back its `merge` (or start from empty state)');
      }
    }
  };
  /** the last instant a window can still receive records */
  const keptUntil = (e: Windows[number]) => e[1] - 1 + lateness;
  const firing = new FiringMeta(opId);
  env.onTimer(opId, (t) => {
    const list = state.read(opId, t.key, t.keyGroup, d) as Windows | undefined;
    if (list === undefined) return;
    if (wholeSize !== undefined) refusePanes(list);
    const time = t.time;
    for (let i = 0; i < list.length; i++) {
      const e = list[i]!;
      const end = e[1];
      if (end - 1 === time) {
        firing.timestamp = time;
        firing.key = t.key;
        firing.keyGroup = t.keyGroup;
        emit(firing, { start: e[0], end }, e[2]);
      }
    }
    // purged once a window can no longer receive records; nothing purged (a window fired that
    // allowed lateness keeps): the stored list stays, not dirtied
    const rest = keptAfter(list, keptUntil, time);
    if (rest !== list) state.write(opId, t.key, t.keyGroup, d, rest);
  });

  if (a.kind === 'tumbling') {
    // one window per record
    const { sizeMs, offsetMs } = a;
    const bounds = new SharedBounds();
    return (v, m) => {
      const ts = eventTime(m, opId);
      const wm = clock.watermark();
      const start = ts - mod(ts - offsetMs, sizeMs);
      const end = start + sizeMs;
      if (end - 1 + lateness <= wm) return late(v, m, ts, wm); // the window is gone
      const key = m.key!;
      const old = state.read(opId, key, m.keyGroup, d) as Windows | undefined;
      let at = -1;
      if (old) {
        for (let j = 0; j < old.length; j++) {
          if (old[j]![0] === start && old[j]![1] === end) {
            at = j;
            break;
          }
        }
      }
      let list: Windows;
      let e: Windows[number];
      if (at >= 0) {
        // the window's accumulator is replaced in the stored list, noted for the record's undo: no
        // new list and entry per record (they would live until the key's next record, long enough
        // to be promoted and collected as old garbage)
        e = old![at]!;
        const acc = add(e[2], v);
        state.changedInPlace(e, 2, e[2]);
        e[2] = acc;
        list = old!;
        // the window already has its timer: without lateness nothing fired or removed it (it would be gone)
        if (lateness > 0) schedule(key, m.keyGroup, end, wm);
      } else {
        // a new list: an undone record leaves the stored one as it was
        e = bounds.entry(start, end, add(undefined, v));
        list = old ? [...old, e] : [e];
        if (list.length > 1) list.sort(byWindow);
        schedule(key, m.keyGroup, end, wm, true);
      }
      state.write(opId, key, m.keyGroup, d, list);
      // a late-but-allowed record updates a window that already fired: fire it again
      if (end - 1 <= wm) emit(new WindowResultMeta(m, end - 1), { start, end }, e[2]);
    };
  }

  if (a.kind === 'sliding') {
    // the record's windows start at `last`, `last - slide`, … (all of one size): merged into the
    // key's list (sorted by start) in one pass, which keeps it sorted
    const { sizeMs, slideMs, offsetMs } = a;
    return (v, m) => {
      const ts = eventTime(m, opId);
      const wm = clock.watermark();
      const last = ts - mod(ts - offsetMs, slideMs);
      // the windows not gone yet: an earlier start is gone sooner, so they are the latest `n`
      let n = 0;
      for (let s = last; s > ts - sizeMs && s + sizeMs - 1 + lateness > wm; s -= slideMs) n++;
      if (n === 0) return late(v, m, ts, wm);
      const key = m.key!;
      const old = state.read(opId, key, m.keyGroup, d) as Windows | undefined;
      if (old) refusePanes(old);
      const list: Windows = [];
      let i = 0;
      const o = old ?? [];
      for (let k = n - 1; k >= 0; k--) {
        const start = last - k * slideMs;
        const end = start + sizeMs;
        while (i < o.length && (o[i]![0] < start || (o[i]![0] === start && o[i]![1] < end))) list.push(o[i++]!);
        if (i < o.length && o[i]![0] === start && o[i]![1] === end) {
          list.push([start, end, add(o[i++]![2], v)]);
          // the window already has its timer: without lateness nothing fired or removed it (it would be gone)
          if (lateness > 0) schedule(key, m.keyGroup, end, wm);
        } else {
          list.push([start, end, add(undefined, v)]);
          schedule(key, m.keyGroup, end, wm, true);
        }
      }
      while (i < o.length) list.push(o[i++]!);
      state.write(opId, key, m.keyGroup, d, list);
      // a late-but-allowed record updates windows that already fired: fire them again, latest first
      if (last + sizeMs - 1 - (n - 1) * slideMs > wm) return;
      for (let k = 0; k < n; k++) {
        const start = last - k * slideMs;
        const end = start + sizeMs;
        if (end - 1 > wm) continue;
        const e = list.find(([st, en]) => st === start && en === end)!;
        emit(new WindowResultMeta(m, end - 1), { start, end }, e[2]);
      }
    };
  }

  return (v, m) => {
    const ts = eventTime(m, opId);
    const wm = clock.watermark();
    let list: Windows = [...((state.read(opId, m.key!, m.keyGroup, d) as Windows | undefined) ?? [])];
    const fireNow: TimeWindow[] = [];
    let changed = false;
    for (const w0 of assignWindows(a, ts)) {
      let w = w0;
      if (w.end - 1 + lateness <= wm) continue; // this window is gone
      changed = true;
      let existed = false;
      if (a.kind === 'session') {
        // merge with every session the new one overlaps
        let acc = add(undefined, v);
        const rest: typeof list = [];
        for (const [st, en, x] of list) {
          if (st < w.end && w.start < en) {
            unschedule(m.key!, en);
            acc = merge(x, acc);
            w = { start: Math.min(st, w.start), end: Math.max(en, w.end) };
          } else rest.push([st, en, x]);
        }
        list = [...rest, [w.start, w.end, acc]];
      } else {
        let i = -1;
        for (let j = 0; j < list.length; j++) {
          if (list[j]![0] === w.start && list[j]![1] === w.end) {
            i = j;
            break;
          }
        }
        existed = i >= 0;
        if (existed) list[i] = [w.start, w.end, add(list[i]![2], v)];
        else list.push([w.start, w.end, add(undefined, v)]);
      }
      // a window already in the state has its timer: without lateness nothing fired or removed it
      // (it would be gone), so adding it again would change nothing
      if (!existed || lateness > 0) schedule(m.key!, m.keyGroup, w.end, wm);
      // a late-but-allowed record updates a window that already fired: fire it again
      if (w.end - 1 <= wm) fireNow.push(w);
    }
    if (!changed) return late(v, m, ts, wm);
    if (list.length > 1) list.sort(byWindow);
    state.write(opId, m.key!, m.keyGroup, d, list);
    for (const w of fireNow) {
      const e = list.find(([st, en]) => st === w.start && en === w.end);
      if (e) emit(new WindowResultMeta(m, w.end - 1), w, e[2]);
    }
  };
}
