/**
 * The bytes of a key's window list ([start, end, accumulator or elements][]), as JSON: the value
 * state the window operator keeps its list in (window-operator.ts) writes them at each checkpoint.
 */
import { jsonSerializer, type Serializer } from '../api/serializers.js';
import type { Windows } from './window-parts.js';

const ascii = new TextEncoder();

const hasOwn = Object.prototype.hasOwnProperty;

/**
 * The JSON serializer for a key's window list, with the same bytes made for less: a window's
 * `[start,end,` is the same text for every key that has the window (a checkpoint writes thousands),
 * so its bytes are kept; an accumulator that is a plain object of finite numbers (an aggregate's
 * usual one) is written here, its `"name":` bytes kept too, and any other goes through the JSON
 * serializer. A list whose text could differ from JSON.stringify's that way (a bound that is not
 * finite, an accumulator JSON leaves out or that has its own `toJSON`, called with another key
 * inside an array) is serialized whole.
 */
export function windowListSerializer(): Serializer<Windows> {
  const json = jsonSerializer<unknown>();
  // per window start: its end and the bytes of `[start,end,`
  const heads = new Map<number, { end: number; bytes: Uint8Array }>();
  const head = (start: number, end: number): Uint8Array => {
    let h = heads.get(start);
    if (h === undefined || h.end !== end) {
      if (heads.size >= 64) heads.clear();
      heads.set(start, (h = { end, bytes: ascii.encode(`[${start},${end},`) }));
    }
    return h.bytes;
  };
  // per property name of a flat accumulator: the bytes of its `"name":` (JSON's escapes)
  const names = new Map<string, Uint8Array>();
  const name = (k: string): Uint8Array => {
    let b = names.get(k);
    if (b === undefined) {
      if (names.size >= 64) names.clear();
      names.set(k, (b = ascii.encode(`${JSON.stringify(k)}:`)));
    }
    return b;
  };
  // the list's text is written here, then copied out
  let buf = new Uint8Array(256);
  let w = 0;
  const room = (n: number): void => {
    if (w + n <= buf.length) return;
    const next = new Uint8Array(Math.max(2 * buf.length, w + n));
    next.set(buf.subarray(0, w));
    buf = next;
  };
  const copy = (b: Uint8Array): void => {
    room(b.length);
    for (let k = 0; k < b.length; k++) buf[w++] = b[k]!;
  };
  /** a 32-bit integer's decimal digits (its JSON text; −0 is `0`), without making its string */
  const int32 = (v: number): void => {
    room(11);
    let u = v;
    if (u < 0) {
      buf[w++] = 0x2d; // -
      u = -u; // 2^31 at most: still exact
    }
    const from = w;
    do {
      buf[w++] = 0x30 + (u % 10);
      u = Math.floor(u / 10);
    } while (u > 0);
    // the digits were written last first
    for (let i = from, j = w - 1; i < j; i++, j--) {
      const c = buf[i]!;
      buf[i] = buf[j]!;
      buf[j] = c;
    }
  };
  /**
   * `acc` as JSON.stringify writes it when it is a plain object whose own enumerable values are
   * all finite numbers (a number's text is JSON's, and ASCII; own keys in JSON's order, which
   * for-in keeps); false, with nothing written, when it is not.
   */
  const flat = (acc: unknown): boolean => {
    if (typeof acc !== 'object' || acc === null || (acc as object).constructor !== Object) return false;
    const from = w;
    room(1);
    buf[w++] = 0x7b; // {
    let first = true;
    for (const k in acc) {
      if (!hasOwn.call(acc, k)) continue;
      const v = (acc as Record<string, unknown>)[k];
      if (!Number.isFinite(v)) {
        w = from;
        return false;
      }
      if (!first) {
        room(1);
        buf[w++] = 0x2c; // ,
      }
      first = false;
      copy(name(k));
      if (((v as number) | 0) === v) int32(v as number);
      else {
        const text = String(v);
        room(text.length);
        for (let c = 0; c < text.length; c++) buf[w++] = text.charCodeAt(c);
      }
    }
    room(1);
    buf[w++] = 0x7d; // }
    return true;
  };
  return {
    id: json.id,
    decode: json.decode as (bytes: Uint8Array) => Windows,
    encode: (list) => {
      const n = list.length;
      if (n === 0) return json.encode(list);
      w = 0;
      room(1);
      buf[w++] = 0x5b; // [
      for (let i = 0; i < n; i++) {
        const [start, end, acc] = list[i]!;
        if (!Number.isFinite(start) || !Number.isFinite(end) || (typeof acc === 'object' && acc !== null && typeof (acc as { toJSON?: unknown }).toJSON === 'function')) return json.encode(list);
        if (i > 0) {
          room(1);
          buf[w++] = 0x2c; // ,
        }
        copy(head(start, end));
        if (!flat(acc)) {
          const a = json.encode(acc);
          // undefined, a function, a symbol: nothing alone, `null` inside an array
          if (a.length === 0) return json.encode(list);
          copy(a);
        }
        room(2);
        buf[w++] = 0x5d; // ]
      }
      buf[w++] = 0x5d;
      return buf.slice(0, w);
    },
  };
}
