import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { coerce, coerceCommon, rowParser, type ColumnDef, type SqlType, type TableDef } from './catalog.js';

const TYPES: SqlType[] = ['BIGINT', 'DOUBLE', 'VARCHAR', 'BOOLEAN', 'TIMESTAMP'];

const value = fc.oneof(
  fc.double(), // NaN, ±Infinity, -0 among them
  fc.integer(),
  fc.constantFrom(0, -0, 1.5, -2.5, 1e21, Number.MAX_SAFE_INTEGER, NaN, Infinity, -Infinity),
  fc.string(),
  fc.constantFrom('', '12', '-3', '1.5', 'true', '0', '2026-12-04 17:00:00', 'x'),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.array(fc.integer(), { maxLength: 2 }),
  fc.dictionary(fc.string({ maxLength: 2 }), fc.integer(), { maxKeys: 2 }),
);

/** the value or the error's message */
const outcome = (f: () => unknown): { v: unknown } | { error: string } => {
  try {
    return { v: f() };
  } catch (err) {
    return { error: (err as Error).message };
  }
};

describe('coerceCommon', () => {
  it('gives what coerce gives, value or error, for every column type', () => {
    fc.assert(
      fc.property(value, fc.constantFrom(...TYPES), (v, type) => {
        const col: ColumnDef = { name: 'c', type };
        // Object.is: -0 stays -0, NaN stays NaN
        const want = outcome(() => coerce(v, col));
        const got = outcome(() => coerceCommon(v, col));
        if ('error' in want) expect(got).toEqual(want);
        else {
          expect('v' in got).toBe(true);
          expect(Object.is((got as { v: unknown }).v, want.v) || JSON.stringify((got as { v: unknown }).v) === JSON.stringify(want.v)).toBe(true);
        }
      }),
      { numRuns: 5000, seed: 20261204 },
    );
  });

  it("leaves a JSON table's rows as coerce makes them", () => {
    const columns: ColumnDef[] = TYPES.map((type, i) => ({ name: `c${i}`, type }));
    const table: TableDef = { name: 't', connector: 'kinesis', columns };
    const parse = rowParser(table);
    fc.assert(
      fc.property(fc.array(value, { minLength: columns.length, maxLength: columns.length }), (vs) => {
        const raw = Object.fromEntries(vs.map((v, i) => [`c${i}`, v]));
        const want = outcome(() => Object.fromEntries(columns.map((c) => [c.name, coerce(raw[c.name], c)])));
        expect(outcome(() => parse(raw))).toEqual(want);
      }),
      { numRuns: 2000, seed: 7 },
    );
  });
});
