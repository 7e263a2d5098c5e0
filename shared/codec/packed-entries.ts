/**
 * The packed state table's item codec: the entries (key → states) of one item as its binary
 * attribute `d`, keys sorted and prefix-compressed, state names written once per item.
 */
import { SluiceError } from '../util/errors.js';

/** the format marker of packed items (`f`, and the first byte of `d`) */
export const PACKED_FORMAT = 1;

/** a key's states: name → serialized value */
type Values = Record<string, Uint8Array>;
const utf8 = new TextEncoder();
const utf8d = new TextDecoder();

class Writer {
  buf = new Uint8Array(256);
  len = 0;
  private room(n: number) {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const b = new Uint8Array(size);
    b.set(this.buf.subarray(0, this.len));
    this.buf = b;
  }
  varint(x: number) {
    this.room(8);
    while (x >= 0x80) {
      this.buf[this.len++] = (x & 0x7f) | 0x80;
      x = Math.floor(x / 128);
    }
    this.buf[this.len++] = x;
  }
  bytes(b: Uint8Array) {
    this.varint(b.length);
    this.room(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
  raw(b: Uint8Array) {
    this.room(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
  done(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

class Reader {
  o = 0;
  constructor(private readonly b: Uint8Array) {}
  varint(): number {
    let x = 0;
    let m = 1;
    for (;;) {
      const c = this.b[this.o++];
      if (c === undefined) throw new SluiceError('packed state item is truncated', 'STATE_CORRUPT');
      x += (c & 0x7f) * m;
      if (c < 0x80) return x;
      m *= 128;
    }
  }
  take(n: number): Uint8Array {
    if (this.o + n > this.b.length) throw new SluiceError('packed state item is truncated', 'STATE_CORRUPT');
    const s = this.b.subarray(this.o, this.o + n);
    this.o += n;
    return s;
  }
  get end() {
    return this.o >= this.b.length;
  }
}

export const compareKeys = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * `d`: format byte, state names (count, then each), entry count, then per entry (keys ascending):
 * bytes shared with the previous key, the rest of the key, the number of states, and per state its
 * name's index and its bytes. Lengths are LEB128 varints.
 */
export function encodeEntries(entries: ReadonlyMap<string, Values>): Uint8Array {
  const keys = [...entries.keys()].sort(compareKeys);
  const names = new Map<string, number>();
  for (const k of keys) for (const n of Object.keys(entries.get(k)!)) if (!names.has(n)) names.set(n, names.size);
  const w = new Writer();
  w.varint(PACKED_FORMAT);
  w.varint(names.size);
  for (const n of names.keys()) w.bytes(utf8.encode(n));
  w.varint(keys.length);
  let prev = new Uint8Array(0);
  for (const k of keys) {
    const kb = utf8.encode(k);
    let shared = 0;
    const max = Math.min(prev.length, kb.length);
    while (shared < max && prev[shared] === kb[shared]) shared++;
    w.varint(shared);
    w.bytes(kb.subarray(shared));
    const values = entries.get(k)!;
    const vn = Object.keys(values);
    w.varint(vn.length);
    for (const n of vn) {
      w.varint(names.get(n)!);
      w.bytes(values[n]!);
    }
    prev = kb;
  }
  return w.done();
}

export function decodeEntries(d: Uint8Array): Map<string, Values> {
  const r = new Reader(d);
  const format = r.varint();
  if (format !== PACKED_FORMAT) throw new SluiceError(`packed state item has format ${format}, this version reads ${PACKED_FORMAT}`, 'STATE_CORRUPT');
  const names: string[] = [];
  for (let i = r.varint(); i > 0; i--) names.push(utf8d.decode(r.take(r.varint())));
  const out = new Map<string, Values>();
  let prev = new Uint8Array(0);
  for (let i = r.varint(); i > 0; i--) {
    const shared = r.varint();
    const rest = r.take(r.varint());
    const kb = new Uint8Array(shared + rest.length);
    kb.set(prev.subarray(0, shared));
    kb.set(rest, shared);
    const values: Values = {};
    for (let j = r.varint(); j > 0; j--) {
      const name = names[r.varint()];
      if (name === undefined) throw new SluiceError('packed state item names an unknown state', 'STATE_CORRUPT');
      values[name] = r.take(r.varint()).slice();
    }
    out.set(utf8d.decode(kb), values);
    prev = kb;
  }
  return out;
}
