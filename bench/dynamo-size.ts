/**
 * DynamoDB item sizes and capacity units, as DynamoDB bills them (developer guide, "Item sizes and
 * formats" and "Read/write capacity mode"): an item's size is the sum over its attributes of the
 * attribute name's UTF-8 length plus the value's size —
 *
 * - String: UTF-8 bytes. Binary: raw bytes (not base64). Null, Boolean: 1 byte.
 * - Number: about 1 byte per two significant digits, plus 1 (leading and trailing zeros trimmed; the
 *   exact rule below is the one dynalite implements, which DynamoDB's published examples match).
 * - List: 3 bytes + per element 1 byte + its size. Map: 3 bytes + per entry 1 byte + name + value.
 * - String/Number set: the sum of its elements' sizes.
 *
 * A write (PutItem, UpdateItem, DeleteItem) costs ceil(size / 1 KB) write units, where UpdateItem
 * and PutItem count the *larger* of the item before and after. A strongly consistent read costs
 * ceil(size / 4 KB) read units (an item that does not exist still costs 1). On-demand tables bill
 * the same numbers as write/read request units.
 *
 * Values are sized as `@aws-sdk/lib-dynamodb` marshals them (Uint8Array → B, string → S, number →
 * N, Set<string> → SS, array → L, object → M, undefined attributes removed).
 */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Size of a DynamoDB number: digits and exponent as in Big.js (what dynalite uses). */
export function numberSize(x: number): number {
  if (x === 0) return 1;
  const [mantissa, exp] = Math.abs(x).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '').replace(/0+$/, '');
  const e = Number(exp);
  const n = digits.length;
  return 1 + Math.ceil(n / 2) + (n % 2 || e % 2 ? 0 : 1) + (x < 0 ? 1 : 0);
}

export function valueSize(v: unknown): number {
  if (v === null) return 1;
  if (v instanceof Uint8Array) return v.length;
  switch (typeof v) {
    case 'string':
      return utf8Length(v);
    case 'number':
      return numberSize(v);
    case 'bigint':
      return numberSize(Number(v));
    case 'boolean':
      return 1;
    case 'object': {
      if (v instanceof Set) {
        let n = 0;
        for (const x of v) n += valueSize(x);
        return n;
      }
      if (Array.isArray(v)) {
        let n = 3;
        for (const x of v) n += 1 + valueSize(x);
        return n;
      }
      let n = 3;
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        if (x === undefined) continue;
        n += 1 + utf8Length(k) + valueSize(x);
      }
      return n;
    }
    default:
      return 0;
  }
}

/** Size of a whole item (top-level attributes: name + value, no per-attribute overhead). */
export function itemSize(item: Record<string, unknown>): number {
  let n = 0;
  for (const [k, v] of Object.entries(item)) {
    if (v === undefined) continue;
    n += utf8Length(k) + valueSize(v);
  }
  return n;
}

export const KB = 1024;

/** Write units of one write whose item is `before` bytes before and `after` bytes after (0 = absent). */
export function writeUnits(after: number, before = 0): number {
  return Math.max(1, Math.ceil(Math.max(after, before) / KB));
}

/** Strongly consistent read units of an item of `size` bytes (0 = absent: still 1). */
export function readUnits(size: number): number {
  return Math.max(1, Math.ceil(size / (4 * KB)));
}
