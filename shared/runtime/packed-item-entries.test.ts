/**
 * The entries of one packed item (packed-item-entries.ts) against oracles that share nothing with
 * them: a Map of key → values, sorted with the default string order, and sizes counted from the
 * documented rule (key bytes + 3, per state its name's length + its bytes + 4).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { entryOf, find, ITEM_OVERHEAD, lastWriteWins, mergeRows, sortedEntries, type Entry, type Values } from './packed-item-entries.js';
import type { StateRow } from './ports.js';

const enc = new TextEncoder();
const row = (key: string, values: Values): StateRow => ({ operatorId: 'op', keyGroup: 1, key, values });
const byKey = <T extends { key: string }>(a: T, b: T) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
const sizeOf = (key: string, values: Values) => {
  let n = enc.encode(key).length + 3;
  for (const [name, v] of Object.entries(values)) n += name.length + v.length + 4;
  return n;
};
const plain = (es: readonly Entry[]) => es.map((e) => [e.key, Object.fromEntries(Object.entries(e.values).map(([n, v]) => [n, [...v]]))]);

// few keys, names and values: rows hit, miss and repeat entries, and values are often equal
const keyArb = fc.oneof({ weight: 20, arbitrary: fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'é'), maxLength: 3 }) }, { weight: 1, arbitrary: fc.constantFrom('\u{1F642}', 'z\uE000') });
const bytesArb = fc.oneof(fc.constantFrom(new Uint8Array(0), new Uint8Array([1]), new Uint8Array([2]), new Uint8Array([1, 2])), fc.uint8Array({ maxLength: 6 }));
const valuesArb: fc.Arbitrary<Values> = fc.dictionary(fc.constantFrom('n', 'sum', 'list'), bytesArb, { maxKeys: 3 });
const setValuesArb: fc.Arbitrary<Values> = fc.dictionary(fc.constantFrom('n', 'sum', 'list'), bytesArb, { minKeys: 1, maxKeys: 3 });
const bound = fc.option(keyArb, { nil: undefined, freq: 2 });

describe('entries of an item', () => {
  it('entryOf sizes an entry as split decisions count it; a key with no states counts its key only', () => {
    expect(entryOf('ab', {}).size).toBe(2 + 3);
    expect(entryOf('é', { n: new Uint8Array(5), list: new Uint8Array(0) }).size).toBe(2 + 3 + (1 + 5 + 4) + (4 + 0 + 4));
    expect([...entryOf('é', {}).kb]).toEqual([0xc3, 0xa9]);
  });

  it('sortedEntries: keys ascending, each once (the last duplicate wins), sized, whatever order they come in', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(keyArb, valuesArb), { maxLength: 12 }), (pairs) => {
        const decoded = pairs.map(([key, values]) => ({ key, kb: enc.encode(key), values }));
        const oracle = [...new Map(pairs)].map(([key, values]) => ({ key, values })).sort(byKey);
        const got = sortedEntries(decoded);
        expect(got.map((e) => ({ key: e.key, values: e.values }))).toEqual(oracle);
        for (const e of got) {
          expect(e.size).toBe(sizeOf(e.key, e.values));
          expect([...e.kb]).toEqual([...enc.encode(e.key)]);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('find: the entry of the key, or none (binary search over ascending keys)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(keyArb, { maxLength: 20 }), keyArb, (keys, probe) => {
        const entries = sortedEntries(keys.map((key) => ({ key, kb: enc.encode(key), values: { n: enc.encode(key) } })));
        expect(find(entries, probe)?.key).toBe(keys.includes(probe) ? probe : undefined);
        for (const k of keys) expect(find(entries, k)?.values.n).toEqual(enc.encode(k));
      }),
      { numRuns: 500 },
    );
  });

  it('lastWriteWins: each key once with its last row, in the order keys first came; rows already ascending are taken as they are', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(keyArb, valuesArb), { maxLength: 12 }), (pairs) => {
        const rows = pairs.map(([k, v]) => row(k, v));
        const firstAt = new Map<string, number>();
        const last = new Map<string, StateRow>();
        rows.forEach((r, i) => {
          if (!firstAt.has(r.key)) firstAt.set(r.key, i);
          last.set(r.key, r);
        });
        const want = [...firstAt.keys()].map((k) => last.get(k)!);
        const got = lastWriteWins(rows);
        expect(got).toHaveLength(want.length);
        got.forEach((r, i) => expect(r).toBe(want[i]));
      }),
      { numRuns: 500 },
    );
    const ascending = [row('a', {}), row('b', {}), row('c', {})];
    expect(lastWriteWins(ascending)).toBe(ascending);
  });
});

describe("mergeRows: a checkpoint's rows merged into an item", () => {
  /** the merge as a Map: entries of [lo, hi), rows applied in order (no states: the key is cleared) */
  function oracle(old: ReadonlyArray<readonly [string, Values]>, rows: readonly StateRow[], lo: string | undefined, hi: string | undefined) {
    const inRange = (k: string) => (lo === undefined || lo <= k) && (hi === undefined || k < hi);
    const m = new Map(old.filter(([k]) => inRange(k)));
    const dropped = old.length - m.size;
    const before = new Map(m);
    for (const r of rows) {
      if (Object.keys(r.values).length) m.set(r.key, r.values);
      else m.delete(r.key);
    }
    const entries = [...m].map(([key, values]) => ({ key, values })).sort(byKey);
    const same = (a: Values | undefined, b: Values | undefined) =>
      !!a && !!b && Object.keys(a).length === Object.keys(b).length && Object.keys(a).every((n) => !!b[n] && Buffer.from(a[n]!).equals(Buffer.from(b[n]!)));
    const changedExactly = dropped > 0 || before.size !== m.size || [...m].some(([k, v]) => !same(before.get(k), v));
    const changedLoosely = dropped > 0 || rows.some((r) => Object.keys(r.values).length > 0 || before.has(r.key));
    const bytes = ITEM_OVERHEAD + entries.reduce((a, e) => a + sizeOf(e.key, e.values), 0);
    return { entries, bytes, changedExactly, changedLoosely };
  }

  it('gives the item its entries of [lo, hi) with the rows applied, their bytes, and whether anything changed', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(keyArb, setValuesArb), { selector: ([k]) => k, maxLength: 12 }),
        fc.uniqueArray(fc.tuple(keyArb, valuesArb), { selector: ([k]) => k, maxLength: 8 }),
        bound,
        bound,
        fc.boolean(),
        fc.boolean(),
        (oldPairs, rowPairs, lo, hi, sortRows, compare) => {
          const old = sortedEntries(oldPairs.map(([key, values]) => ({ key, kb: enc.encode(key), values })));
          const oldCopy = plain(old);
          const rows = rowPairs.map(([k, v]) => row(k, v));
          if (sortRows) rows.sort(byKey);
          const got = mergeRows(old, rows, lo, hi, compare);
          const want = oracle(oldPairs, rows, lo, hi);
          expect(got.entries.map((e) => ({ key: e.key, values: e.values }))).toEqual(want.entries);
          for (const e of got.entries) {
            expect(e.size).toBe(sizeOf(e.key, e.values));
            expect([...e.kb]).toEqual([...enc.encode(e.key)]);
          }
          expect(got.bytes).toBe(want.bytes);
          expect(got.changed).toBe(compare ? want.changedExactly : want.changedLoosely);
          // the item's own list (shared with the cache) is left as it was
          expect(plain(old)).toEqual(oldCopy);
          if (compare) {
            // an entry a row leaves as it was is the item's own (its key bytes and size not made again)
            for (const e of got.entries) {
              const had = (lo === undefined || lo <= e.key) && (hi === undefined || e.key < hi) ? old.find((o) => o.key === e.key) : undefined;
              const r = rows.find((x) => x.key === e.key);
              if (had && r) expect(e === had).toBe(oracle([[had.key, had.values]], [r], undefined, undefined).changedExactly === false);
            }
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('a row equal to its entry changes nothing only when compared, byte for byte and state by state', () => {
    const old = [entryOf('a', { n: new Uint8Array([1, 2]) }), entryOf('b', { n: new Uint8Array([3]), sum: new Uint8Array([4]) })];
    const same = (rows: StateRow[]) => mergeRows(old, rows, undefined, undefined, true).changed === false;
    expect(same([row('a', { n: new Uint8Array([1, 2]) })])).toBe(true);
    // the entry kept as it was still counts its bytes
    expect(mergeRows(old, [row('a', { n: new Uint8Array([1, 2]) })], undefined, undefined, true).bytes).toBe(ITEM_OVERHEAD + old[0]!.size + old[1]!.size);
    expect(mergeRows(old, [row('a', { n: new Uint8Array([1, 2]) })], undefined, undefined, false).changed).toBe(true);
    expect(same([row('a', { n: new Uint8Array([1, 3]) })])).toBe(false); // a byte differs
    expect(same([row('a', { n: new Uint8Array([1]) })])).toBe(false); // shorter
    expect(same([row('a', { n: new Uint8Array([1, 2, 0]) })])).toBe(false); // longer
    expect(same([row('a', { sum: new Uint8Array([1, 2]) })])).toBe(false); // another state of the same size
    expect(same([row('a', { n: new Uint8Array([1, 2]), sum: new Uint8Array([0]) })])).toBe(false); // a state more
    expect(same([row('b', { n: new Uint8Array([3]) })])).toBe(false); // a state less
    expect(same([row('b', { sum: new Uint8Array([4]), n: new Uint8Array([3]) })])).toBe(true); // states in another order
    expect(same([row('c', {})])).toBe(true); // clearing a key the item does not hold
    expect(same([row('a', {})])).toBe(false);
  });

  it('entries outside [lo, hi), left behind by a split, go and count as a change', () => {
    const old = ['a', 'b', 'c', 'd'].map((k) => entryOf(k, { n: new Uint8Array([1]) }));
    const keys = (lo: string | undefined, hi: string | undefined) => mergeRows(old, [], lo, hi, true);
    expect(keys(undefined, undefined)).toMatchObject({ changed: false, bytes: ITEM_OVERHEAD + 4 * old[0]!.size });
    expect(keys('b', undefined).entries.map((e) => e.key)).toEqual(['b', 'c', 'd']);
    expect(keys('b', undefined).changed).toBe(true);
    expect(keys(undefined, 'd').entries.map((e) => e.key)).toEqual(['a', 'b', 'c']);
    expect(keys(undefined, 'd').changed).toBe(true);
    expect(keys('a', 'e')).toMatchObject({ changed: false });
    expect(keys('bb', 'c').entries).toEqual([]);
  });
});
