/**
 * What an upsert sink can write to DynamoDB, checked before a value is buffered. A write DynamoDB
 * (or its document client) refuses would fail the batch that flushes it, again at every retry: the
 * record that made it must fail instead, as a dead letter naming the field and why.
 *
 * DynamoDB's documented limits (Constraints; Supported data types; Item sizes and formats): a
 * partition key of 1 to 2048 bytes, numbers from 1E-130 to 9.99…E+125 in magnitude (or 0), no empty
 * sets, attribute names of at least one character, an item of at most 400 KB counted as the UTF-8
 * of names and values (numbers about one byte per two significant digits plus one, lists and maps
 * 3 bytes plus one per element), at most 32 levels of nesting. The document client refuses NaN,
 * ±Infinity and numbers beyond ±(2^53 − 1), which it cannot write without losing digits.
 */
import { ENGINE_ATTRIBUTE_PREFIX } from '../api/sinks.js';
import { isWellFormed } from '../util/well-formed.js';

export const MAX_KEY_BYTES = 2048;
export const MAX_ITEM_BYTES = 400 * 1024;
const MAX_DEPTH = 32;
const MIN_MAGNITUDE = 1e-130;
/** the engine's version attributes on every row (names and values), rounded up */
const ENGINE_BYTES = 96;

/** A refused upsert: the field (`key`, or `item.a[2].b`) and why. */
export interface UpsertProblem {
  readonly path: string;
  readonly reason: string;
}

// the failure of the walk in progress: its reason, and the path segments added on the way out
let reason = '';
let segments: string[] = [];

function refuse(why: string): number {
  reason = why;
  segments = [];
  return -1;
}

function stringSize(s: string): number {
  if (!isWellFormed(s)) return refuse(`the string ${JSON.stringify(s.slice(0, 40))} holds half of a surrogate pair, which UTF-8 cannot carry`);
  return utf8Bytes(s);
}

/** one byte per two significant digits of a number's decimal form (`String(n)`), plus one */
export function digitsSize(decimal: string): number {
  let first = -1;
  let last = -1;
  let dot = -1;
  for (let i = 0; i < decimal.length; i++) {
    const c = decimal.charCodeAt(i);
    if (c === 101 /* e */) break;
    if (c === 46 /* . */) dot = i;
    else if (c >= 49 && c <= 57 /* 1-9 */) {
      if (first < 0) first = i;
      last = i;
    }
  }
  const significant = first < 0 ? 0 : last - first + 1 - (dot > first && dot < last ? 1 : 0);
  return Math.ceil(significant / 2) + 1;
}

/** UTF-8 bytes of a string: counted in JS for short ASCII strings (most names and values), natively otherwise */
function utf8Bytes(s: string): number {
  if (s.length > 32) return Buffer.byteLength(s, 'utf8');
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 0x80) return Buffer.byteLength(s, 'utf8');
  return s.length;
}

function numberSize(n: number): number {
  if (!Number.isFinite(n)) return refuse(`${String(n)} is not a number DynamoDB stores`);
  const m = Math.abs(n);
  // beyond 2^53 − 1 lies DynamoDB's greatest number too (9.99…E+125)
  if (m > Number.MAX_SAFE_INTEGER) return refuse(`${String(n)} is beyond ±(2^53 − 1): it would lose digits on the way to DynamoDB (write it as a string or a bigint)`);
  if (m !== 0 && m < MIN_MAGNITUDE) return refuse(`${String(n)} is smaller in magnitude than DynamoDB's least number, 1E-130`);
  return m < 100 && Number.isInteger(m) ? 2 : digitsSize(String(m));
}

function bigintSize(n: bigint): number {
  const digits = (n < 0n ? -n : n).toString();
  const significant = digits.replace(/0+$/, '');
  if (significant.length > 38) return refuse(`${digits} has more than 38 significant digits, DynamoDB's precision`);
  if (n !== 0n && digits.length > 126) return refuse(`${digits} is beyond DynamoDB's greatest number, 9.99…E+125`);
  return Math.ceil(Math.max(significant.length, 1) / 2) + 1;
}

/** The size of a value as DynamoDB counts it (its name's bytes apart), or −1 (see `reason`). */
function valueSize(v: unknown, depth: number): number {
  switch (typeof v) {
    case 'string':
      return stringSize(v);
    case 'number':
      return numberSize(v);
    case 'boolean':
      return 1;
    case 'bigint':
      return bigintSize(v);
    case 'object':
      break;
    default:
      return refuse(`a ${typeof v} is not a value DynamoDB stores`);
  }
  if (v === null) return 1;
  if (ArrayBuffer.isView(v)) return v.byteLength;
  if (depth >= MAX_DEPTH) return refuse(`nested deeper than ${MAX_DEPTH} levels, DynamoDB's limit (or a cycle)`);
  if (v instanceof Set) return setSize(v);
  let size = 3;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const e: unknown = v[i];
      if (e === undefined) continue; // left out of the list
      const n = valueSize(e, depth + 1);
      if (n < 0) return segments.push(`[${i}]`), -1;
      size += n + 1;
    }
    return size;
  }
  const proto: unknown = Object.getPrototypeOf(v);
  if (!(v instanceof Map) && proto !== Object.prototype && proto !== null && Object.keys(v).length === 0) {
    // the document client writes a class instance as the map of its own fields: a Date would be {}
    const name = (v as { constructor?: { name?: unknown } }).constructor?.name;
    return refuse(`a ${typeof name === 'string' && name ? name : 'class instance'} has no fields of its own and would be written as an empty map: convert it (a Date to its ISO string or epoch milliseconds)`);
  }
  const entries: Iterable<[unknown, unknown]> = v instanceof Map ? v : Object.entries(v);
  for (const [k, e] of entries) {
    if (e === undefined) continue; // left out of the map
    const name = String(k);
    const n = isWellFormed(name) ? valueSize(e, depth + 1) : refuse(`the name ${JSON.stringify(name.slice(0, 40))} holds half of a surrogate pair, which UTF-8 cannot carry`);
    if (n < 0) return segments.push(`.${name}`), -1;
    size += utf8Bytes(name) + n + 1;
  }
  return size;
}

/** A set becomes a string, number or binary set: not empty, and all of one kind. */
function setSize(s: Set<unknown>): number {
  if (s.size === 0) return refuse('an empty set: DynamoDB stores no empty sets (leave the field out, or write a list)');
  let kind: string | undefined;
  let size = 0;
  for (const e of s) {
    const k = ArrayBuffer.isView(e) ? 'binary' : typeof e === 'bigint' ? 'number' : typeof e;
    if (k !== 'string' && k !== 'number' && k !== 'binary') return refuse(`a set of ${k}: DynamoDB's sets hold strings, numbers or binary values`);
    if (kind !== undefined && k !== kind) return refuse(`a set of both ${kind} and ${k} values: DynamoDB's sets hold one kind`);
    kind = k;
    const n = valueSize(e, MAX_DEPTH - 1);
    if (n < 0) return -1;
    size += n;
  }
  return size;
}

/**
 * Why an upsert of `item` under `key` would be refused by DynamoDB, or undefined when it can be
 * written. Attributes left undefined are left out, and the key attribute is written from `key`, as
 * the sink writer does.
 */
export function upsertProblem(keyAttribute: string, key: unknown, item: Record<string, unknown>): UpsertProblem | undefined {
  if (typeof key !== 'string') return { path: 'key', reason: `must be a string (the table's key is one), got ${key === null ? 'null' : typeof key}` };
  if (key.length === 0) return { path: 'key', reason: 'must not be empty: DynamoDB refuses an empty key' };
  if (!isWellFormed(key)) return { path: 'key', reason: `${JSON.stringify(key.slice(0, 40))} holds half of a surrogate pair, which UTF-8 cannot carry` };
  const keyBytes = utf8Bytes(key);
  if (keyBytes > MAX_KEY_BYTES) return { path: 'key', reason: `is ${keyBytes} bytes of UTF-8, beyond DynamoDB's ${MAX_KEY_BYTES} for a partition key` };
  let size = ENGINE_BYTES + utf8Bytes(keyAttribute) + keyBytes;
  for (const name in item) {
    if (!Object.prototype.hasOwnProperty.call(item, name) || name === keyAttribute) continue;
    const v = item[name];
    if (v === undefined) continue;
    if (name.length === 0) return { path: 'item', reason: 'has an attribute with an empty name, which DynamoDB refuses' };
    if (name.startsWith(ENGINE_ATTRIBUTE_PREFIX)) return { path: `item.${name}`, reason: `names an attribute of the engine's own ("${ENGINE_ATTRIBUTE_PREFIX}…")` };
    if (!isWellFormed(name)) return { path: `item.${name}`, reason: 'the name holds half of a surrogate pair, which UTF-8 cannot carry' };
    const n = valueSize(v, 1);
    if (n < 0) {
      const path = `item.${name}${segments.reverse().join('')}`;
      segments = [];
      return { path, reason };
    }
    size += utf8Bytes(name) + n;
  }
  if (size > MAX_ITEM_BYTES) return { path: 'item', reason: `is about ${size} bytes as DynamoDB counts them, beyond its ${MAX_ITEM_BYTES} (400 KB) for an item` };
  return undefined;
}
