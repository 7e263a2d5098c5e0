/**
 * Key groups: keyed state is split into `maxParallelism` groups by a stable hash of the key, and
 * group g is written to Kinesis with an ExplicitHashKey inside g's slice of the 128-bit hash space.
 * A group therefore lands wholly in one shard, a shard owns a contiguous run of groups, and
 * resharding moves whole groups: state rows are addressed by group, so a new owner finds them.
 */

import { PlanError } from '../util/errors.js';
import { operatorError, operatorLabel, UserFunctionError, type NamedOperator } from '../util/operator-errors.js';
import { isWellFormed, loneSurrogateError } from '../util/well-formed.js';

const HASH_SPACE = 1n << 128n;

/** MurmurHash3 (x86, 32-bit) of bytes: stable across processes and versions. */
export function murmur3(bytes: Uint8Array, seed = 0): number {
  let h = seed >>> 0;
  const n = bytes.length;
  const blocks = n & ~3;
  for (let i = 0; i < blocks; i += 4) h = mixBlock(h, bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24));
  const tail = n & 3;
  let k = 0;
  if (tail >= 3) k ^= bytes[blocks + 2]! << 16;
  if (tail >= 2) k ^= bytes[blocks + 1]! << 8;
  if (tail >= 1) k ^= bytes[blocks]!;
  return finish(h, k, tail, n);
}

/**
 * MurmurHash3 (x86, 32-bit) of a string's UTF-8 bytes — `murmur3(new TextEncoder().encode(s))`,
 * bit for bit, lone surrogates included (they encode as U+FFFD) — without encoding the string:
 * keys are hashed per record. An ASCII string is hashed on its char codes, four at a time; any
 * other string byte by byte as its UTF-8 encoding would produce them.
 */
export function murmur3String(s: string, seed = 0): number {
  const n = s.length;
  let ascii = true;
  for (let i = 0; i < n; i++) {
    if (s.charCodeAt(i) > 0x7f) {
      ascii = false;
      break;
    }
  }
  let h = seed >>> 0;
  if (ascii) {
    const blocks = n & ~3;
    for (let i = 0; i < blocks; i += 4) h = mixBlock(h, s.charCodeAt(i) | (s.charCodeAt(i + 1) << 8) | (s.charCodeAt(i + 2) << 16) | (s.charCodeAt(i + 3) << 24));
    const tail = n & 3;
    let k = 0;
    if (tail >= 3) k ^= s.charCodeAt(blocks + 2) << 16;
    if (tail >= 2) k ^= s.charCodeAt(blocks + 1) << 8;
    if (tail >= 1) k ^= s.charCodeAt(blocks);
    return finish(h, k, tail, n);
  }
  // the UTF-8 bytes, gathered into little-endian 4-byte blocks as they are produced
  let k = 0;
  let shift = 0;
  let len = 0;
  for (let i = 0; i < n; i++) {
    let c = s.charCodeAt(i);
    let bytes: number; // up to 4 bytes, first in the low byte
    let count: number;
    if (c < 0x80) {
      bytes = c;
      count = 1;
    } else if (c < 0x800) {
      bytes = (0xc0 | (c >> 6)) | ((0x80 | (c & 0x3f)) << 8);
      count = 2;
    } else {
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          i++;
        } else c = 0xfffd; // a lone surrogate
      }
      if (c < 0x10000) {
        bytes = (0xe0 | (c >> 12)) | ((0x80 | ((c >> 6) & 0x3f)) << 8) | ((0x80 | (c & 0x3f)) << 16);
        count = 3;
      } else {
        bytes = (0xf0 | (c >> 18)) | ((0x80 | ((c >> 12) & 0x3f)) << 8) | ((0x80 | ((c >> 6) & 0x3f)) << 16) | ((0x80 | (c & 0x3f)) << 24);
        count = 4;
      }
    }
    len += count;
    for (let j = 0; j < count; j++, bytes >>>= 8) {
      k |= (bytes & 0xff) << shift;
      shift += 8;
      if (shift === 32) {
        h = mixBlock(h, k);
        k = 0;
        shift = 0;
      }
    }
  }
  return finish(h, k, shift >> 3, len);
}

function mixBlock(h: number, k: number): number {
  k = Math.imul(k, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** The tail block (`tail` bytes in `k`) and the finalisation, over `n` bytes in all. */
function finish(h: number, k: number, tail: number, n: number): number {
  if (tail) {
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    h ^= k;
  }
  h ^= n;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * The canonical string form of a key, used for hashing and as the state row's key. Strings stay as
 * they are (unless they start with NUL); numbers become NUL + decimal; the mapping is one to one, so
 * `keyFromString` gives the key back.
 */
export function keyString(key: string | number): string {
  if (typeof key === 'number') return `\u0000${key}`;
  return key.startsWith('\u0000') ? `\u0000s${key}` : key;
}

export function keyFromString(s: string): string | number {
  if (!s.startsWith('\u0000')) return s;
  return s[1] === 's' ? s.slice(2) : Number(s.slice(1));
}

/** The key group of a key (its canonical string): MurmurHash3 of its UTF-8 bytes, mod maxParallelism. */
export function keyGroupOf(key: string, maxParallelism: number): number {
  return murmur3String(key) % maxParallelism;
}

/** The ExplicitHashKey for records of key group `g`: the middle of g's slice of the hash space. */
export function hashKeyOfKeyGroup(g: number, maxParallelism: number): string {
  return (((2n * BigInt(g) + 1n) * HASH_SPACE) / (2n * BigInt(maxParallelism))).toString();
}

/** Key groups whose hash key falls inside a shard's range [start, end] (inclusive, decimal strings). */
export function keyGroupsOfHashRange(start: string, end: string, maxParallelism: number): number[] {
  const lo = BigInt(start);
  const hi = BigInt(end);
  const out: number[] = [];
  for (let g = 0; g < maxParallelism; g++) {
    const h = BigInt(hashKeyOfKeyGroup(g, maxParallelism));
    if (h >= lo && h <= hi) out.push(g);
  }
  return out;
}

/** The ExplicitHashKey that lands in the `i`-th of `n` evenly split shards (used for rebalance and barriers). */
export function hashKeyOfEvenShard(i: number, n: number): string {
  return (((2n * BigInt(i) + 1n) * HASH_SPACE) / (2n * BigInt(n))).toString();
}

/**
 * A key selector that names its operator when it fails: one that throws, or returns something
 * other than a string or a finite number (a field the records lack gives `undefined`), or a string
 * holding a lone surrogate.
 */
export function checkedKeySelector(op: NamedOperator & { readonly keySelector?: (value: never) => unknown }): (value: unknown) => string | number {
  const selector = op.keySelector as ((value: unknown) => unknown) | undefined;
  if (!selector) throw new PlanError(`${operatorLabel(op)}.keySelector`, 'is missing');
  return (value) => {
    let key: unknown;
    try {
      key = selector(value);
    } catch (err) {
      throw operatorError(op, err);
    }
    if (typeof key === 'string') {
      // the key's state row and timers are written as UTF-8 at the checkpoint: one such key would
      // come back another key, so it fails its record here, not every checkpoint after
      if (isWellFormed(key)) return key;
      throw new UserFunctionError(operatorLabel(op), `the key selector returned a key UTF-8 cannot carry: ${loneSurrogateError(key).message}`);
    }
    if (typeof key === 'number' && Number.isFinite(key)) return key;
    throw new UserFunctionError(operatorLabel(op), `the key selector returned ${describeValue(key)}, not a string or a finite number`);
  };
}

function describeValue(v: unknown): string {
  if (v === undefined) return 'undefined (does the field exist in the records?)';
  if (v === null) return 'null';
  if (typeof v === 'object') return `an ${Array.isArray(v) ? 'array' : 'object'} (${JSON.stringify(v).slice(0, 60)})`;
  return `${typeof v} ${String(v)}`;
}
