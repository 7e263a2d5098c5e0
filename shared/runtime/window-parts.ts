/**
 * What the window operator's ways of keeping windows share: the key's list in state, the metas of
 * a window's result, and the functions compiled from the window's node.
 */
import type { TimeWindow } from '../api/windows.js';
import { UsageError } from '../util/errors.js';
import { timerRecordId, type RecordMeta } from './operator-context.js';

/**
 * A key's windows in state: [start, end, accumulator or elements], sorted by start then end. On
 * panes (sliding-panes.ts) an entry spans one slide; a whole-window entry spans the window.
 */
export type Windows = Array<[number, number, unknown]>;

/**
 * Makes a key's new entries: the entries made for the same bounds one after another (a window's, or
 * a pane's, for every key that gets one) share the two boxed numbers of its bounds — a time is past
 * a small integer's range, so an entry with bounds of its own carries two more objects until it is
 * purged, and reads them from memory of their own at each record and firing.
 */
export class SharedBounds {
  private last: Windows[number] = [Number.NaN, Number.NaN, undefined];

  /** A new entry `[start, end, acc]`. */
  entry(start: number, end: number, acc: unknown): Windows[number] {
    let b = this.last;
    if (b[0] !== start || b[1] !== end) this.last = b = [start, end, undefined];
    // the references are copied, not the numbers
    return [b[0], b[1], acc];
  }
}

export const byWindow = (x: [number, number, unknown], y: [number, number, unknown]) => x[0] - y[0] || x[1] - y[1];

export const mod = (a: number, b: number) => ((a % b) + b) % b;

/** A record's event time, which every event-time window needs. */
export function eventTime(m: RecordMeta, opId: string): number {
  const ts = m.timestamp;
  if (ts === undefined) throw new UsageError(`window ${opId}`, 'timestamp', 'is missing: windows need event time, give the source a `timestamp` function');
  return ts;
}

/**
 * The meta of a window's result: the firing record's or timer's, at the window's last instant. The
 * source meta is only read while the result is pushed (metas are valid only during the call), and
 * its id is asked for only if a function wants `ctx.random()`.
 */
export class WindowResultMeta implements RecordMeta {
  readonly key: string | undefined;
  readonly keyGroup: number;
  readonly input: number | undefined;
  constructor(
    private readonly src: RecordMeta,
    readonly timestamp: number,
  ) {
    this.key = src.key;
    this.keyGroup = src.keyGroup;
    this.input = src.input;
  }
  get recordId(): string {
    return this.src.recordId;
  }
}

/**
 * The meta of a result fired by a timer: the timer's meta (its time is the window's last instant),
 * with a timer's id. One per operator, pointed at each firing in turn: a meta is valid
 * only during the call that received it, and a firing would otherwise make two objects.
 */
export class FiringMeta implements RecordMeta {
  timestamp = 0;
  key = '';
  keyGroup = 0;
  readonly input = undefined;
  constructor(private readonly opId: string) {}
  get recordId(): string {
    return timerRecordId(this.opId, this.key, this.timestamp);
  }
}

/**
 * What a key's list keeps after a timer at `time`: the entries still to be read (`until(e)`, the
 * last instant an entry can be read, is after `time`) — the list itself when none goes (nothing to
 * write, the key not dirtied), undefined when all go.
 */
export function keptAfter(list: Windows, until: (e: Windows[number]) => number, time: number): Windows | undefined {
  let kept = 0;
  for (let i = 0; i < list.length; i++) if (until(list[i]!) > time) kept++;
  if (kept === list.length) return list;
  return kept > 0 ? list.filter((e) => until(e) > time) : undefined;
}

/** The window function and timers of one window operator, as its ways of keeping windows use them. */
export interface WindowParts {
  /** emits a window's result with `out` as its meta (the window's last instant is its timestamp) */
  emit(out: RecordMeta, w: TimeWindow, acc: unknown): void;
  /** `acc` with `v` added (`undefined`: no accumulator yet) */
  add(acc: unknown, v: unknown): unknown;
  merge(x: unknown, y: unknown): unknown;
  /** a record no window took: to the late output, or counted as dropped, if it is late */
  late(v: unknown, m: RecordMeta, ts: number, wm: number): void;
}
