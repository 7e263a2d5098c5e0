/**
 * The key a row is partitioned and grouped by: the JSON text of its key values (GROUP BY
 * expressions, join columns), exactly as `JSON.stringify(values)` writes it — keys in state,
 * checkpoints and results read it back with `JSON.parse`. Numbers and nulls, the common key values,
 * are written by hand: `JSON.stringify` of an array costs about five times as much per row.
 */
import type { Row } from './expressions.js';

/** One value as an element of a JSON array (`undefined` as null, as the key's values are mapped). */
const element = (v: unknown): string =>
  typeof v === 'number' ? (Number.isFinite(v) ? String(v) : 'null') : v === undefined || v === null ? 'null' : (JSON.stringify(v) ?? 'null');

/** The function that keys a row by the values of `fns`. */
export function rowKeyOf(fns: ReadonlyArray<(r: Row) => unknown>): (r: Row) => string {
  if (fns.length === 1) {
    const f = fns[0]!;
    return (r) => `[${element(f(r))}]`;
  }
  return (r) => {
    let s = '[';
    for (let i = 0; i < fns.length; i++) s += (i ? ',' : '') + element(fns[i]!(r));
    return `${s}]`;
  };
}
