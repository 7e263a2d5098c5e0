import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ByteReader, ByteWriter } from './varint.js';

const encode = (f: (w: ByteWriter) => void, initial?: number) => {
  const w = new ByteWriter(initial);
  f(w);
  return w.finish();
};

describe('varint (unsigned LEB128)', () => {
  it('encodes known values', () => {
    expect([...encode((w) => w.varint(0))]).toEqual([0]);
    expect([...encode((w) => w.varint(1))]).toEqual([1]);
    expect([...encode((w) => w.varint(127))]).toEqual([0x7f]);
    expect([...encode((w) => w.varint(128))]).toEqual([0x80, 0x01]);
    expect([...encode((w) => w.varint(300))]).toEqual([0xac, 0x02]);
    expect([...encode((w) => w.varint(16_384))]).toEqual([0x80, 0x80, 0x01]);
    expect(encode((w) => w.varint(Number.MAX_SAFE_INTEGER))).toHaveLength(8);
  });

  it('round-trips every safe non-negative integer, using ceil(bits/7) bytes', () => {
    fc.assert(
      fc.property(fc.maxSafeNat(), (n) => {
        const b = encode((w) => w.varint(n), 1);
        expect(b.length).toBe(Math.max(1, Math.ceil(n.toString(2).length / 7)));
        const r = new ByteReader(b);
        expect(r.varint()).toBe(n);
        expect(r.done).toBe(true);
      }),
    );
  });

  it('refuses negative, fractional and unsafe numbers', () => {
    for (const bad of [-1, 0.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => encode((w) => w.varint(bad))).toThrow(RangeError);
    }
  });

  it('fails on a truncated or overlong varint', () => {
    expect(() => new ByteReader(new Uint8Array([0x80, 0x80])).varint()).toThrow(RangeError);
    expect(() => new ByteReader(new Uint8Array([])).varint()).toThrow(RangeError);
    expect(() => new ByteReader(new Uint8Array(12).fill(0xff)).varint()).toThrow(RangeError);
  });
});

describe('svarint (zig-zag)', () => {
  it('maps small magnitudes to small codes', () => {
    const code = (n: number) => new ByteReader(encode((w) => w.svarint(n))).varint();
    expect([0, -1, 1, -2, 2].map(code)).toEqual([0, 1, 2, 3, 4]);
    expect(encode((w) => w.svarint(-64))).toHaveLength(1);
    expect(encode((w) => w.svarint(64))).toHaveLength(2);
  });

  it('round-trips integers of magnitude below 2^52', () => {
    fc.assert(
      fc.property(fc.integer({ min: -(2 ** 52 - 1), max: 2 ** 52 - 1 }), (n) => {
        const r = new ByteReader(encode((w) => w.svarint(n)));
        expect(r.svarint()).toBe(n);
        expect(r.done).toBe(true);
      }),
    );
    for (const n of [2 ** 52 - 1, -(2 ** 52 - 1), -(2 ** 52)]) expect(new ByteReader(encode((w) => w.svarint(n))).svarint()).toBe(n);
  });

  it('refuses what it cannot carry', () => {
    expect(() => encode((w) => w.svarint(2 ** 52))).toThrow(RangeError);
    expect(() => encode((w) => w.svarint(0.3))).toThrow(RangeError);
    expect(() => encode((w) => w.svarint(Number.NaN))).toThrow(RangeError);
  });

  // ENGINE BUG (varint.ts, svarint): a fraction whose double is an integer passes the check in
  // varint(): svarint(1.5) writes 3, which reads back as -2, silently. Event timestamps are
  // svarint-coded deltas, so a fractional timestamp (x.5 ms) is corrupted without an error.
  it('refuses a fraction such as 1.5 instead of writing a code that reads back as -2', () => {
    let b: Uint8Array | undefined;
    try {
      b = encode((w) => w.svarint(1.5));
    } catch {
      return; // refused: the fixed behaviour
    }
    expect(new ByteReader(b).svarint()).toBe(1.5); // today: -2
  });
});

describe('ByteWriter / ByteReader', () => {
  it('round-trips a mix of fields, growing from a tiny buffer', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ t: fc.constant('byte' as const), v: fc.integer({ min: 0, max: 255 }) }),
            fc.record({ t: fc.constant('varint' as const), v: fc.maxSafeNat() }),
            fc.record({ t: fc.constant('svarint' as const), v: fc.integer({ min: -(2 ** 40), max: 2 ** 40 }) }),
            fc.record({ t: fc.constant('float64' as const), v: fc.double() }),
            fc.record({ t: fc.constant('bytes' as const), v: fc.uint8Array({ maxLength: 300 }) }),
          ),
          { maxLength: 40 },
        ),
        (fields) => {
          const w = new ByteWriter(1);
          for (const f of fields) (w[f.t] as (v: unknown) => void)(f.v);
          const buf = w.finish();
          expect(buf.length).toBe(w.length);
          // read through a view that does not start at offset 0 of its buffer
          const shifted = new Uint8Array(buf.length + 3);
          shifted.set(buf, 3);
          const r = new ByteReader(shifted.subarray(3));
          for (const f of fields) {
            const got = (r[f.t] as () => unknown)();
            if (f.t === 'float64') expect(Object.is(got, f.v)).toBe(true);
            else expect(got).toEqual(f.v);
          }
          expect(r.done).toBe(true);
        },
      ),
    );
  });

  it('writes raw bytes without a length', () => {
    const b = encode((w) => {
      w.raw(new Uint8Array([1, 2, 3]));
      w.bytes(new Uint8Array([9]));
    });
    expect([...b]).toEqual([1, 2, 3, 1, 9]);
  });

  it('fails on a length that runs past the end, or a short float', () => {
    expect(() => new ByteReader(new Uint8Array([5, 1, 2])).bytes()).toThrow(RangeError);
    expect(() => new ByteReader(new Uint8Array([1, 2, 3])).float64()).toThrow(RangeError);
    expect(() => new ByteReader(new Uint8Array([])).byte()).toThrow(RangeError);
  });

  it('finish() returns a copy', () => {
    const w = new ByteWriter(4);
    w.byte(1);
    const a = w.finish();
    w.byte(2);
    expect([...a]).toEqual([1]);
    expect([...w.finish()]).toEqual([1, 2]);
  });
});
