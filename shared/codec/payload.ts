/**
 * Record payloads between stages: MessagePack (msgpackr), compact and fast, and deterministic for
 * the same value, which replay relies on (same id ⇒ same bytes).
 */
import { Packr } from 'msgpackr';

const packr = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number' });

export function encodePayload(value: unknown): Uint8Array {
  return encodePayloadFast(value) ?? packr.pack(value);
}

export function decodePayload<T = unknown>(bytes: Uint8Array): T {
  return packr.unpack(bytes) as T;
}

const range = { start: 0, end: 0 };

/**
 * Decodes the payload at bytes[start, end) without making a view of it. The same value as
 * `decodePayload(bytes.subarray(start, end))`; a malformed payload throws either way.
 *
 * Payloads of the common shapes (maps with string keys, arrays, strings, numbers, booleans, nil:
 * what `encodePayload` makes of plain JSON-like values) are read by `readFast` below; anything
 * else (binary, extensions, 32-bit lengths, malformed or truncated input) is left to msgpackr,
 * which then decides the value or the error.
 */
export function decodePayloadAt<T = unknown>(bytes: Uint8Array, start: number, end: number): T {
  if (end <= start) return decodePayload<T>(bytes.subarray(start, end));
  src = bytes;
  pos = start;
  lim = end;
  bail = false;
  const v = readValue(0);
  src = EMPTY;
  if (!bail && pos === end) return v as T;
  range.start = start;
  range.end = end;
  return packr.unpack(bytes, range) as T;
}

// ---------------------------------------------------------------------------------------------
// The fast reader. It gives exactly what msgpackr gives with the options above (`useRecords:
// false`: maps become plain objects, a `__proto__` key becomes `__proto_`; `int64AsType:
// 'number'`; no float32 rounding), or gives up (`bail`) without side effects. It makes no view,
// DataView or closure per payload, and returns property names from a small cache so that objects
// of the same shape get their keys without interning a fresh string each time.

const EMPTY = new Uint8Array(0);
let src: Uint8Array = EMPTY;
let pos = 0;
let lim = 0;
let bail = false;

/** deeper than this is left to msgpackr (the fast reader recurses) */
const MAX_DEPTH = 64;

const f64 = new Float64Array(1);
const f32 = new Float32Array(1);
const f64Bytes = new Uint8Array(f64.buffer);
const f32Bytes = new Uint8Array(f32.buffer);
/** MessagePack numbers are big-endian */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const fromCharCode = String.fromCharCode;

function readValue(depth: number): unknown {
  if (pos >= lim) return giveUp();
  const t = src[pos++]!;
  if (t < 0x80) return t; // positive fixint (0x40–0x7f are records only with useRecords)
  if (t < 0x90) return readMap(t & 0x0f, depth);
  if (t < 0xa0) return readArray(t & 0x0f, depth);
  if (t < 0xc0) return readString(t & 0x1f);
  if (t >= 0xe0) return t - 0x100; // negative fixint
  switch (t) {
    case 0xc0:
      return null;
    case 0xc2:
      return false;
    case 0xc3:
      return true;
    case 0xca:
      return pos + 4 > lim ? giveUp() : readFloat32();
    case 0xcb:
      return pos + 8 > lim ? giveUp() : readFloat64();
    case 0xcc:
      return pos + 1 > lim ? giveUp() : src[pos++]!;
    case 0xcd:
      return pos + 2 > lim ? giveUp() : readUint16();
    case 0xce:
      return pos + 4 > lim ? giveUp() : readUint32();
    case 0xcf: {
      if (pos + 8 > lim) return giveUp();
      const hi = readUint32();
      return hi * 0x100000000 + readUint32();
    }
    case 0xd0:
      return pos + 1 > lim ? giveUp() : (src[pos++]! << 24) >> 24;
    case 0xd1:
      return pos + 2 > lim ? giveUp() : (readUint16() << 16) >> 16;
    case 0xd2:
      return pos + 4 > lim ? giveUp() : readUint32() | 0;
    case 0xd3: {
      if (pos + 8 > lim) return giveUp();
      const hi = readUint32() | 0;
      return hi * 0x100000000 + readUint32();
    }
    case 0xd9:
      return pos + 1 > lim ? giveUp() : readString(src[pos++]!);
    case 0xdc:
      return pos + 2 > lim ? giveUp() : readArray(readUint16(), depth);
    case 0xde:
      return pos + 2 > lim ? giveUp() : readMap(readUint16(), depth);
    default:
      return giveUp();
  }
}

function giveUp(): undefined {
  bail = true;
  return undefined;
}

function readUint16(): number {
  const v = (src[pos]! << 8) | src[pos + 1]!;
  pos += 2;
  return v;
}

function readUint32(): number {
  const v = src[pos]! * 0x1000000 + ((src[pos + 1]! << 16) | (src[pos + 2]! << 8) | src[pos + 3]!);
  pos += 4;
  return v;
}

function readFloat64(): number {
  const b = src;
  const p = pos;
  if (LITTLE_ENDIAN) for (let i = 0; i < 8; i++) f64Bytes[i] = b[p + 7 - i]!;
  else for (let i = 0; i < 8; i++) f64Bytes[i] = b[p + i]!;
  pos = p + 8;
  return f64[0]!;
}

function readFloat32(): number {
  const b = src;
  const p = pos;
  if (LITTLE_ENDIAN) for (let i = 0; i < 4; i++) f32Bytes[i] = b[p + 3 - i]!;
  else for (let i = 0; i < 4; i++) f32Bytes[i] = b[p + i]!;
  pos = p + 4;
  return f32[0]!;
}

function readArray(n: number, depth: number): unknown {
  if (depth >= MAX_DEPTH) return giveUp();
  const a = new Array<unknown>(n);
  for (let i = 0; i < n; i++) {
    a[i] = readValue(depth + 1);
    if (bail) return undefined;
  }
  return a;
}

function readMap(n: number, depth: number): unknown {
  if (depth >= MAX_DEPTH) return giveUp();
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    const key = readKey();
    if (bail) return undefined;
    o[key === '__proto__' ? '__proto_' : key] = readValue(depth + 1);
    if (bail) return undefined;
  }
  return o;
}

/** A string of `n` bytes at `pos`: ASCII in JS, other UTF-8 through TextDecoder (invalid UTF-8: msgpackr decides). */
function readString(n: number): unknown {
  const p = pos;
  const e = p + n;
  if (e > lim) return giveUp();
  const b = src;
  pos = e;
  switch (n) {
    case 0:
      return '';
    case 1:
      if (b[p]! < 0x80) return fromCharCode(b[p]!);
      break;
    case 2:
      if ((b[p]! | b[p + 1]!) < 0x80) return fromCharCode(b[p]!, b[p + 1]!);
      break;
    case 3:
      if ((b[p]! | b[p + 1]! | b[p + 2]!) < 0x80) return fromCharCode(b[p]!, b[p + 1]!, b[p + 2]!);
      break;
    case 4:
      if ((b[p]! | b[p + 1]! | b[p + 2]! | b[p + 3]!) < 0x80) return fromCharCode(b[p]!, b[p + 1]!, b[p + 2]!, b[p + 3]!);
      break;
    default: {
      let ascii = 0;
      for (let i = p; i < e; i++) ascii |= b[i]!;
      if (ascii < 0x80) {
        if (n <= 32) return shortAscii(b, p, n);
        return n <= 64 ? fromCharCode.apply(null, b.subarray(p, e) as unknown as number[]) : utf8.decode(b.subarray(p, e));
      }
    }
  }
  try {
    return utf8.decode(b.subarray(p, e));
  } catch {
    return giveUp();
  }
}

/** 5 or more ASCII bytes as one flat string (no intermediate array or concatenation) */
function shortAscii(b: Uint8Array, p: number, n: number): string {
  const c0 = b[p]!, c1 = b[p + 1]!, c2 = b[p + 2]!, c3 = b[p + 3]!, c4 = b[p + 4]!;
  switch (n) {
    case 5:
      return fromCharCode(c0, c1, c2, c3, c4);
    case 6:
      return fromCharCode(c0, c1, c2, c3, c4, b[p + 5]!);
    case 7:
      return fromCharCode(c0, c1, c2, c3, c4, b[p + 5]!, b[p + 6]!);
    case 8:
      return fromCharCode(c0, c1, c2, c3, c4, b[p + 5]!, b[p + 6]!, b[p + 7]!);
    case 9:
      return fromCharCode(c0, c1, c2, c3, c4, b[p + 5]!, b[p + 6]!, b[p + 7]!, b[p + 8]!);
    case 10:
      return fromCharCode(c0, c1, c2, c3, c4, b[p + 5]!, b[p + 6]!, b[p + 7]!, b[p + 8]!, b[p + 9]!);
    case 11:
      return fromCharCode(c0, c1, c2, c3, c4, b[p + 5]!, b[p + 6]!, b[p + 7]!, b[p + 8]!, b[p + 9]!, b[p + 10]!);
    case 12:
      return fromCharCode(c0, c1, c2, c3, c4, b[p + 5]!, b[p + 6]!, b[p + 7]!, b[p + 8]!, b[p + 9]!, b[p + 10]!, b[p + 11]!);
    default:
      return fromCharCode.apply(null, b.subarray(p, p + n) as unknown as number[]);
  }
}

/** property names by (length, bytes): a small direct-mapped cache, as msgpackr keeps one */
const KEY_SLOTS = 4096;
const keyStrings: Array<string | undefined> = new Array(KEY_SLOTS).fill(undefined);
const keyBytes: Array<Uint8Array | undefined> = new Array(KEY_SLOTS).fill(undefined);
const MAX_CACHED_KEY = 32;

function readKey(): string {
  if (pos >= lim) return giveUpKey();
  const t = src[pos]!;
  let n: number;
  if (t >= 0xa0 && t < 0xc0) {
    n = t & 0x1f;
    pos++;
  } else if (t === 0xd9 && pos + 1 < lim) {
    n = src[pos + 1]!;
    pos += 2;
  } else return giveUpKey(); // numbers, nil, … as keys: msgpackr's conversions decide
  const p = pos;
  if (p + n > lim) return giveUpKey();
  if (n > MAX_CACHED_KEY) {
    const s = readString(n);
    return typeof s === 'string' ? s : giveUpKey();
  }
  const b = src;
  let h = n;
  for (let i = 0; i < n; i++) h = Math.imul(h ^ b[p + i]!, 0x01000193);
  const slot = (h ^ (h >>> 15)) & (KEY_SLOTS - 1);
  const cached = keyBytes[slot];
  if (cached !== undefined && cached.length === n) {
    let i = 0;
    while (i < n && cached[i] === b[p + i]) i++;
    if (i === n) {
      pos = p + n;
      return keyStrings[slot]!;
    }
  }
  const s = readString(n);
  if (typeof s !== 'string') return giveUpKey();
  keyBytes[slot] = b.slice(p, p + n);
  keyStrings[slot] = s;
  return s;
}

function giveUpKey(): string {
  bail = true;
  return '';
}

// ---------------------------------------------------------------------------------------------
// The fast writer. For the common shapes — plain objects, arrays, ASCII strings, numbers,
// booleans, null, undefined, Uint8Arrays — it writes the very bytes msgpackr writes with the
// options above (replay relies on equal values giving equal bytes): objects always as map 16 (what
// msgpackr's `useRecords: false` writer does), own enumerable keys in for-in order; integers of 32
// bits in their smallest form (0–127 as a fixint); every other number as a float 64; strings with
// the smallest header. Anything else (non-ASCII text, other classes, bigints, functions, deep or
// huge values) gives up without side effects and msgpackr encodes the whole value. Results are
// views of a shared chunk, as msgpackr's are.

const CHUNK = 64 * 1024;
// a plain Uint8Array, not a Buffer: a Buffer's `subarray` goes through its species constructor,
// which cost more than the rest of a small payload's writing
let out = new Uint8Array(CHUNK);
let outView = new DataView(out.buffer);
/** where the next result starts in `out` */
let at = 0;
/** write position */
let w = 0;
const hasOwn = Object.prototype.hasOwnProperty;

/** The bytes msgpackr would make of `value`, or undefined when the value is not of a shape written here. */
export function encodePayloadFast(value: unknown): Uint8Array | undefined {
  if (out.length - at < 256) {
    out = new Uint8Array(CHUNK);
    outView = new DataView(out.buffer);
    at = 0;
  }
  w = at;
  if (!writeValue(value, 0)) return undefined;
  const r = out.subarray(at, w);
  at = w;
  return r;
}

/**
 * The checkpoint delta's shape, `{ v: 2, rows: [[operatorId, keyGroup, key, values], …], extras }`,
 * written straight from the rows: the bytes `encodePayload` makes of that value, without building
 * a tuple per row. Undefined when the fast writer would give up (then msgpackr encodes the value).
 */
export function encodeDeltaFast(rows: readonly DeltaRow[], extras: unknown): Uint8Array | undefined {
  // one chunk of about the delta's size: growing one by doubling copies it and leaves a trail of
  // large buffers whose collection costs more than the writing
  const size = deltaSize(rows);
  if (out.length - at < size) {
    out = new Uint8Array(Math.max(CHUNK, size + (size >> 2)));
    outView = new DataView(out.buffer);
    at = 0;
  }
  w = at;
  room(8);
  // a map 16 of three keys, as writeObject writes a plain object
  out[w++] = 0xde;
  out[w++] = 0;
  out[w++] = 3;
  writeString('v');
  out[w++] = 2;
  writeString('rows');
  writeArrayHeader(rows.length);
  for (let i = 0; i < rows.length; i++) if (!writeRow(rows[i]!)) return undefined;
  if (!writeString('extras') || !writeValue(extras, 1)) return undefined;
  const result = out.subarray(at, w);
  at = w;
  return result;
}

/** About the bytes of a delta's rows (exact for ASCII keys if every row's values are the first row's size). */
function deltaSize(rows: readonly DeltaRow[]): number {
  const n = rows.length;
  if (n === 0) return 256;
  let values = 3;
  const first = rows[0]!.values;
  for (const k in first) values += k.length + 10 + (first[k]?.byteLength ?? 0);
  let size = 256 + n * (values + 16);
  for (let i = 0; i < n; i++) size += rows[i]!.operatorId.length + rows[i]!.key.length;
  return size;
}

/** A row of a delta, as `encodeDeltaFast` reads it. */
export interface DeltaRow {
  readonly operatorId: string;
  readonly keyGroup: number;
  readonly key: string;
  readonly values: Readonly<Record<string, Uint8Array>>;
}

/**
 * One row as its tuple. A function of its own: called once per row, it is optimized after a few
 * deltas, where the delta's loop alone would run as on-stack-replaced code for dozens of them.
 */
function writeRow(r: DeltaRow): boolean {
  room(1);
  out[w++] = 0x94;
  if (!writeRepeated(r.operatorId, rowOp)) return false;
  writeNumber(r.keyGroup);
  return writeString(r.key) && (r.values.constructor === Object ? writeObject(r.values, 3, rowName) : writeValue(r.values, 3));
}

/** The last string written through it and its bytes: a delta's rows repeat their operator's id and state names. */
type StringCache = { s: string | undefined; bytes: Uint8Array };
const rowOp: StringCache = { s: undefined, bytes: new Uint8Array(0) };
const rowName: StringCache = { s: undefined, bytes: new Uint8Array(0) };

/** writeString, copying the bytes of `cache`'s string when `s` is it. */
function writeRepeated(s: string, cache: StringCache): boolean {
  if (s !== cache.s) {
    const from = w - at;
    if (!writeString(s)) return false;
    cache.s = s;
    cache.bytes = out.slice(at + from, w);
    return true;
  }
  const b = cache.bytes;
  const n = b.length;
  room(n);
  for (let i = 0; i < n; i++) out[w + i] = b[i]!;
  w += n;
  return true;
}

/** Makes room for `n` more bytes, moving the value written so far to a larger chunk if needed. */
function room(n: number): void {
  if (w + n <= out.length) return;
  const used = w - at;
  const next = new Uint8Array(Math.max(CHUNK, 2 * (used + n)));
  next.set(out.subarray(at, w), 0);
  out = next;
  outView = new DataView(out.buffer);
  at = 0;
  w = used;
}

function writeValue(v: unknown, depth: number): boolean {
  switch (typeof v) {
    case 'string':
      return writeString(v);
    case 'number':
      writeNumber(v);
      return true;
    case 'boolean':
      room(1);
      out[w++] = v ? 0xc3 : 0xc2;
      return true;
    case 'undefined':
      room(3);
      out[w++] = 0xd4;
      out[w++] = 0;
      out[w++] = 0;
      return true;
    case 'object': {
      if (v === null) {
        room(1);
        out[w++] = 0xc0;
        return true;
      }
      if (depth >= MAX_DEPTH) return false;
      const c = (v as object).constructor;
      if (c === Object) return writeObject(v as Record<string, unknown>, depth);
      if (c === Array) return writeArray(v as unknown[], depth);
      if (c === Uint8Array || c === Buffer) {
        writeBin(v as Uint8Array);
        return true;
      }
      return false;
    }
    default:
      return false;
  }
}

function writeNumber(x: number): void {
  room(9);
  if (x >>> 0 === x) {
    if (x < 0x80) out[w++] = x;
    else if (x < 0x100) {
      out[w++] = 0xcc;
      out[w++] = x;
    } else if (x < 0x10000) {
      out[w++] = 0xcd;
      out[w++] = x >> 8;
      out[w++] = x & 0xff;
    } else {
      out[w++] = 0xce;
      out[w++] = x >>> 24;
      out[w++] = (x >> 16) & 0xff;
      out[w++] = (x >> 8) & 0xff;
      out[w++] = x & 0xff;
    }
  } else if (x >> 0 === x) {
    if (x >= -0x20) out[w++] = 0x100 + x;
    else if (x >= -0x80) {
      out[w++] = 0xd0;
      out[w++] = x + 0x100;
    } else if (x >= -0x8000) {
      out[w++] = 0xd1;
      out[w++] = (x >> 8) & 0xff;
      out[w++] = x & 0xff;
    } else {
      out[w++] = 0xd2;
      out[w++] = (x >>> 24) & 0xff;
      out[w++] = (x >> 16) & 0xff;
      out[w++] = (x >> 8) & 0xff;
      out[w++] = x & 0xff;
    }
  } else {
    out[w++] = 0xcb;
    outView.setFloat64(w, x); // big-endian
    w += 8;
  }
}

/** ASCII strings only (anything else: false, and the caller gives up). */
function writeString(s: string): boolean {
  const n = s.length;
  room(n + 5);
  if (n < 0x20) out[w++] = 0xa0 | n;
  else if (n < 0x100) {
    out[w++] = 0xd9;
    out[w++] = n;
  } else if (n < 0x10000) {
    out[w++] = 0xda;
    out[w++] = n >> 8;
    out[w++] = n & 0xff;
  } else {
    out[w++] = 0xdb;
    out[w++] = n >>> 24;
    out[w++] = (n >> 16) & 0xff;
    out[w++] = (n >> 8) & 0xff;
    out[w++] = n & 0xff;
  }
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return false;
    out[w++] = c;
  }
  return true;
}

function writeBin(b: Uint8Array): void {
  const n = b.byteLength;
  room(n + 5);
  if (n < 0x100) {
    out[w++] = 0xc4;
    out[w++] = n;
  } else if (n < 0x10000) {
    out[w++] = 0xc5;
    out[w++] = n >> 8;
    out[w++] = n & 0xff;
  } else {
    out[w++] = 0xc6;
    out[w++] = n >>> 24;
    out[w++] = (n >> 16) & 0xff;
    out[w++] = (n >> 8) & 0xff;
    out[w++] = n & 0xff;
  }
  if (n < 16) for (let i = 0; i < n; i++) out[w++] = b[i]!;
  else {
    out.set(b, w);
    w += n;
  }
}

function writeArray(a: unknown[], depth: number): boolean {
  const n = a.length;
  writeArrayHeader(n);
  for (let i = 0; i < n; i++) if (!writeValue(a[i], depth + 1)) return false;
  return true;
}

function writeArrayHeader(n: number): void {
  room(5);
  if (n < 0x10) out[w++] = 0x90 | n;
  else if (n < 0x10000) {
    out[w++] = 0xdc;
    out[w++] = n >> 8;
    out[w++] = n & 0xff;
  } else {
    out[w++] = 0xdd;
    out[w++] = n >>> 24;
    out[w++] = (n >> 16) & 0xff;
    out[w++] = (n >> 8) & 0xff;
    out[w++] = n & 0xff;
  }
}

/** Always a map 16, its size written once the own keys are counted (msgpackr's plain-object writer); `names`: keys through writeRepeated. */
function writeObject(o: Readonly<Record<string, unknown>>, depth: number, names?: StringCache): boolean {
  room(3);
  out[w++] = 0xde;
  // relative to the value's start: `room` may move the value to another chunk
  const sizeAt = w - at;
  w += 2;
  let size = 0;
  for (const k in o) {
    if (!hasOwn.call(o, k)) continue;
    // an own `hasOwnProperty` changes which keys msgpackr writes: leave such objects to it
    if (k === 'hasOwnProperty') return false;
    if (!(names ? writeRepeated(k, names) : writeString(k))) return false;
    const v = o[k];
    // byte arrays (a delta's state values) without the generic dispatch: writeValue writes them alike
    if (v !== undefined && v !== null && depth + 1 < MAX_DEPTH && (v.constructor === Uint8Array || v.constructor === Buffer)) writeBin(v as Uint8Array);
    else if (!writeValue(v, depth + 1)) return false;
    size++;
  }
  if (size > 0xffff) return false;
  out[at + sizeAt] = size >> 8;
  out[at + sizeAt + 1] = size & 0xff;
  return true;
}
