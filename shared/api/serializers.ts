import { isWellFormed } from '../util/well-formed.js';
import { jsonValueProblem } from '../util/encodable-values.js';

/** A value that can cross a process boundary as bytes. */
export interface Serializer<T> {
  readonly id: string;
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
  /**
   * Why `value` cannot be encoded so that `decode` gives it back, or undefined when it can. Every
   * keyed state write asks it, so such a value fails the record that writes it (a dead letter)
   * instead of the checkpoint or the restore that would meet it later.
   */
  check?(value: T): string | undefined;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * UTF-8 of a string: short ASCII strings (most JSON of state values) copied in JS, which costs a
 * fraction of a TextEncoder call; the same bytes either way.
 */
function utf8(s: string): Uint8Array {
  const n = s.length;
  if (n > 64) return encoder.encode(s);
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return encoder.encode(s);
    b[i] = c;
  }
  return b;
}

/**
 * The JSON of a 32-bit integer (a count, a sum: most state values a checkpoint writes), its digits
 * written straight, without the string JSON.stringify would make; the same bytes.
 */
function int32Json(x: number): Uint8Array {
  const neg = x < 0;
  // 2^31 fits a double exactly: the magnitude of -2^31 is safe here
  let m = neg ? -x : x;
  let n = neg ? 2 : 1;
  for (let t = m; t >= 10; t = Math.floor(t / 10)) n++;
  const b = new Uint8Array(n);
  for (let i = n - 1; i >= (neg ? 1 : 0); i--) {
    const q = Math.floor(m / 10);
    b[i] = 48 + m - q * 10;
    m = q;
  }
  if (neg) b[0] = 45;
  return b;
}

/**
 * JSON as UTF-8: the default for state and records. Its `check` refuses a bigint, a Map or Set, or a
 * cycle anywhere in a value (JSON would throw at the checkpoint, or write `{}`); `NaN` and ±Infinity
 * pass and are written as `null`, as JSON writes them.
 */
export function jsonSerializer<T>(): Serializer<T> {
  return {
    id: 'json',
    encode: (value) => (typeof value === 'number' && (value | 0) === value ? int32Json(value) : utf8(JSON.stringify(value) ?? '')),
    decode: (bytes) => JSON.parse(decoder.decode(bytes)) as T,
    check: jsonValueProblem,
  };
}

/** UTF-8 text. */
export const textSerializer: Serializer<string> = {
  id: 'text',
  encode: (value) => utf8(value),
  decode: (bytes) => decoder.decode(bytes),
  // UTF-8 would carry half a surrogate pair as U+FFFD: the value restored would not be the one written
  check: (value) =>
    typeof value !== 'string' ? `must be a string, got ${typeof value}` : isWellFormed(value) ? undefined : `${JSON.stringify(value.slice(0, 40))} holds half of a surrogate pair, which UTF-8 cannot carry`,
};

/** Raw bytes, untouched. */
export const bytesSerializer: Serializer<Uint8Array> = {
  id: 'binary',
  encode: (value) => value,
  decode: (bytes) => bytes,
  check: (value) => (value instanceof Uint8Array ? undefined : `must be a Uint8Array, got ${value === null ? 'null' : typeof value}`),
};
