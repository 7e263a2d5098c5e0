import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SeqSet } from './seq-set.js';

describe('SeqSet (the dedupe set of a channel)', () => {
  it('behaves as a Set<number> for any sequence of adds, deletes and lookups', () => {
    const value = fc.oneof(fc.nat(5000), fc.integer({ min: -5, max: 5 }), fc.double(), fc.constant(2 ** 27), fc.constant(-0));
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom('add', 'delete', 'has'), value), { maxLength: 200 }), (ops) => {
        const a = new Set<number>();
        const b = new SeqSet();
        for (const [op, x] of ops) {
          if (op === 'add') {
            a.add(x);
            expect(b.add(x)).toBe(b);
          } else expect(b[op](x)).toBe(a[op](x));
          expect(b.size).toBe(a.size);
        }
        // a total order: with NaN among them, `x - y` sorts by insertion order, which differs between the two
        const order = (x: number, y: number) => (Number.isNaN(x) ? (Number.isNaN(y) ? 0 : 1) : Number.isNaN(y) ? -1 : x < y ? -1 : x > y ? 1 : 0);
        const sorted = (s: Iterable<number>) => [...s].sort(order);
        expect(sorted(b)).toEqual(sorted(a));
        expect(sorted(b.keys())).toEqual(sorted(a));
        expect(b).toBeInstanceOf(Set);
        b.clear();
        expect(b.size).toBe(0);
        expect([...b]).toEqual([]);
      }),
      // a seed found: NaN before 0 (the bitmap yields 0 first)
      { examples: [[[['add', Number.NaN], ['add', 0]]]] },
    );
  });
});
