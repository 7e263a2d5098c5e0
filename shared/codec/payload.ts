/**
 * Record payloads between stages: MessagePack (msgpackr), compact and fast, and deterministic for
 * the same value, which replay relies on (same id ⇒ same bytes). The fast writer for the common
 * shapes is payload-writer.ts; the fast reader is below.
 */
import { Packr } from 'msgpackr';
import { packedValueProblem } from '../util/encodable-values.js';
import { checkWellFormed } from '../util/well-formed.js';
import { encodePayloadFast, encodePayloadInChunk, inChunk, MAX_DEPTH } from './payload-writer.js';

const packr = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number' });

/**
 * Throws a RangeError for a value that would not be read back as written: a string with a lone
 * surrogate (UTF-8 has no form for it; msgpackr would write U+FFFD), a bigint (read back as a
 * number), a Map or Set (an object, an array), a cycle. Only values the fast writer gives up on
 * (non-ASCII text, other classes, bigints, deep values) are checked: its common shapes pay nothing.
 */
export function encodePayload(value: unknown): Uint8Array {
  const fast = encodePayloadFast(value);
  if (fast !== undefined) return fast;
  return packChecked(value);
}

function packChecked(value: unknown): Uint8Array {
  // first: it bounds the depth (a cycle) that checkWellFormed's walk would follow
  const why = packedValueProblem(value);
  if (why !== undefined) throw new RangeError(`this value would not be read back as written: ${why}`);
  checkWellFormed(value);
  return packr.pack(value);
}

/** Where `encodePayloadRange`'s result lies in the bytes it returns. */
export const payloadRange = { start: 0, end: 0 };

/**
 * `encodePayload`'s bytes as a range (`payloadRange`) of the array it returns: for the common
 * shapes a shared chunk, so that no view is made of an output copied into a packet at once.
 */
export function encodePayloadRange(value: unknown): Uint8Array {
  if (encodePayloadInChunk(value)) {
    payloadRange.start = inChunk.start;
    payloadRange.end = inChunk.end;
    return inChunk.bytes;
  }
  const bytes = packChecked(value);
  payloadRange.start = 0;
  payloadRange.end = bytes.length;
  return bytes;
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

/**
 * A view of the buffer floats are read from, made when a float is first read from it: the payloads
 * of a packet share one (it keeps that one buffer reachable until floats are read from another).
 */
let view: DataView<ArrayBufferLike> = new DataView(EMPTY.buffer);
let viewOf: Uint8Array = EMPTY;

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

function srcView(): DataView {
  if (viewOf !== src) {
    view = new DataView(src.buffer, src.byteOffset, src.byteLength);
    viewOf = src;
  }
  return view;
}

/** MessagePack numbers are big-endian, as DataView reads them by default */
function readFloat64(): number {
  const x = srcView().getFloat64(pos);
  pos += 8;
  return x;
}

function readFloat32(): number {
  const x = srcView().getFloat32(pos);
  pos += 4;
  return x;
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
