/**
 * What JSON cannot write so that it decodes back: the check of the JSON serializer. A keyed state
 * value is encoded at the checkpoint, so a bigint or a cycle met there would fail that checkpoint
 * and every later try; a Map or a Set would be written as `{}`, its entries lost. Asked at the
 * write, the record that writes such a value fails instead (a dead letter, its effects undone).
 * `NaN` and ±Infinity (written as `null`) and `undefined` fields (left out) are JSON's own, as
 * documented, and pass.
 */

const MAX_DEPTH = 64;

/** Why JSON cannot write `value`, naming where in it (`.a[2]`), or undefined when it can. */
export function jsonValueProblem(value: unknown): string | undefined {
  const t = typeof value;
  // the values state holds most: no walk
  if (t === 'number' || t === 'string' || t === 'boolean' || t === 'undefined' || value === null) return undefined;
  const found = walk(value, 0);
  return found === undefined ? undefined : found[0] === '' ? found[1] : `at ${found[0]}: ${found[1]}`;
}

/** [path, why] of the first value JSON cannot write, or undefined */
function walk(v: unknown, depth: number): [string, string] | undefined {
  switch (typeof v) {
    case 'bigint':
      return ['', `${String(v)}n is a bigint, which JSON cannot write (keep it as a string)`];
    case 'object': {
      if (v === null) return undefined;
      if (depth >= MAX_DEPTH) return ['', `nested deeper than ${MAX_DEPTH} levels (or a cycle), which JSON cannot write`];
      // a Date and the like write themselves
      if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return undefined;
      if (v instanceof Map || v instanceof Set) return ['', `a ${v instanceof Map ? 'Map' : 'Set'} is written by JSON as {}: its entries would be lost (use mapState, or an object or array)`];
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          const e: unknown = v[i];
          if (typeof e !== 'object' && typeof e !== 'bigint') continue;
          const f = walk(e, depth + 1);
          if (f) return [`[${i}]${f[0]}`, f[1]];
        }
        return undefined;
      }
      for (const k in v) {
        if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
        const e: unknown = (v as Record<string, unknown>)[k];
        if (typeof e !== 'object' && typeof e !== 'bigint') continue;
        const f = walk(e, depth + 1);
        if (f) return [`.${k}${f[0]}`, f[1]];
      }
      return undefined;
    }
    default:
      // a function or a symbol: left out of an object by JSON (as undefined is), null in an array
      return undefined;
  }
}
