/**
 * What an encoding of state cannot write so that it decodes back. JSON: the check of the JSON
 * serializer. A keyed state value is encoded at the checkpoint, so a bigint or a cycle met there
 * would fail that checkpoint and every later try; a Map or a Set would be written as `{}`, its
 * entries lost. Asked at the write, the record that writes such a value fails instead (a dead
 * letter, its effects undone). `NaN` and ±Infinity (written as `null`) and `undefined` fields (left
 * out) are JSON's own, as documented, and pass. MessagePack: the same question for the state a
 * snapshot carries whole (operator list and broadcast state).
 */

const MAX_DEPTH = 64;

/** Why JSON cannot write `value`, naming where in it (`.a[2]`), or undefined when it can. */
export function jsonValueProblem(value: unknown): string | undefined {
  return problem(value, JSON_WORDS, true);
}

/**
 * Why MessagePack — the encoding of a snapshot's operator list and broadcast state, and of the
 * records between stages — would not read `value` back as written, or undefined. It carries what
 * JSON does and also NaN, ±Infinity, a Date and bytes; a bigint comes back as a number (or cannot
 * be written past 64 bits), a Map as an object with string keys, a Set as an array.
 */
export function packedValueProblem(value: unknown): string | undefined {
  return problem(value, PACKED_WORDS, false);
}

type Lost = 'bigint' | 'Map' | 'Set' | 'deep' | 'cycle';

const JSON_WORDS: Record<Lost, (v: unknown) => string> = {
  bigint: (v) => `${String(v)}n is a bigint, which JSON cannot write (keep it as a string)`,
  Map: () => 'a Map is written by JSON as {}: its entries would be lost (use mapState, or an object or array)',
  Set: () => 'a Set is written by JSON as {}: its entries would be lost (use mapState, or an object or array)',
  deep: () => `nested deeper than ${MAX_DEPTH} levels, which JSON cannot write`,
  cycle: () => 'the value holds itself here (a cycle), which JSON cannot write',
};

const PACKED_WORDS: Record<Lost, (v: unknown) => string> = {
  bigint: (v) => `${String(v)}n is a bigint, which a snapshot reads back as a number, or cannot write past 64 bits (keep it as a string)`,
  Map: () => 'a Map is read back from a snapshot as an object with string keys (use an object or an array of pairs)',
  Set: () => 'a Set is read back from a snapshot as an array (use an array)',
  deep: () => `nested deeper than ${MAX_DEPTH} levels, which a snapshot cannot write`,
  cycle: () => 'the value holds itself here (a cycle), which a snapshot cannot write',
};

function problem(value: unknown, words: Record<Lost, (v: unknown) => string>, viaToJSON: boolean): string | undefined {
  const t = typeof value;
  // the values state holds most: no walk
  if (t === 'number' || t === 'string' || t === 'boolean' || t === 'undefined' || value === null) return undefined;
  let found = walk(value, 0, viaToJSON);
  if (found === undefined) return undefined;
  // too deep: a cycle, most likely. Looked for only now, so that a value that passes pays no set
  // of the objects above it; named where the value first holds one of them
  if (found[1] === 'deep') found = cycleIn(value, '', new Set(), viaToJSON) ?? found;
  const why = words[found[1]](found[2]);
  return found[0] === '' ? why : `at ${found[0]}: ${why}`;
}

/** [path, what is lost, the value] of the first value the encoding cannot carry, or undefined */
function walk(v: unknown, depth: number, viaToJSON: boolean): [string, Lost, unknown] | undefined {
  switch (typeof v) {
    case 'bigint':
      return ['', 'bigint', v];
    case 'object': {
      if (v === null) return undefined;
      if (depth >= MAX_DEPTH) return ['', 'deep', v];
      // a Date and the like write themselves (JSON through toJSON; MessagePack carries a Date and bytes)
      if (viaToJSON ? typeof (v as { toJSON?: unknown }).toJSON === 'function' : v instanceof Date || ArrayBuffer.isView(v)) return undefined;
      if (v instanceof Map || v instanceof Set) return ['', v instanceof Map ? 'Map' : 'Set', v];
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          const e: unknown = v[i];
          if (typeof e !== 'object' && typeof e !== 'bigint') continue;
          const f = walk(e, depth + 1, viaToJSON);
          if (f) return [`[${i}]${f[0]}`, f[1], f[2]];
        }
        return undefined;
      }
      for (const k in v) {
        if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
        const e: unknown = (v as Record<string, unknown>)[k];
        if (typeof e !== 'object' && typeof e !== 'bigint') continue;
        const f = walk(e, depth + 1, viaToJSON);
        if (f) return [`.${k}${f[0]}`, f[1], f[2]];
      }
      return undefined;
    }
    default:
      // a function or a symbol: left out of an object (as undefined is), null or nil in an array
      return undefined;
  }
}

/** [path, 'cycle', object] of the first object that holds one of the objects above it, or undefined */
function cycleIn(v: unknown, path: string, above: Set<object>, viaToJSON: boolean): [string, Lost, unknown] | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  if (above.has(v)) return [path, 'cycle', v];
  if (above.size >= MAX_DEPTH || v instanceof Map || v instanceof Set) return undefined;
  if (viaToJSON ? typeof (v as { toJSON?: unknown }).toJSON === 'function' : v instanceof Date || ArrayBuffer.isView(v)) return undefined;
  above.add(v);
  const at = Array.isArray(v) ? v.map((e, i) => [`[${i}]`, e] as const) : Object.keys(v).map((k) => [`.${k}`, (v as Record<string, unknown>)[k]] as const);
  for (const [step, e] of at) {
    const f = cycleIn(e, path + step, above, viaToJSON);
    if (f) return f;
  }
  above.delete(v);
  return undefined;
}
