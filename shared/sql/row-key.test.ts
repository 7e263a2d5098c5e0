import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rowKeyOf } from './row-key.js';

/** the key as the SQL compiler wrote it before: the values mapped, undefined as null, stringified */
const reference = (fns: ReadonlyArray<(r: unknown[]) => unknown>, r: unknown[]) => JSON.stringify(fns.map((f) => f(r) ?? null));

const value = fc.oneof(
  fc.double(), // NaN, ±Infinity, -0 and exponents among them
  fc.integer(),
  fc.constantFrom(0, -0, 1e21, 1e-7, Number.MAX_SAFE_INTEGER, NaN, Infinity, -Infinity),
  fc.string(),
  fc.constantFrom('\u0000', '"', '\\', '\u2028', '\ud800', 'é'),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.date({ noInvalidDate: true }),
  fc.array(fc.oneof(fc.integer(), fc.string()), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
);

describe('rowKeyOf', () => {
  it('writes the JSON text of the key values, as JSON.stringify of the array of them does', () => {
    fc.assert(
      fc.property(fc.array(value, { minLength: 1, maxLength: 4 }), (values) => {
        const fns = values.map((_, i) => (r: unknown[]) => r[i]);
        const key = rowKeyOf(fns)(values);
        expect(key).toBe(reference(fns, values));
        // and reads back as the values (undefined and non-finite numbers as null)
        expect(JSON.parse(key)).toEqual(JSON.parse(reference(fns, values)));
      }),
      { numRuns: 2000 },
    );
  });
});
