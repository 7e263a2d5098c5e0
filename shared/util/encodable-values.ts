/**
 * What an encoding cannot write so that it decodes back as written, asked where a value is written
 * rather than where it is encoded (a checkpoint, a flush), so that the record that writes it fails —
 * a dead letter, its effects undone — and not every later try of the encoding.
 *
 * - JSON: the check of keyed state's JSON serializer and of staged sinks' values. A bigint or a
 *   cycle throws; a Map or a Set is written as `{}`, its entries lost. `NaN` and ±Infinity (written
 *   as `null`) and `undefined` fields (left out) are JSON's own, as documented, and pass.
 * - MessagePack: the payloads between stages and the state a snapshot carries whole (operator list
 *   and broadcast state). It carries what JSON does and also NaN, ±Infinity, a Date and bytes; a
 *   bigint comes back as a number (or cannot be written past 64 bits), a Map as an object with
 *   string keys, a Set as an array, and a cycle overflows the stack.
 */

/** Why JSON cannot write `value`, naming where in it (`.a[2]`), or undefined when it can. */
export function jsonValueProblem(value: unknown): string | undefined {
  return problem(value, JSON_CODEC);
}

/** Why MessagePack would not read `value` back as written, naming where in it, or undefined. */
export function packedValueProblem(value: unknown): string | undefined {
  return problem(value, PACKED_CODEC);
}

type Lost = 'bigint' | 'Map' | 'Set' | 'deep' | 'cycle';

interface Codec {
  readonly maxDepth: number;
  /** a value with toJSON writes itself (JSON); else only a Date and bytes are carried as they are */
  readonly viaToJSON: boolean;
  readonly words: Record<Lost, (v: unknown) => string>;
}

const JSON_CODEC: Codec = {
  maxDepth: 64,
  viaToJSON: true,
  words: {
    bigint: (v) => `${String(v)}n is a bigint, which JSON cannot write (keep it as a string)`,
    Map: () => 'a Map is written by JSON as {}: its entries would be lost (use mapState, or an object or array)',
    Set: () => 'a Set is written by JSON as {}: its entries would be lost (use mapState, or an object or array)',
    deep: () => 'nested deeper than 64 levels, which JSON cannot write',
    cycle: () => 'the value holds itself here (a cycle), which JSON cannot write',
  },
};

// deeper than the fast writer's 64 levels is msgpackr's, which carries it
const PACKED_CODEC: Codec = {
  maxDepth: 512,
  viaToJSON: false,
  words: {
    bigint: (v) => `${String(v)}n is a bigint, which MessagePack reads back as a number, or cannot write past 64 bits (keep it as a string)`,
    Map: () => 'a Map is read back from MessagePack as an object with string keys (use an object or an array of pairs)',
    Set: () => 'a Set is read back from MessagePack as an array (use an array)',
    deep: () => 'nested deeper than 512 levels, the limit of a payload or snapshot',
    cycle: () => 'the value holds itself here (a cycle), which MessagePack cannot write',
  },
};

function problem(value: unknown, codec: Codec): string | undefined {
  const t = typeof value;
  // the values state holds most: no walk
  if (t === 'number' || t === 'string' || t === 'boolean' || t === 'undefined' || value === null) return undefined;
  let found = walk(value, 0, codec);
  if (found === undefined) return undefined;
  // too deep: a cycle, most likely. Looked for only now, so that a value that passes pays no set
  // of the objects above it; named where the value first holds one of them
  if (found[1] === 'deep') found = cycleIn(value, '', new Set(), codec) ?? found;
  const why = codec.words[found[1]](found[2]);
  return found[0] === '' ? why : `at ${found[0]}: ${why}`;
}

/** [path, what is lost, the value] of the first value the encoding cannot carry, or undefined */
function walk(v: unknown, depth: number, codec: Codec): [string, Lost, unknown] | undefined {
  switch (typeof v) {
    case 'bigint':
      return ['', 'bigint', v];
    case 'object': {
      if (v === null) return undefined;
      if (depth >= codec.maxDepth) return ['', 'deep', v];
      if (writesItself(v, codec)) return undefined;
      if (v instanceof Map || v instanceof Set) return ['', v instanceof Map ? 'Map' : 'Set', v];
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          const e: unknown = v[i];
          if (typeof e !== 'object' && typeof e !== 'bigint') continue;
          const f = walk(e, depth + 1, codec);
          if (f) return [`[${i}]${f[0]}`, f[1], f[2]];
        }
        return undefined;
      }
      for (const k in v) {
        if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
        const e: unknown = (v as Record<string, unknown>)[k];
        if (typeof e !== 'object' && typeof e !== 'bigint') continue;
        const f = walk(e, depth + 1, codec);
        if (f) return [`.${k}${f[0]}`, f[1], f[2]];
      }
      return undefined;
    }
    default:
      // a function or a symbol: left out of an object (as undefined is), null or nil in an array
      return undefined;
  }
}

/** A Date and the like: JSON calls their toJSON; MessagePack carries a Date and bytes as they are. */
function writesItself(v: object, codec: Codec): boolean {
  return codec.viaToJSON ? typeof (v as { toJSON?: unknown }).toJSON === 'function' : v instanceof Date || ArrayBuffer.isView(v);
}

/** [path, 'cycle', object] of the first object that holds one of the objects above it, or undefined */
function cycleIn(v: unknown, path: string, above: Set<object>, codec: Codec): [string, Lost, unknown] | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  if (above.has(v)) return [path, 'cycle', v];
  if (above.size >= codec.maxDepth || v instanceof Map || v instanceof Set) return undefined;
  if (writesItself(v, codec)) return undefined;
  above.add(v);
  const at = Array.isArray(v) ? v.map((e, i) => [`[${i}]`, e] as const) : Object.keys(v).map((k) => [`.${k}`, (v as Record<string, unknown>)[k]] as const);
  for (const [step, e] of at) {
    const f = cycleIn(e, path + step, above, codec);
    if (f) return f;
  }
  above.delete(v);
  return undefined;
}
