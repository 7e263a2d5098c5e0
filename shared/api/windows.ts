/**
 * Event-time windows: assigners (tumbling, sliding, session) and the functions that turn a window's
 * contents into results. Windows fire when the watermark passes their end; records that arrive
 * later than `allowedLatenessMs` after that go to the late-data side output (or are counted and
 * dropped when there is none).
 */
import type { AggregateFunction } from './state.js';
import type { Collector, Key, OutputTag } from './types.js';

/** A window covers event times [start, end). */
export interface TimeWindow {
  readonly start: number;
  readonly end: number;
}

export type WindowAssigner =
  | { readonly kind: 'tumbling'; readonly sizeMs: number; readonly offsetMs: number }
  | { readonly kind: 'sliding'; readonly sizeMs: number; readonly slideMs: number; readonly offsetMs: number }
  | { readonly kind: 'session'; readonly gapMs: number };

export const TumblingEventTimeWindows = {
  of: (sizeMs: number, offsetMs = 0): WindowAssigner => ({ kind: 'tumbling', sizeMs, offsetMs }),
};
export const SlidingEventTimeWindows = {
  of: (sizeMs: number, slideMs: number, offsetMs = 0): WindowAssigner => ({ kind: 'sliding', sizeMs, slideMs, offsetMs }),
};
export const EventTimeSessionWindows = {
  withGap: (gapMs: number): WindowAssigner => ({ kind: 'session', gapMs }),
};

export interface WindowOptions<T> {
  /** how long after the watermark passed a window's end records are still added (and the window fires again); @default 0 */
  readonly allowedLatenessMs?: number;
  /** where records later than that go; @default none (they are counted in the `LateRecordsDropped` metric) */
  readonly lateOutput?: OutputTag<T>;
}

/** Gets all of a window's elements (they are kept in state until the window is purged). */
export interface ProcessWindowFunction<K extends Key, I, O> {
  process(key: K, window: TimeWindow, elements: readonly I[], out: Collector<O>): void;
}

/** The window's result with its key and bounds, the default output of `reduce` and `aggregate`. */
export interface WindowResult<K extends Key, R> {
  readonly key: K;
  readonly window: TimeWindow;
  readonly value: R;
}

/** @internal how a window operator computes its result */
export type WindowFunctionSpec =
  | { readonly type: 'reduce'; readonly reduce: (a: unknown, b: unknown) => unknown }
  | { readonly type: 'aggregate'; readonly aggregate: AggregateFunction<unknown, unknown, unknown> }
  | { readonly type: 'process'; readonly fn: ProcessWindowFunction<Key, unknown, unknown> };

/** The windows (start, end) an element with timestamp `ts` belongs to (session windows: its own, before merging). */
export function assignWindows(a: WindowAssigner, ts: number): TimeWindow[] {
  switch (a.kind) {
    case 'tumbling': {
      const start = ts - mod(ts - a.offsetMs, a.sizeMs);
      return [{ start, end: start + a.sizeMs }];
    }
    case 'sliding': {
      const out: TimeWindow[] = [];
      const last = ts - mod(ts - a.offsetMs, a.slideMs);
      for (let start = last; start > ts - a.sizeMs; start -= a.slideMs) out.push({ start, end: start + a.sizeMs });
      return out;
    }
    case 'session':
      return [{ start: ts, end: ts + a.gapMs }];
  }
}

const mod = (a: number, b: number) => ((a % b) + b) % b;
