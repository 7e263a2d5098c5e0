import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SharedBounds } from './window-parts.js';

describe('SharedBounds', () => {
  it('makes each entry with its own bounds and accumulator, whatever bounds came before (like a plain [start, end, acc])', () => {
    // runs of equal bounds (a window's keys) between changes of the start, the end or both
    const base = Date.UTC(2026, 0, 1);
    const bounds = fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 1, max: 3 })).map(([s, len]) => [base + s * 1000, base + (s + len) * 1000] as const);
    fc.assert(
      fc.property(fc.array(fc.tuple(bounds, fc.integer({ min: 1, max: 4 })), { maxLength: 40 }), (runs) => {
        const maker = new SharedBounds();
        const made: Array<[number, number, unknown]> = [];
        const oracle: Array<[number, number, unknown]> = [];
        let n = 0;
        for (const [[start, end], count] of runs) {
          for (let i = 0; i < count; i++) {
            const acc = { n: n++ };
            made.push(maker.entry(start, end, acc));
            oracle.push([start, end, acc]);
          }
        }
        expect(made).toEqual(oracle);
        // each entry is an array of its own: an accumulator replaced in place changes one entry
        expect(new Set(made).size).toBe(made.length);
      }),
      { numRuns: 300, seed: 20261204 },
    );
  });
});
