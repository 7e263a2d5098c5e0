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

/** A row as the merge takes it: a key and its states (none: the key is cleared). */
export interface MergedRow {
  readonly key: string;
  readonly values: Values;
}

/**
 * `d` with `rows` merged in, worked on the bytes: exactly what encodeSortedEntries writes for the
 * item's entries with the rows applied (a row with no states clears its key), with unchanged
 * entries copied and nothing decoded into objects (a checkpoint rewrites most items; objects per
 * entry kept in the cache until the next one are what the garbage collector then copies and
 * promotes). `size`: `overhead` + the merged entries' bytes as split decisions count them (per
 * entry its key's bytes + 3, per state its name's length + its bytes + 4).
 *
 * Only for the common case, else undefined (the caller merges decoded entries): an item of one
 * state name, rows setting only that state, keys ASCII (bytes and strings then sort alike; a
 * cleared key may be any: it matches no entry then), rows strictly ascending, every key within
 * [lo, hi), some entry left holding the state.
 */
export function mergeIntoEntries(d: Uint8Array, rows: readonly MergedRow[], lo: string | undefined, hi: string | undefined, overhead: number): { d: Uint8Array; size: number } | undefined {
  m.d = d;
  m.end = d.length;
  m.p = 0;
  if (readVarint() !== PACKED_FORMAT || readVarint() !== 1) return undefined;
  const nameLen = readVarint();
  if (nameLen < 0 || m.p + nameLen > m.end) return undefined;
  const nameAt = m.p;
  let name = '';
  for (let i = 0; i < nameLen; i++) {
    const c = d[m.p++]!;
    if (c >= 0x80) return undefined;
    name += String.fromCharCode(c);
  }
  const count = readVarint();
  if (count < 0) return undefined;
  // rows strictly ascending (checked as they are merged) lie in [lo, hi) when the first and last do
  if (rows.length && ((lo !== undefined && rows[0]!.key < lo) || (hi !== undefined && rows[rows.length - 1]!.key >= hi))) return undefined;
  // the entries go after room for the header, written last (its entry count is known at the end)
  const head = 2 + 3 + nameLen + 3;
  m.at = head;
  m.size = overhead;
  m.written = 0;
  m.withState = 0;
  m.read = 0;
  m.count = count;
  m.keyLen = 0;
  m.outLen = 0;
  m.nameLen = nameLen;
  m.lo = lo;
  m.hi = hi;
  let st = readOld();
  // the rows are checked as they are merged (one pass): ascending, setting only the item's state,
  // the keys written ASCII (in writeRow)
  let prev: string | undefined;
  for (let i = 0; i < rows.length && st >= 0; i++) {
    const r = rows[i]!;
    const k = r.key;
    if (prev !== undefined && !(prev < k)) return undefined;
    prev = k;
    if (!onlyState(r.values, name)) return undefined;
    while (st === 1 && compareToKey(oldKey, m.keyLen, k) < 0) {
      copyOld();
      st = readOld();
    }
    // the row replaces the old entry of its key
    if (st === 1 && compareToKey(oldKey, m.keyLen, k) === 0) st = readOld();
    const v = r.values[name];
    // cleared (a key not ASCII then matches no entry: the old keys are)
    if (v === undefined) continue;
    if (!writeRow(k, v)) return undefined;
  }
  while (st === 1) {
    copyOld();
    st = readOld();
  }
  m.d = EMPTY;
  if (st < 0 || m.p !== m.end || m.withState === 0 || m.written >= 0x200000) return undefined;
  let h = head - varintLength(m.written);
  varint(h, m.written);
  h -= nameLen;
  for (let i = 0; i < nameLen; i++) buf[h + i] = d[nameAt + i]!;
  h -= varintLength(nameLen);
  varint(h, nameLen);
  h -= 2;
  buf[h] = PACKED_FORMAT;
  buf[h + 1] = 1;
  return { d: buf.slice(h, m.at), size: m.size };
}

/**
 * mergeIntoEntries' cursor, kept at module level (a merge is synchronous: one at a time) so that its
 * steps are small functions of their own rather than closures made per call: V8 optimizes those
 * within the first few items, and an application of the table comes only every few checkpoints,
 * where the merge would otherwise run unoptimized for most of the first ones.
 */
const m = {
  /** the item's bytes, read at p up to end */
  d: EMPTY as Uint8Array,
  p: 0,
  end: 0,
  /** where the next byte goes in buf */
  at: 0,
  size: 0,
  written: 0,
  withState: 0,
  /** entries of d read, of count */
  read: 0,
  count: 0,
  nameLen: 0,
  /** the old entry under the cursor: its key in oldKey[0, keyLen), its states' bytes at [sAt, sEnd) (sBytes: their size, -1 if none) */
  keyLen: 0,
  sAt: 0,
  sEnd: 0,
  sBytes: 0,
  /** the last key written, in outKey[0, outLen) */
  outLen: 0,
  lo: undefined as string | undefined,
  hi: undefined as string | undefined,
};

/** a varint of the item at its cursor (lengths and counts: small), or -1 when it is not one */
function readVarint(): number {
  const d = m.d;
  let p = m.p;
  let n = 0;
  let mul = 1;
  for (;;) {
    if (p >= m.end || mul > 2 ** 28) {
      m.p = p;
      return -1;
    }
    const b = d[p++]!;
    n += (b & 0x7f) * mul;
    if (b < 0x80) {
      m.p = p;
      return n;
    }
    mul *= 0x80;
  }
}

/** the next old entry: 1, or 0 when there is none, or -1 when the item is not the common case */
function readOld(): number {
  if (m.read === m.count) return 0;
  m.read++;
  const shared = readVarint();
  const rest = readVarint();
  const keyLen = m.keyLen;
  if (shared < 0 || rest < 0 || shared > keyLen || m.p + rest > m.end) return -1;
  if (shared + rest > oldKey.length) oldKey = grown(oldKey, shared + rest);
  const d = m.d;
  let p = m.p;
  // ascending: the first byte that differs from the last key is greater, or the key is longer
  let order = m.read === 1 ? 1 : 0;
  for (let i = 0; i < rest; i++) {
    const c = d[p++]!;
    if (c >= 0x80) return -1;
    if (order === 0) order = shared + i >= keyLen ? 1 : Math.sign(c - oldKey[shared + i]!);
    oldKey[shared + i] = c;
  }
  m.p = p;
  if (order === 0) order = shared + rest > keyLen ? 1 : -1;
  if (order < 0) return -1;
  m.keyLen = shared + rest;
  m.sAt = p;
  const states = readVarint();
  if (states > 1 || states < 0) return -1;
  m.sBytes = -1;
  if (states === 1) {
    const n = readVarint() === 0 ? readVarint() : -1;
    if (n < 0 || m.p + n > m.end) return -1;
    m.p += n;
    m.sBytes = m.nameLen + n + 4;
  }
  m.sEnd = m.p;
  if ((m.lo !== undefined && compareToKey(oldKey, m.keyLen, m.lo) < 0) || (m.hi !== undefined && compareToKey(oldKey, m.keyLen, m.hi) >= 0)) return -1;
  return 1;
}

/** the old entry under the cursor, its key prefix-compressed against the last one written, its states copied */
function copyOld(): void {
  const len = m.keyLen;
  if (len > outKey.length) outKey = grown(outKey, len);
  let shared = 0;
  const max = Math.min(m.outLen, len);
  while (shared < max && outKey[shared] === oldKey[shared]) shared++;
  let at = varint(m.at, shared);
  at = varint(at, len - shared);
  const n = m.sEnd - m.sAt;
  room(at, len - shared + n);
  for (let i = shared; i < len; i++) {
    const c = oldKey[i]!;
    buf[at++] = c;
    outKey[i] = c;
  }
  const d = m.d;
  const sAt = m.sAt;
  for (let i = 0; i < n; i++) buf[at + i] = d[sAt + i]!;
  m.at = at + n;
  m.outLen = len;
  m.written++;
  m.size += len + 3 + Math.max(0, m.sBytes);
  if (m.sBytes >= 0) m.withState++;
}

/** whether `values` sets no state but `name` */
function onlyState(values: Values, name: string): boolean {
  for (const n in values) if (n !== name) return false;
  return true;
}

/**
 * A row's key, prefix-compressed against the last one written, and its one state; false when the
 * key is not ASCII (its prefix shared with the last key written is: only the rest is checked).
 */
function writeRow(k: string, v: Uint8Array): boolean {
  const len = k.length;
  if (len > outKey.length) outKey = grown(outKey, len);
  let shared = 0;
  const max = Math.min(m.outLen, len);
  while (shared < max && outKey[shared] === k.charCodeAt(shared)) shared++;
  let at = varint(m.at, shared);
  at = varint(at, len - shared);
  room(at, len - shared);
  for (let i = shared; i < len; i++) {
    const c = k.charCodeAt(i);
    if (c >= 0x80) return false;
    buf[at++] = c;
    outKey[i] = c;
  }
  at = varint(at, 1);
  at = varint(at, 0);
  m.at = bytes(at, v, 0);
  m.outLen = len;
  m.written++;
  m.size += len + 3 + m.nameLen + v.length + 4;
  m.withState++;
  return true;
}

/**
 * `d` of an item made from `rows` alone (no item before them): mergeIntoEntries over an item of no
 * entries named for the rows' state, so a new item's bytes come straight from the rows too, with no
 * entry object or key encoding per row (a group's first write, e.g. the table's first application).
 * Undefined outside the common case (the caller merges decoded entries, as for any item), and when
 * no row sets a state.
 */
export function entriesFromRows(rows: readonly MergedRow[], overhead: number): { d: Uint8Array; size: number } | undefined {
  // the state of the first row that sets one (a row setting another, or two, leaves the merge)
  let name: string | undefined;
  for (let i = 0; i < rows.length && name === undefined; i++) for (const n in rows[i]!.values) name ??= n;
  // the header below takes an ASCII name of one length byte; any other is the general merge's
  if (name === undefined || name.length >= 0x80) return undefined;
  for (let i = 0; i < name.length; i++) if (name.charCodeAt(i) >= 0x80) return undefined;
  const empty = new Uint8Array(name.length + 4);
  empty[0] = PACKED_FORMAT;
  empty[1] = 1;
  empty[2] = name.length;
  for (let i = 0; i < name.length; i++) empty[3 + i] = name.charCodeAt(i);
  empty[3 + name.length] = 0;
  return mergeIntoEntries(empty, rows, undefined, undefined, overhead);
}

let oldKey = new Uint8Array(64);
let outKey = new Uint8Array(64);
const grown = (a: Uint8Array, n: number) => {
  const b = new Uint8Array(Math.max(n, a.length * 2));
  b.set(a);
  return b;
};
const varintLength = (n: number) => (n < 0x80 ? 1 : n < 0x4000 ? 2 : 3);

/** ASCII key bytes against a string, in compareKeys' order (code units; ASCII bytes are code units) */
function compareToKey(kb: Uint8Array, len: number, s: string): number {
  const n = Math.min(len, s.length);
  for (let i = 0; i < n; i++) {
    const c = kb[i]! - s.charCodeAt(i);
    if (c !== 0) return c;
  }
  return len - s.length;
}
