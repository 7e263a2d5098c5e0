/**
 * The packed state table's item codec: the entries (key → states) of one item as its binary
 * attribute `d`, keys sorted and prefix-compressed, state names written once per item.
 */
import { SluiceError } from '../util/errors.js';
import { ByteReader } from './varint.js';

/** the format marker of packed items (`f`, and the first byte of `d`) */
export const PACKED_FORMAT = 1;

/** a key's states: name → serialized value */
type Values = Record<string, Uint8Array>;
const utf8 = new TextEncoder();
const utf8d = new TextDecoder();

export const compareKeys = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** An entry as the codec writes and reads it: the key, its UTF-8 bytes, its states. */
export interface PackedEntry {
  readonly key: string;
  readonly kb: Uint8Array;
  readonly values: Values;
}

/**
 * `d`: format byte, state names (count, then each), entry count, then per entry (keys ascending):
 * bytes shared with the previous key, the rest of the key, the number of states, and per state its
 * name's index and its bytes. Lengths are LEB128 varints.
 */
export function encodeEntries(entries: ReadonlyMap<string, Values>): Uint8Array {
  const keys = [...entries.keys()].sort(compareKeys);
  return encodeSortedEntries(keys.map((key) => ({ key, kb: utf8.encode(key), values: entries.get(key)! })));
}

/**
 * `d` of entries already in ascending key order (`compareKeys`, each key once) whose key bytes are
 * known: what encodeEntries writes for the same entries, without sorting or encoding keys again.
 */
export function encodeSortedEntries(entries: readonly PackedEntry[]): Uint8Array {
  const names = new Map<string, number>();
  for (const e of entries) for (const n in e.values) if (!names.has(n)) names.set(n, names.size);
  // Written straight into one reused buffer: an item holds many short keys and values, for which
  // a view per key suffix, a key list per entry and a typed-array copy per value cost more than the bytes.
  let at = 0;
  at = varint(at, PACKED_FORMAT);
  at = varint(at, names.size);
  for (const n of names.keys()) at = bytes(at, utf8.encode(n), 0);
  at = varint(at, entries.length);
  let prev = EMPTY;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    const kb = e.kb;
    let shared = 0;
    const max = Math.min(prev.length, kb.length);
    while (shared < max && prev[shared] === kb[shared]) shared++;
    at = varint(at, shared);
    at = bytes(at, kb, shared);
    const values = e.values;
    let vn = 0;
    for (const _ in values) vn++;
    at = varint(at, vn);
    for (const n in values) {
      at = varint(at, names.get(n)!);
      at = bytes(at, values[n]!, 0);
    }
    prev = kb;
  }
  return buf.slice(0, at);
}

const EMPTY: Uint8Array = new Uint8Array(0);
/** the buffer every encoding reuses (encoding is synchronous); the result is a copy of what was written */
let buf = new Uint8Array(4096);

/** room for `n` more bytes after `at` */
function room(at: number, n: number): void {
  if (at + n <= buf.length) return;
  let size = buf.length * 2;
  while (size < at + n) size *= 2;
  const next = new Uint8Array(size);
  next.set(buf.subarray(0, at));
  buf = next;
}

/** an unsigned LEB128 varint (lengths and indexes: small non-negative integers) */
function varint(at: number, n: number): number {
  room(at, 10);
  while (n >= 0x80) {
    buf[at++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  buf[at++] = n;
  return at;
}

/** b from `from` on, after its length */
function bytes(at: number, b: Uint8Array, from: number): number {
  const n = b.length - from;
  at = varint(at, n);
  room(at, n);
  if (n > 32) buf.set(from ? b.subarray(from) : b, at);
  else for (let i = 0; i < n; i++) buf[at + i] = b[from + i]!;
  return at + n;
}

export function decodeEntries(d: Uint8Array): Map<string, Values> {
  const out = new Map<string, Values>();
  for (const e of decodeSortedEntries(d)) out.set(e.key, e.values);
  return out;
}

/** The entries of `d` in the order stored (ascending keys, as encodeSortedEntries wrote them), with each key's bytes. */
export function decodeSortedEntries(d: Uint8Array): PackedEntry[] {
  try {
    return readEntries(new ByteReader(d));
  } catch (err) {
    if (err instanceof RangeError) throw new SluiceError('packed state item is truncated', 'STATE_CORRUPT', false, { cause: err });
    throw err;
  }
}

function readEntries(r: ByteReader): PackedEntry[] {
  const format = r.varint();
  if (format !== PACKED_FORMAT) throw new SluiceError(`packed state item has format ${format}, this version reads ${PACKED_FORMAT}`, 'STATE_CORRUPT');
  const names: string[] = [];
  for (let i = r.varint(); i > 0; i--) names.push(utf8d.decode(r.bytes()));
  const out: PackedEntry[] = [];
  let prev = EMPTY;
  for (let i = r.varint(); i > 0; i--) {
    const shared = r.varint();
    const rest = r.bytes();
    const kb = new Uint8Array(shared + rest.length);
    kb.set(prev.subarray(0, shared));
    kb.set(rest, shared);
    const values: Values = {};
    for (let j = r.varint(); j > 0; j--) {
      const name = names[r.varint()];
      if (name === undefined) throw new SluiceError('packed state item names an unknown state', 'STATE_CORRUPT');
      values[name] = r.bytes().slice();
    }
    out.push({ key: utf8d.decode(kb), kb, values });
    prev = kb;
  }
  return out;
}
