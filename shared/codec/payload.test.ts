import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { decodePayload, decodePayloadAt, encodePayload, encodePayloadRange, payloadRange } from './payload.js';
import { encodePayloadFast } from './payload-writer.js';

/** msgpackr alone, with the codec's options: what `decodePayloadAt` must agree with */
const reference = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number' });

/** the same value: same types and prototypes, own keys in the same order, numbers by Object.is */
function same(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (!a || !b || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (ArrayBuffer.isView(a)) return Buffer.from(a as Uint8Array).equals(Buffer.from(b as Uint8Array));
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) return false;
  return ka.every((k) => same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

type Outcome = { ok: true; value: unknown } | { ok: false };

function outcome(f: () => unknown): Outcome {
  try {
    return { ok: true, value: f() };
  } catch {
    return { ok: false };
  }
}

function agree(bytes: Uint8Array, start = 0, end = bytes.length): void {
  const fast = outcome(() => decodePayloadAt(bytes, start, end));
  const slow = outcome(() => reference.unpack(bytes.subarray(start, end)));
  expect(fast.ok).toBe(slow.ok);
  if (fast.ok && slow.ok && !same(fast.value, slow.value)) expect(fast.value).toStrictEqual(slow.value);
  if (fast.ok && slow.ok) expect(same(fast.value, slow.value)).toBe(true);
}

const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.string({ minLength: 30, maxLength: 300 }));
const number = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -0, 2 ** 31, -(2 ** 31) - 1, 2 ** 32, 2 ** 53 - 1, -(2 ** 53) + 1, 255, 256, -32, -33, -128, -129, 65535, 65536, Number.MAX_VALUE, Number.MIN_VALUE),
  fc.float().map((f) => Math.fround(f)),
);
const leaf = fc.oneof(text, number, fc.boolean(), fc.constant(null));
const value = fc.letrec((tie) => ({
  any: fc.oneof({ depthSize: 'small' }, leaf, tie('array'), tie('object')),
  array: fc.array(tie('any'), { maxLength: 20 }),
  object: fc.dictionary(fc.oneof(text, fc.constantFrom('__proto__', 'constructor', 'k', 'ts', '0', '10', 'a'.repeat(40))), tie('any'), { maxKeys: 20 }),
})).any;

describe('decodePayloadAt', () => {
  it('gives what msgpackr gives for encoded values, at any offset of a larger buffer', () => {
    fc.assert(
      fc.property(value, fc.uint8Array({ maxLength: 8 }), fc.uint8Array({ maxLength: 8 }), (v, before, after) => {
        const p = encodePayload(v);
        const buf = new Uint8Array([...before, ...p, ...after]);
        agree(buf, before.length, before.length + p.length);
        expect(same(decodePayloadAt(buf, before.length, before.length + p.length), decodePayload(p))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('gives what msgpackr gives (value or error) for arbitrary and mutated bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 60 }), (bytes) => agree(bytes)),
      { numRuns: 5000 },
    );
    fc.assert(
      fc.property(value, fc.nat(), fc.nat({ max: 255 }), fc.integer({ min: -3, max: 3 }), (v, at, byte, cut) => {
        const p = new Uint8Array(encodePayload(v));
        p[at % p.length] = byte;
        agree(p, 0, Math.max(1, Math.min(p.length, p.length + cut)));
      }),
      { numRuns: 3000 },
    );
  });

  it('reads every MessagePack type it handles itself, and leaves the others to msgpackr', () => {
    const hex = (h: string) => Uint8Array.from(Buffer.from(h.replace(/ /g, ''), 'hex'));
    for (const h of [
      'ca 3f c0 00 00', // float32 1.5
      'ca 3d cc cc cd', // float32 0.1 (not rounded to 0.1)
      'cf 00 00 00 01 00 00 00 02', // uint64
      'd3 ff ff ff ff ff ff ff fe', // int64 -2
      'd0 80',
      'd1 80 00',
      'd2 80 00 00 00',
      'cd ff ff',
      'ce ff ff ff ff',
      'dc 00 02 01 02', // array16
      '82 a1 61 01 a1 61 02', // repeated key: the last wins, in the first one's place
      '81 a9 5f 5f 70 72 6f 74 6f 5f 5f 01', // __proto__ → __proto_
      '81 01 02', // number key
      '81 c0 02', // nil key
      '81 c3 02', // boolean key
      'c4 02 01 02', // bin 8
      'd4 01 00', // fixext
      'c1',
      '93 01 02', // truncated array
      '01 02', // trailing bytes
      'a3 e2 82 ac', // "€"
      'a2 c3 28', // invalid UTF-8
      'a3 ef bb bf', // a BOM is kept
      'ed a0 80', // lone surrogate, CESU style
      'a3 ed a0 80',
    ]) {
      agree(hex(h));
    }
    // an empty range is malformed either way
    expect(() => decodePayloadAt(new Uint8Array([0x90, 0x90]), 1, 1)).toThrow();
  });

  it('does not let one payload leak into the next (keys, strings and state are per call)', () => {
    const a = encodePayload({ k: 'user-1', v: 1, ts: 1_767_225_600_000 });
    const b = encodePayload({ k: 'user-2', w: [1, 'x'], ts: -1.5 });
    for (let i = 0; i < 3; i++) {
      expect(decodePayloadAt(a, 0, a.length)).toStrictEqual({ k: 'user-1', v: 1, ts: 1_767_225_600_000 });
      expect(decodePayloadAt(b, 0, b.length)).toStrictEqual({ k: 'user-2', w: [1, 'x'], ts: -1.5 });
    }
  });
});

describe('encodePayload', () => {
  const bytesOf = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
  const ascii = fc.string({ unit: fc.integer({ min: 0, max: 0x7f }).map((c) => String.fromCharCode(c)), maxLength: 40 });
  const longAscii = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 250, maxLength: 70_000 }).filter((x) => x.length < 300 || x.length > 65_000);
  const bin = fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.constant(new Uint8Array(70_000).fill(7)), fc.uint8Array({ maxLength: 20 }).map((b) => Buffer.from(b)));
  const asciiNumber = fc.oneof(number, fc.constantFrom(127, 128, -0x8000, -0x8001, 2 ** 32 - 1, NaN, Infinity, -Infinity, 1.5, Date.UTC(2026, 0, 1)));
  const asciiLeaf = fc.oneof(ascii, asciiNumber, fc.boolean(), fc.constant(null), fc.constant(undefined), bin);
  const asciiValue = fc.letrec((tie) => ({
    any: fc.oneof({ depthSize: 'small' }, asciiLeaf, tie('array'), tie('object')),
    array: fc.oneof(fc.array(tie('any'), { maxLength: 20 }), fc.array(fc.integer(), { minLength: 16, maxLength: 70 })),
    // no own `constructor` key: msgpackr looks at it to choose a writer, so such objects are left to it
    object: fc.dictionary(fc.oneof(ascii, fc.constantFrom('__proto__', '0', '10', 'k', 'ts', 'a'.repeat(40))), tie('any'), { maxKeys: 20, noNullPrototype: true }),
  })).any;

  it("writes msgpackr's exact bytes for the shapes it writes itself, and writes those shapes itself", () => {
    fc.assert(
      fc.property(asciiValue, (v) => {
        const fast = encodePayloadFast(v);
        expect(fast).toBeDefined();
        expect(bytesOf(fast!)).toBe(bytesOf(reference.pack(v)));
        expect(bytesOf(encodePayload(v))).toBe(bytesOf(reference.pack(v)));
      }),
      { numRuns: 500 },
    );
    // long strings, big maps and a value larger than a chunk
    const big = { rows: Array.from({ length: 5_000 }, (_, i) => ['op1', i % 128, `user-${i}`, { count: new Uint8Array([48 + (i % 10)]) }]), s: 'x'.repeat(70_000) };
    expect(bytesOf(encodePayloadFast(big)!)).toBe(bytesOf(reference.pack(big)));
    fc.assert(
      fc.property(longAscii, (s) => {
        expect(bytesOf(encodePayloadFast({ s })!)).toBe(bytesOf(reference.pack({ s })));
      }),
      { numRuns: 20 },
    );
  });

  it('gives every other value it carries to msgpackr: the same bytes, or the same error', () => {
    const other = fc.oneof(
      value,
      fc.date({ noInvalidDate: true }).map((d) => [d]),
      fc.constant(Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 })),
      fc.constant({ hasOwnProperty: 1, a: 2 }),
      fc.constant({ f: () => 1 }),
    );
    fc.assert(
      fc.property(other, (v) => {
        const want = outcome(() => bytesOf(reference.pack(v)));
        const got = outcome(() => bytesOf(encodePayload(v)));
        expect(got).toEqual(want);
      }),
      { numRuns: 500 },
    );
  });

  it('refuses what msgpackr would read back changed (a bigint, a Map, a Set, a cycle), naming where in the value', () => {
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.back = [cycle];
    const changed: Array<[unknown, RegExp]> = [
      [{ b: 12n }, /^this value would not be read back as written: at \.b: 12n is a bigint/],
      [[1, { m: new Map([['a', 1]]) }], /^this value would not be read back as written: at \[1\]\.m: a Map is read back .* as an object/],
      [new Set([1, 2]), /^this value would not be read back as written: a Set is read back .* as an array/],
      [cycle, /^this value would not be read back as written: at \.back\[0\]: the value holds itself here \(a cycle\)/],
    ];
    for (const [v, why] of changed) {
      expect(() => encodePayload(v)).toThrow(why);
      expect(() => encodePayloadRange(v)).toThrow(why);
      // msgpackr alone would write it, or fail with its own stack overflow
      if (v !== cycle) expect(decodePayload(reference.pack(v))).not.toEqual(v);
    }
  });

  it('results do not overlap: earlier results keep their bytes', () => {
    const made = Array.from({ length: 3_000 }, (_, i) => ({ v: { i, s: `k${i}`, pad: 'p'.repeat(i % 50) } }));
    const encoded = made.map((m) => encodePayload(m.v));
    made.forEach((m, i) => expect(decodePayload(encoded[i]!)).toEqual(m.v));
  });

  it("encodePayloadRange: its range holds encodePayload's bytes, and keeps them while later values are written", () => {
    // values of the fast writer's shapes and others (non-ASCII text, a Date: msgpackr's), of every size up to past a chunk
    const anyValue = fc.oneof(asciiValue, fc.string().map((s) => ({ s })), fc.constant([new Date(7)]), fc.constant({ s: 'é'.repeat(100) }));
    fc.assert(
      fc.property(fc.array(anyValue, { minLength: 1, maxLength: 60 }), (values) => {
        const written = values.map((v) => {
          const bytes = encodePayloadRange(v);
          return { bytes, start: payloadRange.start, end: payloadRange.end };
        });
        values.forEach((v, i) => {
          const w = written[i]!;
          expect(bytesOf(w.bytes.subarray(w.start, w.end))).toBe(bytesOf(reference.pack(v)));
        });
      }),
      { numRuns: 200, seed: 20_261_204 },
    );
  });
});

describe('strings UTF-8 cannot carry', () => {
  it('a value holding a lone surrogate (in a string, a key or deep) is refused, not written as U+FFFD', () => {
    const bad = [{ k: '\udc00' }, ['ok', 'x\ud800'], { '\ud83d': 1 }, { a: { b: [{ c: 'caf\u00e9 \udfff' }] } }, 'end \ud83d'];
    // msgpackr alone writes each as U+FFFD (or CESU bytes): the value read back is not the value written
    for (const v of bad) expect(() => encodePayload(v)).toThrow(/^the string ".*" holds a lone surrogate, which UTF-8 cannot carry$/);
    for (const v of bad) expect(() => encodePayload(v)).toThrow(RangeError);
  });

  it('well-formed text, surrogate pairs included, round-trips', () => {
    for (const v of [{ k: '\ud83d\ude00' }, ['caf\u00e9', '\u{10ffff}'], { '\u00e9': '\u4e2d\u6587' }, 'a'.repeat(100) + '\ud83d\ude00']) {
      expect(decodePayload(encodePayload(v))).toEqual(v);
    }
  });
});
