/**
 * Sliding windows on panes. A sliding window whose size is a whole number of slides, with an
 * aggregate that can `merge`, keeps per key one accumulator per slide (a pane, [start, start +
 * slide)) instead of one per window: a record is added to its one pane, not to size / slide
 * windows, and a window's firing merges the panes it covers (in start order, so a DOUBLE SUM or AVG
 * can differ in its last bits from adding each record to the window).
 *
 * The timers are the per-window layout's end timers (one per window end and key, registered when a
 * pane is made), so the timer index, its snapshots and a record's undo see what they saw before;
 * with allowed lateness, one purge timer per pane, when the last window that covers it is gone.
 * State written per window (entries that span a whole window) is still read: a window's firing
 * merges its whole entry with its panes, and the entry is purged as it was.
 */
import type { WindowNode } from '../api/graph.js';
import type { ValueStateDescriptor } from '../api/state.js';
import type { WindowAssigner } from '../api/windows.js';
import type { OperatorEnv, Push } from './operator-context.js';
import { eventTime, FiringMeta, keptAfter, mod, SharedBounds, WindowResultMeta, type WindowParts, type Windows } from './window-parts.js';

type Sliding = Extract<WindowAssigner, { kind: 'sliding' }>;

/** Whether the node's windows are kept on panes: sliding, a whole number (> 1) of slides, an aggregate with `merge`. */
export function slidesOnPanes(node: WindowNode): boolean {
  const a = node.assigner;
  const f = node.function;
  return a.kind === 'sliding' && a.sizeMs > a.slideMs && a.sizeMs % a.slideMs === 0 && f.type === 'aggregate' && typeof f.aggregate.merge === 'function';
}

/** what `windowAcc` returns when nothing covers the window (an accumulator may be any value) */
const NONE: unique symbol = Symbol('no window');

export function compileSlidingPanes(node: WindowNode, env: OperatorEnv, d: ValueStateDescriptor<Windows>, parts: WindowParts): Push {
  const { state, timers, clock } = env;
  const opId = node.id;
  const lateness = node.allowedLatenessMs;
  const { sizeMs, slideMs, offsetMs } = node.assigner as Sliding;
  const { emit, add, merge, late } = parts;

  /** the last instant an entry can still be read: a pane's last window's, or a whole window's own */
  const keptUntil = (e: Windows[number]): number => (e[1] - e[0] === slideMs ? e[0] + sizeMs : e[1]) - 1 + lateness;

  /** window [start, end)'s accumulator: its panes and its whole entry (per-window state), merged in list order */
  const windowAcc = (list: Windows, start: number, end: number): unknown => {
    let acc: unknown = NONE;
    for (let i = 0; i < list.length; i++) {
      const e = list[i]!;
      if (e[0] >= end) break;
      if (e[0] < start || (e[1] - e[0] !== slideMs && e[1] !== end)) continue;
      acc = acc === NONE ? e[2] : merge(acc, e[2]);
    }
    return acc;
  };

  /**
   * A new pane's timers: the end timer of each of its windows the watermark has not passed (earliest
   * first, as the per-window layout registers them; a timer already there stays) and, with allowed
   * lateness, the pane's purge timer. Each keeps the key's state entry, which its firing reads.
   */
  const schedule = (key: string, kg: number, pane: number, wm: number) => {
    const e = state.current(opId, key, kg);
    for (let end = pane + slideMs; end <= pane + sizeMs; end += slideMs) if (end - 1 > wm) timers.register('event-time', opId, key, kg, end - 1, e);
    if (lateness > 0) timers.register('event-time', opId, key, kg, pane + sizeMs - 1 + lateness, e);
  };

  const firing = new FiringMeta(opId);
  env.onTimer(opId, (t) => {
    const list = state.read(opId, t.key, t.keyGroup, d) as Windows | undefined;
    if (list === undefined) return;
    const time = t.time;
    const start = time + 1 - sizeMs;
    // a window ends here (a purge timer's time need not be a window's end)
    if (mod(start - offsetMs, slideMs) === 0) {
      const acc = windowAcc(list, start, time + 1);
      if (acc !== NONE) {
        firing.timestamp = time;
        firing.key = t.key;
        firing.keyGroup = t.keyGroup;
        emit(firing, { start, end: time + 1 }, acc);
      }
    }
    // nothing purged: the stored list stays, not dirtied
    const rest = keptAfter(list, keptUntil, time);
    if (rest !== list) state.write(opId, t.key, t.keyGroup, d, rest);
  });

  const panes = new SharedBounds();
  return (v, m) => {
    const ts = eventTime(m, opId);
    const wm = clock.watermark();
    const pane = ts - mod(ts - offsetMs, slideMs);
    const paneEnd = pane + slideMs;
    // the pane's last window (it starts with the pane) is gone: so are all the record's windows
    if (pane + sizeMs - 1 + lateness <= wm) return late(v, m, ts, wm);
    const key = m.key!;
    const kg = m.keyGroup;
    const old = state.read(opId, key, kg, d) as Windows | undefined;
    // the last entry at or before the pane (sorted by start, then end): most records go to the latest pane
    let j = old === undefined ? -1 : old.length - 1;
    while (j >= 0 && (old![j]![0] > pane || (old![j]![0] === pane && old![j]![1] > paneEnd))) j--;
    let list: Windows;
    if (j >= 0 && old![j]![0] === pane && old![j]![1] === paneEnd) {
      // the pane's accumulator is replaced in the stored list, noted for the record's undo
      const e = old![j]!;
      const acc = add(e[2], v);
      state.changedInPlace(e, 2, e[2]);
      e[2] = acc;
      list = old!;
      // the pane's timers are there: without lateness nothing fired or removed them (it would be gone)
      if (lateness > 0) schedule(key, kg, pane, wm);
    } else {
      // a new list: an undone record leaves the stored one as it was
      const e = panes.entry(pane, paneEnd, add(undefined, v));
      list = old === undefined ? [e] : [...old.slice(0, j + 1), e, ...old.slice(j + 1)];
      schedule(key, kg, pane, wm);
    }
    state.write(opId, key, kg, d, list);
    // a late-but-allowed record updates windows that already fired (the pane's first window ends
    // with it): fire them again, latest first, down to the first gone one (earlier ones are gone too)
    if (paneEnd - 1 > wm) return;
    for (let start = pane; start > pane - sizeMs; start -= slideMs) {
      const end = start + sizeMs;
      if (end - 1 > wm) continue;
      if (end - 1 + lateness <= wm) break;
      emit(new WindowResultMeta(m, end - 1), { start, end }, windowAcc(list, start, end));
    }
  };
}
