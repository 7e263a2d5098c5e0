/**
 * The fast MessagePack writer behind `encodePayload` (payload.ts) and the checkpoint delta's writer.
 * For the common shapes — plain objects, arrays, ASCII strings, numbers, booleans, null, undefined,
 * Uint8Arrays — it writes the very bytes msgpackr writes with payload.ts's options (replay relies
 * on equal values giving equal bytes): objects always as map 16 (what msgpackr's `useRecords:
 * false` writer does), own enumerable keys in for-in order; integers of 32 bits in their smallest
 * form (0–127 as a fixint); every other number as a float 64; strings with the smallest header.
 * Anything else (non-ASCII text, other classes, bigints, functions, deep or huge values) gives up
 * without side effects and msgpackr encodes the whole value. Results are views of a shared chunk,
 * as msgpackr's are.
 */

/** deeper than this is left to msgpackr (the fast reader and writer recurse) */
export const MAX_DEPTH = 64;

const CHUNK = 64 * 1024;
// a plain Uint8Array, not a Buffer: a Buffer's `subarray` goes through its species constructor,
// which cost more than the rest of a small payload's writing
let out = new Uint8Array(CHUNK);
let outView = new DataView(out.buffer);
/** where the next result starts in `out` */
let at = 0;
/** write position */
let w = 0;

/** The bytes msgpackr would make of `value`, or undefined when the value is not of a shape written here. */
export function encodePayloadFast(value: unknown): Uint8Array | undefined {
  return encodePayloadInChunk(value) ? out.subarray(inChunk.start, inChunk.end) : undefined;
}

/** Where `encodePayloadInChunk` wrote its last value: bytes[start, end) of a shared chunk. */
export const inChunk = { bytes: out, start: 0, end: 0 };

/**
 * `encodePayloadFast` without a view of the result: the bytes are `inChunk`'s range (false: not a
 * shape written here, nothing written). The range stays as written: a chunk is only ever appended to.
 */
export function encodePayloadInChunk(value: unknown): boolean {
  if (out.length - at < 256) {
    out = new Uint8Array(CHUNK);
    outView = new DataView(out.buffer);
    at = 0;
  }
  w = at;
  if (!writeValue(value, 0)) return false;
  inChunk.bytes = out;
  inChunk.start = at;
  inChunk.end = w;
  at = w;
  return true;
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
      if (c === KeptList) return writeKept(v as KeptList<KeptEncoding>, depth);
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

/**
 * Where an item's encoded bytes are kept (`KeptList`): `keptBytes`, a copy of its own, written with
 * one `set` (not a part of a shared slab: one long-lived item would keep a whole slab of fired
 * timers' bytes alive). Start with no bytes and a length of 0; a length of -1 means written once,
 * bytes not kept.
 */
export interface KeptEncoding {
  keptBytes: Uint8Array | undefined;
  keptLength: number;
}

/**
 * A list the fast writer writes by copying each item's kept bytes: the bytes of `plain(item)`,
 * kept on the item the second time it is written (a checkpoint writes the same timers into delta
 * after delta; an item written once only, such as a timer that fires before the next checkpoint,
 * is not worth the copy). `plain(item)` must not change once the item is written, and must be the same for
 * every list the item is in. Anything else (msgpackr, JSON) sees `toJSON()`, the plain list; the
 * bytes are the same either way (copied bytes skip the depth limit, which only guards the
 * writer's recursion: msgpackr writes the same bytes at any depth).
 *
 * `write`, if given, writes an item's bytes without building `plain(item)` (a timer's row, mostly
 * written once before it fires: no array per row, no dispatch per value). It must write the very
 * bytes the writer makes of `plain(item)`, or return false where the writer would give up (then
 * msgpackr encodes the whole value, as it would have).
 */
export class KeptList<T extends KeptEncoding> {
  constructor(
    readonly items: readonly T[],
    readonly plain: (item: T) => unknown,
    readonly write?: (item: T, to: ItemWriter) => boolean,
  ) {}

  toJSON(): unknown[] {
    return this.items.map(this.plain);
  }
}

/** The writer's parts a `KeptList`'s `write` uses: each writes what `writeValue` writes of the same value. */
export interface ItemWriter {
  arrayHeader(n: number): void;
  /** ASCII only: false otherwise */
  string(s: string): boolean;
  number(x: number): void;
}

const itemWriter: ItemWriter = { arrayHeader: writeArrayHeader, string: writeString, number: writeNumber };

function writeKept(list: KeptList<KeptEncoding>, depth: number): boolean {
  const items = list.items;
  const write = list.write;
  const n = items.length;
  writeArrayHeader(n);
  for (let i = 0; i < n; i++) {
    const item = items[i]!;
    const b = item.keptBytes;
    if (b !== undefined) {
      const len = item.keptLength;
      room(len);
      out.set(b, w);
      w += len;
      continue;
    }
    // relative to the value's start: `room` may move the value to another chunk
    const from = w - at;
    if (!(write !== undefined ? write(item, itemWriter) : writeValue(list.plain(item), depth + 1))) return false;
    if (item.keptLength === 0) {
      item.keptLength = -1;
      continue;
    }
    const len = w - at - from;
    item.keptBytes = out.slice(at + from, at + from + len);
    item.keptLength = len;
  }
  return true;
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
  // the position and chunk in locals: module variables are stored to at every byte otherwise
  const b = out;
  let p = w;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return false;
    b[p++] = c;
  }
  w = p;
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
    // spelled out: the compiler knows this call inside a for-in (a module constant holding it is slower)
    if (!Object.prototype.hasOwnProperty.call(o, k)) continue;
    // an own `hasOwnProperty` changes which keys msgpackr writes: leave such objects to it
    if (k === 'hasOwnProperty') return false;
    if (!(names ? writeRepeated(k, names) : writeString(k))) return false;
    const v = o[k];
    // byte arrays (a delta's state values) without the generic dispatch: writeValue writes them alike
    if (typeof v === 'object' && v !== null && depth + 1 < MAX_DEPTH && (v.constructor === Uint8Array || v.constructor === Buffer)) writeBin(v as Uint8Array);
    else if (!writeValue(v, depth + 1)) return false;
    size++;
  }
  if (size > 0xffff) return false;
  out[at + sizeAt] = size >> 8;
  out[at + sizeAt + 1] = size & 0xff;
  return true;
}
