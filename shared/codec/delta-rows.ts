/**
 * A delta's rows read back from its bytes, for the changelog's pending rows (runtime/changelog.ts):
 * a snapshot keeps its delta's bytes until the rows are applied, not the rows themselves — 8–9 k
 * row objects per checkpoint, each kept for several checkpoints, were copied and promoted by every
 * collection in between. The rows are read when the table's apply (or a read of a pending key)
 * needs them, and die young.
 *
 * The same rows `decodeDelta` gives, read straight from the layout `encodeDeltaFast` writes (and
 * msgpackr's, whose headers it shares); anything else falls back to `decodeDelta`.
 */
import type { StateRow } from '../runtime/ports.js';
import { decodeDelta } from './snapshot.js';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const fromCharCode = String.fromCharCode;

let src: Uint8Array = new Uint8Array(0);
let pos = 0;
let bad = false;

/** The rows of a delta's bytes (as `decodeDelta(bytes).rows`); throws as it does on a corrupt delta. */
export function readDeltaRows(bytes: Uint8Array): StateRow[] {
  src = bytes;
  pos = 0;
  bad = false;
  let rows: StateRow[] | undefined;
  try {
    rows = readRows();
  } catch {
    rows = undefined;
  }
  src = new Uint8Array(0);
  return rows && !bad ? rows : decodeDelta(bytes).rows;
}

/** `{ v: 2, rows: [...], … }` with `v` and `rows` first, as both writers put them; undefined otherwise. */
function readRows(): StateRow[] | undefined {
  const fields = mapHeader();
  if (fields < 2 || !key('v') || src[pos++] !== 2 || !key('rows')) return undefined;
  const n = arrayHeader();
  if (n < 0) return undefined;
  const rows: StateRow[] = new Array(n);
  let op = '';
  let opAt = -1;
  let opLen = 0;
  let name = '';
  let nameAt = -1;
  let nameLen = 0;
  for (let i = 0; i < n; i++) {
    if (src[pos++] !== 0x94) return undefined;
    // an operator's rows repeat its id, and its states' names: one string each while the bytes repeat
    let len = strHeader();
    if (len < 0) return undefined;
    if (opAt < 0 || len !== opLen || !same(opAt, pos, len)) {
      op = text(pos, len);
      opAt = pos;
      opLen = len;
    }
    pos += len;
    const keyGroup = uint();
    len = strHeader();
    if (keyGroup < 0 || len < 0) return undefined;
    const key = text(pos, len);
    pos += len;
    const m = mapHeader();
    if (m < 0) return undefined;
    const values: Record<string, Uint8Array> = {};
    for (let j = 0; j < m; j++) {
      len = strHeader();
      if (len < 0) return undefined;
      if (nameAt < 0 || len !== nameLen || !same(nameAt, pos, len)) {
        name = text(pos, len);
        nameAt = pos;
        nameLen = len;
      }
      pos += len;
      // msgpackr's reader renames this key; rare enough to leave to it
      if (name === '__proto__') return undefined;
      const b = binHeader();
      if (b < 0 || pos + b > src.length) return undefined;
      // a copy: a view would keep the delta's whole buffer alive as long as the table's cache keeps the value
      values[name] = src.slice(pos, pos + b);
      pos += b;
    }
    rows[i] = { operatorId: op, keyGroup, key, values };
  }
  // a read past the end (a truncated delta) moved `pos` beyond it
  return bad || pos > src.length ? undefined : rows;
}

function same(a: number, b: number, n: number): boolean {
  for (let i = 0; i < n; i++) if (src[a + i] !== src[b + i]) return false;
  return true;
}

function text(p: number, n: number): string {
  const e = p + n;
  if (e > src.length) {
    bad = true;
    return '';
  }
  let ascii = 0;
  for (let i = p; i < e; i++) ascii |= src[i]!;
  if (ascii >= 0x80 || n > 64) return utf8.decode(src.subarray(p, e));
  let s = '';
  for (let i = p; i < e; i++) s += fromCharCode(src[i]!);
  return s;
}

function key(s: string): boolean {
  const n = strHeader();
  if (n !== s.length) return false;
  for (let i = 0; i < n; i++) if (src[pos + i] !== s.charCodeAt(i)) return false;
  pos += n;
  return true;
}

function u16(): number {
  const v = (src[pos]! << 8) | src[pos + 1]!;
  pos += 2;
  return v;
}

function u32(): number {
  const v = src[pos]! * 0x1000000 + ((src[pos + 1]! << 16) | (src[pos + 2]! << 8) | src[pos + 3]!);
  pos += 4;
  return v;
}

function mapHeader(): number {
  const t = src[pos++]!;
  if (t >= 0x80 && t < 0x90) return t & 0x0f;
  if (t === 0xde) return u16();
  if (t === 0xdf) return u32();
  return -1;
}

function arrayHeader(): number {
  const t = src[pos++]!;
  if (t >= 0x90 && t < 0xa0) return t & 0x0f;
  if (t === 0xdc) return u16();
  if (t === 0xdd) return u32();
  return -1;
}

function strHeader(): number {
  const t = src[pos++]!;
  if (t >= 0xa0 && t < 0xc0) return t & 0x1f;
  if (t === 0xd9) return src[pos++]!;
  if (t === 0xda) return u16();
  if (t === 0xdb) return u32();
  return -1;
}

function binHeader(): number {
  const t = src[pos++]!;
  if (t === 0xc4) return src[pos++]!;
  if (t === 0xc5) return u16();
  if (t === 0xc6) return u32();
  return -1;
}

/** A non-negative integer as msgpack writes it (a key group); −1 for anything else. */
function uint(): number {
  const t = src[pos++]!;
  if (t < 0x80) return t;
  if (t === 0xcc) return src[pos++]!;
  if (t === 0xcd) return u16();
  if (t === 0xce) return u32();
  return -1;
}
