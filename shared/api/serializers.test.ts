import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { bytesSerializer, jsonSerializer, textSerializer } from './serializers.js';

const utf8 = new TextEncoder();

describe('serializers', () => {
  it('write the UTF-8 of the JSON text (and of text), whatever the characters and length', () => {
    const json = jsonSerializer<unknown>();
    // ASCII, code units just past it (Latin-1, two-byte UTF-8), any code point, lone surrogates
    const low = fc.nat(0x3ff).map((c) => String.fromCharCode(c));
    const text = fc.oneof(fc.string({ maxLength: 80 }), fc.string({ maxLength: 80, unit: low }), fc.string({ maxLength: 80, unit: 'binary' }), fc.string({ maxLength: 8, unit: fc.constantFrom('a', '\u0080', 'ÿ', '\ud800') }));
    fc.assert(
      fc.property(fc.oneof(text, fc.jsonValue(), fc.double(), fc.constant(undefined), fc.integer(), fc.integer({ min: -20, max: 20 }), fc.constantFrom(-0, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, -(2 ** 31) - 1, 10, -10, 1e9, -1e9)), (v) => {
        expect(json.encode(v)).toEqual(utf8.encode(JSON.stringify(v) ?? ''));
        if (v !== undefined) expect(json.decode(json.encode(v))).toEqual(JSON.parse(JSON.stringify(v) ?? 'null'));
      }),
      { numRuns: 1500 },
    );
    fc.assert(fc.property(text, (s) => void expect(textSerializer.encode(s)).toEqual(utf8.encode(s))), { numRuns: 500 });
  });

  it("text's check refuses exactly the strings that do not come back from their bytes", () => {
    const text = fc.oneof(fc.string({ maxLength: 20, unit: 'binary' }), fc.string({ maxLength: 6, unit: fc.constantFrom('a', '\ud800', '\udc00', '\ud83d\ude00', 'é') }));
    fc.assert(
      fc.property(text, (s) => {
        const roundTrips = textSerializer.decode(textSerializer.encode(s)) === s;
        expect(textSerializer.check!(s) === undefined).toBe(roundTrips);
      }),
      { numRuns: 1000 },
    );
  });

  it("bytes' check refuses what is not a Uint8Array (its encode would hand it on as it is)", () => {
    expect(bytesSerializer.check!(new Uint8Array(2))).toBeUndefined();
    expect(bytesSerializer.check!([1, 2] as unknown as Uint8Array)).toMatch(/Uint8Array/);
  });
});
