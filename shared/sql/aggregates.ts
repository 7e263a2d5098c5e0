/**
 * Aggregate functions as accumulators that are plain JSON (they live in keyed state) and merge
 * (session windows merge their accumulators). NULL inputs are skipped, as SQL says; an aggregate
 * over no non-NULL input is NULL, except COUNT, which is 0.
 */
import type { ExprType, Row } from './expressions.js';

export type AggKind = 'COUNT' | 'COUNT_DISTINCT' | 'SUM' | 'MIN' | 'MAX' | 'AVG';

export const AGGREGATES = ['COUNT', 'SUM', 'MIN', 'MAX', 'AVG'];

export interface AggSlot {
  readonly kind: AggKind;
  /** the argument; undefined for COUNT(*) */
  readonly arg: ((row: Row) => unknown) | undefined;
  readonly type: ExprType;
}

type Acc = unknown;

export function initAcc(kind: AggKind): Acc {
  switch (kind) {
    case 'COUNT':
      return 0;
    case 'COUNT_DISTINCT':
      return {} as Record<string, number>;
    case 'SUM':
    case 'AVG':
      return [0, 0];
    case 'MIN':
    case 'MAX':
      return null;
  }
}

export function addAcc(slot: AggSlot, acc: Acc, row: Row): Acc {
  const v = slot.arg ? slot.arg(row) : 1;
  if (v === null || v === undefined) return acc;
  switch (slot.kind) {
    case 'COUNT':
      return (acc as number) + 1;
    case 'COUNT_DISTINCT': {
      const k = JSON.stringify(v);
      const m = acc as Record<string, number>;
      return { ...m, [k]: (m[k] ?? 0) + 1 };
    }
    case 'SUM':
    case 'AVG': {
      const [s, n] = acc as [number, number];
      return [checkedSum(slot, s + Number(v)), n + 1];
    }
    case 'MIN':
      return acc === null || (v as number) < (acc as number) ? v : acc;
    case 'MAX':
      return acc === null || (v as number) > (acc as number) ? v : acc;
  }
}

/**
 * A sum the record that makes it cannot leave in state: not finite (JSON state would restore it as
 * null), or for a BIGINT SUM beyond ±(2^53 − 1), where it silently loses digits. The record fails
 * (a dead letter) and the sum stays as it was.
 */
function checkedSum(slot: AggSlot, sum: number): number {
  if (!Number.isFinite(sum)) throw new RangeError(`${slot.kind}: the sum overflows to ${sum}`);
  if (slot.kind === 'SUM' && slot.type === 'BIGINT' && Math.abs(sum) > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`SUM: the BIGINT sum ${sum} is beyond ±(2^53 − 1), where it would lose digits`);
  }
  return sum;
}

/** Two windows' accumulators as one (a session joining two, sliding panes at a firing); sums checked as an add's. */
export function mergeAcc(slot: AggSlot, a: Acc, b: Acc): Acc {
  switch (slot.kind) {
    case 'COUNT':
      return (a as number) + (b as number);
    case 'COUNT_DISTINCT': {
      const out = { ...(a as Record<string, number>) };
      for (const [k, n] of Object.entries(b as Record<string, number>)) out[k] = (out[k] ?? 0) + n;
      return out;
    }
    case 'SUM':
    case 'AVG': {
      const [s1, n1] = a as [number, number];
      const [s2, n2] = b as [number, number];
      return [checkedSum(slot, s1 + s2), n1 + n2];
    }
    case 'MIN':
      return a === null ? b : b === null ? a : (b as number) < (a as number) ? b : a;
    case 'MAX':
      return a === null ? b : b === null ? a : (b as number) > (a as number) ? b : a;
  }
}

export function resultOf(kind: AggKind, acc: Acc): unknown {
  switch (kind) {
    case 'COUNT':
      return acc;
    case 'COUNT_DISTINCT':
      return Object.keys(acc as Record<string, number>).length;
    case 'SUM': {
      const [s, n] = acc as [number, number];
      return n === 0 ? null : s;
    }
    case 'AVG': {
      const [s, n] = acc as [number, number];
      return n === 0 ? null : s / n;
    }
    case 'MIN':
    case 'MAX':
      return acc;
  }
}

export function resultType(slot: AggSlot): ExprType {
  switch (slot.kind) {
    case 'COUNT':
    case 'COUNT_DISTINCT':
      return 'BIGINT';
    case 'AVG':
      return 'DOUBLE';
    default:
      return slot.type;
  }
}

/** An AggregateFunction over all the slots of a query (an array of accumulators). */
export function multiAggregate(slots: readonly AggSlot[]) {
  return {
    createAccumulator: (): Acc[] => slots.map((s) => initAcc(s.kind)),
    add: (row: Row, acc: Acc[]): Acc[] => slots.map((s, i) => addAcc(s, acc[i], row)),
    getResult: (acc: Acc[]): unknown[] => slots.map((s, i) => resultOf(s.kind, acc[i])),
    merge: (a: Acc[], b: Acc[]): Acc[] => slots.map((s, i) => mergeAcc(s, a[i], b[i])),
    isEmpty: (_acc: Acc[]): boolean => false,
  };
}

/** A change of an updating input: +1 adds the row, -1 retracts it. */
export interface Retractable {
  readonly r: 1 | -1 | number;
  readonly row: Row;
}

type Counts = Record<string, number>;

function bump(m: Counts, key: string, by: number): Counts {
  const out = { ...m };
  const n = (out[key] ?? 0) + by;
  if (n === 0) delete out[key];
  else out[key] = n;
  return out;
}

/**
 * Aggregates over an updating input (a subquery with a non-windowed GROUP BY): every input is an
 * addition or a retraction of a row. MIN and MAX keep a count per value so a retracted extreme gives
 * way to the next; the last accumulator counts the group's rows, so a group whose rows were all
 * retracted is known to be empty.
 */
export function retractingAggregate(slots: readonly AggSlot[]) {
  const n = slots.length;
  return {
    createAccumulator: (): Acc[] => [
      ...slots.map((s) => (s.kind === 'MIN' || s.kind === 'MAX' || s.kind === 'COUNT_DISTINCT' ? ({} as Counts) : initAcc(s.kind))),
      0,
    ],
    add: (m: Retractable, acc: Acc[]): Acc[] => [
      ...slots.map((s, i) => {
        const v = s.arg ? s.arg(m.row) : 1;
        if (v === null || v === undefined) return acc[i];
        switch (s.kind) {
          case 'COUNT':
            return (acc[i] as number) + m.r;
          case 'SUM':
          case 'AVG': {
            const [sum, k] = acc[i] as [number, number];
            return [checkedSum(s, sum + m.r * Number(v)), k + m.r];
          }
          default:
            return bump(acc[i] as Counts, JSON.stringify(v), m.r);
        }
      }),
      (acc[n] as number) + m.r,
    ],
    getResult: (acc: Acc[]): unknown[] =>
      slots.map((s, i) => {
        if (s.kind === 'MIN' || s.kind === 'MAX') {
          const values = Object.keys(acc[i] as Counts).map((k) => JSON.parse(k) as number);
          if (!values.length) return null;
          return values.reduce((a, b) => (s.kind === 'MIN' ? (b < a ? b : a) : b > a ? b : a));
        }
        return resultOf(s.kind, acc[i]);
      }),
    isEmpty: (acc: Acc[]): boolean => (acc[n] as number) <= 0,
  };
}
