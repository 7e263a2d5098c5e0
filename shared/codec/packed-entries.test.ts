/**
 * The packed item codec (packed-entries.ts) against a writer of its documented layout written apart
 * from it, and the merge on an item's bytes against a Map of the item's entries with the rows
 * applied; items made byte by byte show what the merge leaves to the general one.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareKeys, decodeEntries, decodeSortedEntries, encodeEntries, encodeSortedEntries, entriesFromRows, mergeIntoEntries, type MergedRow } from './packed-entries.js';

const enc = new TextEncoder();
type Values = Record<string, Uint8Array>;
const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** bytes of the layout, as documented: a LEB128 varint per number, a length before every run of bytes */
class Writer {
  readonly out: number[] = [];
  varint(n: number): this {
    for (; n >= 128; n = Math.floor(n / 128)) this.out.push((n % 128) + 128);
    this.out.push(n);
    return this;
  }
  bytes(b: ArrayLike<number> | string): this {
    const x = typeof b === 'string' ? enc.encode(b) : b;
    this.varint(x.length);
    for (let i = 0; i < x.length; i++) this.out.push(x[i]!);
    return this;
  }
  raw(...b: number[]): this {
    this.out.push(...b);
    return this;
  }
  done(): Uint8Array {
    return new Uint8Array(this.out);
  }
}

/**
 * The documented layout: format byte, state names in order of first use, entry count, then per entry
 * the bytes shared with the previous key, the rest of the key, the state count, and per state its
 * name's index and bytes. Entries in the order given.
 */
function reference(entries: ReadonlyArray<readonly [string, Values]>): Uint8Array {
  const w = new Writer();
  const names: string[] = [];
  for (const [, v] of entries) for (const n of Object.keys(v)) if (!names.includes(n)) names.push(n);
  w.varint(1).varint(names.length);
  for (const n of names) w.bytes(n);
  w.varint(entries.length);
  let prev = new Uint8Array(0);
  for (const [key, v] of entries) {
    const kb = enc.encode(key);
    let shared = 0;
    while (shared < Math.min(prev.length, kb.length) && prev[shared] === kb[shared]) shared++;
    w.varint(shared).bytes(kb.slice(shared)).varint(Object.keys(v).length);
    for (const [n, b] of Object.entries(v)) w.varint(names.indexOf(n)).bytes(b);
    prev = kb;
  }
  return w.done();
}

/** an item of one state name "n", entries given as raw (shared, rest, states) triples */
function oneName(entries: ReadonlyArray<{ shared: number; rest: ArrayLike<number> | string; states?: ReadonlyArray<[number, ArrayLike<number>]> }>, name = 'n'): Uint8Array {
  const w = new Writer().varint(1).varint(1).bytes(name).varint(entries.length);
  for (const e of entries) {
    w.varint(e.shared).bytes(e.rest);
    const states = e.states ?? [[0, [7]]];
    w.varint(states.length);
    for (const [i, b] of states) w.varint(i).bytes(b);
  }
  return w.done();
}

const mrow = (key: string, values: Values = { n: enc.encode('9') }): MergedRow => ({ key, values });

describe('packed entries codec', () => {
  it('orders keys by code unit, equal keys alike', () => {
    expect([compareKeys('a', 'b'), compareKeys('b', 'a'), compareKeys('a', 'a'), compareKeys('Z', 'a'), compareKeys('a', 'ab')]).toEqual([-1, 1, 0, -1, -1]);
  });

  it('round-trips keys (prefix-compressed, any UTF-8) and their named values', () => {
    const m = new Map<string, Values>([
      ['user-10', { count: enc.encode('1'), sum: new Uint8Array([1, 2, 3]) }],
      ['user-1', { count: new Uint8Array(0) }],
      ['ünïcødé-🙂', { list: new Uint8Array(300).fill(9) }],
      ['user-100', {}],
    ]);
    expect(decodeEntries(encodeEntries(m))).toEqual(m);
    // the names once per item, keys sharing their prefix: far below key + name + value per row
    expect(encodeEntries(new Map(Array.from({ length: 100 }, (_, i) => [`user-${i}`, { count: new Uint8Array([i]) }]))).length).toBeLessThan(100 * 8);
  });

  it('writes the documented layout byte for byte, and reads back what it wrote (keys of any length, values of any size)', () => {
    const valuesArb = fc.dictionary(fc.constantFrom('count', 'sum', 'list', 'ü', 's'.repeat(130)), fc.uint8Array({ maxLength: 300 }), { maxKeys: 3 });
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ maxLength: 160, unit: 'grapheme' }), valuesArb), { maxLength: 150 }), (pairs) => {
        const m = new Map(pairs);
        const sorted = [...m].sort(([a], [b]) => byString(a, b));
        const d = encodeEntries(m);
        expect(hex(d)).toBe(hex(reference(sorted)));
        expect(hex(encodeSortedEntries(sorted.map(([key, values]) => ({ key, kb: enc.encode(key), values }))))).toBe(hex(d));
        const back = decodeSortedEntries(d);
        expect(back.map((e) => e.key)).toEqual(sorted.map(([k]) => k));
        expect(back.every((e) => hex(e.kb) === hex(enc.encode(e.key)))).toBe(true);
        expect(decodeEntries(d)).toEqual(m);
        // the buffer is reused: a small item after a large one holds nothing of it
        expect(hex(encodeSortedEntries([]))).toBe(hex(reference([])));
      }),
      { numRuns: 200 },
    );
  });

  it('grows its buffer for an entry many times larger than it, keeping what it wrote before', () => {
    // larger than anything encoded before in this file, so the buffer doubles more than once for it
    const big = new Uint8Array(2_000_000).fill(7);
    big[0] = 1;
    big[big.length - 1] = 2;
    const m = new Map<string, Values>([
      ['a', { n: new Uint8Array([1, 2, 3]) }],
      ['b', { n: big }],
      ['c', { n: new Uint8Array([4]) }],
    ]);
    const d = encodeEntries(m);
    const small = reference([...m].map(([k, v]) => [k, k === 'b' ? { n: new Uint8Array(0) } : v] as const));
    expect(d.length).toBe(small.length + big.length + 2); // the length varint of 2,000,000 takes 3 bytes, that of 0 one
    const back = decodeEntries(d);
    expect([...back.keys()]).toEqual(['a', 'b', 'c']);
    for (const [k, v] of m) expect(Buffer.from(back.get(k)!.n!).equals(Buffer.from(v.n!)), k).toBe(true);
  });

  it('values read back are copies: changing one leaves the item bytes as they were', () => {
    const d = encodeEntries(new Map([['k', { n: new Uint8Array([5, 6]) }]]));
    const before = hex(d);
    decodeSortedEntries(d)[0]!.values.n![0] = 99;
    expect(hex(d)).toBe(before);
  });

  it('refuses a truncated item, another format and a state name it does not list, as corrupt state', () => {
    const d = encodeEntries(new Map([['user-1', { count: new Uint8Array(40).fill(7) }]]));
    for (const end of [0, 1, 5, d.length - 1]) expect(() => decodeEntries(d.subarray(0, end))).toThrow(expect.objectContaining({ code: 'STATE_CORRUPT', message: 'packed state item is truncated' }));
    const other = d.slice();
    other[0] = 2;
    expect(() => decodeEntries(other)).toThrow(expect.objectContaining({ code: 'STATE_CORRUPT', message: 'packed state item has format 2, this version reads 1' }));
    expect(() => decodeEntries(oneName([{ shared: 0, rest: 'a', states: [[1, [1]]] }]))).toThrow(expect.objectContaining({ code: 'STATE_CORRUPT', message: 'packed state item names an unknown state' }));
    expect(decodeEntries(oneName([{ shared: 0, rest: 'a', states: [[0, [1]]] }]))).toEqual(new Map([['a', { n: new Uint8Array([1]) }]]));
  });
});

describe('merging rows into an item on its bytes', () => {
  /** the merge as a Map: the item's entries of [lo, hi) with the rows applied (no states: cleared), in the documented layout */
  function oracle(d: Uint8Array, rows: readonly MergedRow[], lo: string | undefined, hi: string | undefined, overhead: number) {
    const m = new Map([...decodeEntries(d)].filter(([k]) => (lo === undefined || lo <= k) && (hi === undefined || k < hi)));
    for (const r of rows) {
      if (Object.keys(r.values).length) m.set(r.key, r.values);
      else m.delete(r.key);
    }
    const entries = [...m].sort(([a], [b]) => byString(a, b));
    let size = overhead;
    for (const [k, v] of entries) {
      size += enc.encode(k).length + 3;
      for (const [n, b] of Object.entries(v)) size += n.length + b.length + 4;
    }
    return { d: reference(entries), size };
  }

  // keys from a few letters (rows hit, miss and clear entries, and share prefixes), now and then not ASCII
  const keyArb = fc.oneof({ weight: 150, arbitrary: fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'ab', '-'), maxLength: 6 }) }, { weight: 1, arbitrary: fc.constantFrom('é', 'a\u{1F642}', '\uE000') });
  const valueArb = fc.uint8Array({ maxLength: 140 });
  const rowValuesArb = fc.oneof({ weight: 8, arbitrary: valueArb.map((v) => ({ count: v })) }, { weight: 2, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: valueArb.map((v) => ({ sum: v })) });
  const bound = fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: keyArb });

  it('writes what applying the rows to the entries writes, whenever it takes the item, and counts its size', () => {
    let taken = 0;
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(keyArb, fc.oneof({ weight: 9, arbitrary: valueArb.map((v) => ({ count: v }) as Values) }, { weight: 1, arbitrary: fc.constant({} as Values) })), { selector: ([k]) => k, maxLength: 60 }),
        fc.uniqueArray(fc.tuple(keyArb, rowValuesArb), { selector: ([k]) => k, maxLength: 40 }),
        bound,
        bound,
        fc.nat(9).map((n) => n > 0),
        fc.nat(200),
        (stored, rowPairs, lo, hi, sortRows, overhead) => {
          const d = encodeEntries(new Map(stored));
          const rows = rowPairs.map(([key, values]) => mrow(key, values));
          if (sortRows) rows.sort((a, b) => byString(a.key, b.key));
          const fast = mergeIntoEntries(d, rows, lo, hi, overhead);
          if (!fast) return;
          taken++;
          const want = oracle(d, rows, lo, hi, overhead);
          expect(hex(fast.d)).toBe(hex(want.d));
          expect(fast.size).toBe(want.size);
        },
      ),
      { numRuns: 1500 },
    );
    // the common case is taken, not left to the general merge every time
    expect(taken).toBeGreaterThan(150);
  });

  it('merges into items of many entries and long keys (counts and lengths of two and three varint bytes)', () => {
    for (const n of [127, 128, 16384]) {
      const m = new Map(Array.from({ length: n }, (_, i) => [`k${String(i).padStart(6, '0')}`, { n: new Uint8Array([i % 256]) }] as const));
      const d = encodeEntries(m);
      const rows = [mrow('k000001', {}), mrow('k000002x'), mrow('zz'.repeat(100))];
      const fast = mergeIntoEntries(d, rows, undefined, undefined, 80);
      expect(fast).toBeDefined();
      const want = oracle(d, rows, undefined, undefined, 80);
      expect(hex(fast!.d)).toBe(hex(want.d));
      expect(fast!.size).toBe(want.size);
    }
    // a key longer than any before, in the item and in a row
    const long = 'q'.repeat(300);
    const d = encodeEntries(new Map([[long, { n: new Uint8Array([1]) }], [`${long}r`, { n: new Uint8Array([2]) }]]));
    const rows = [mrow(`${long}${'s'.repeat(200)}`)];
    expect(hex(mergeIntoEntries(d, rows, undefined, undefined, 0)!.d)).toBe(hex(oracle(d, rows, undefined, undefined, 0).d));
  });

  it('keeps entries without states as they are; an item left with none holding a state goes to the general merge', () => {
    const d = oneName([{ shared: 0, rest: 'a', states: [] }, { shared: 0, rest: 'b' }]);
    const fast = mergeIntoEntries(d, [mrow('c')], undefined, undefined, 10);
    expect(hex(fast!.d)).toBe(hex(oneName([{ shared: 0, rest: 'a', states: [] }, { shared: 0, rest: 'b' }, { shared: 0, rest: 'c', states: [[0, enc.encode('9')]] }])));
    expect(fast!.size).toBe(10 + (1 + 3) + (1 + 3 + 1 + 1 + 4) + (1 + 3 + 1 + 1 + 4));
    expect(mergeIntoEntries(d, [mrow('b', {})], undefined, undefined, 0)).toBeUndefined();
    expect(mergeIntoEntries(d, [mrow('0', {})], undefined, undefined, 0)).toBeDefined();
  });

  it('leaves to the general merge what it does not handle: two state names, keys not ASCII or out of range, rows out of order, nothing left', () => {
    const d = encodeEntries(new Map([['a', { n: enc.encode('1') }], ['b', { n: enc.encode('2') }]]));
    expect(mergeIntoEntries(d, [mrow('a'), mrow('c')], undefined, undefined, 0)).toBeDefined();
    expect(mergeIntoEntries(d, [mrow('a', { sum: enc.encode('1') })], undefined, undefined, 0)).toBeUndefined();
    expect(mergeIntoEntries(d, [mrow('a', { n: enc.encode('1'), sum: enc.encode('1') })], undefined, undefined, 0)).toBeUndefined();
    expect(mergeIntoEntries(encodeEntries(new Map([['a', { n: enc.encode('1'), sum: enc.encode('1') }]])), [mrow('a')], undefined, undefined, 0)).toBeUndefined();
    expect(mergeIntoEntries(d, [mrow('é')], undefined, undefined, 0)).toBeUndefined();
    expect(hex(mergeIntoEntries(d, [mrow('é', {})], undefined, undefined, 0)!.d)).toBe(hex(d)); // a cleared key not ASCII: no entry has it
    expect(mergeIntoEntries(d, [mrow('b\u007f')], undefined, undefined, 0)).toBeDefined();
    expect(mergeIntoEntries(d, [mrow('b\u0080')], undefined, undefined, 0)).toBeUndefined();
    expect(mergeIntoEntries(encodeEntries(new Map([['é', { n: enc.encode('1') }]])), [mrow('a')], undefined, undefined, 0)).toBeUndefined();
    expect(mergeIntoEntries(d, [mrow('c'), mrow('a')], undefined, undefined, 0)).toBeUndefined();
    expect(mergeIntoEntries(d, [mrow('a'), mrow('a')], undefined, undefined, 0)).toBeUndefined();
    // rows and entries must lie in [lo, hi): entries outside are left by a split, the general merge drops them
    expect(mergeIntoEntries(d, [mrow('a')], 'a', 'c', 0)).toBeDefined();
    expect(mergeIntoEntries(d, [mrow('a')], 'b', undefined, 0)).toBeUndefined();
    expect(mergeIntoEntries(d, [mrow('c')], undefined, 'b', 0)).toBeUndefined();
    expect(mergeIntoEntries(d, [mrow('b')], undefined, 'b', 0)).toBeUndefined(); // the old 'b' and the row lie at hi
    expect(mergeIntoEntries(d, [mrow('a')], undefined, 'b', 0)).toBeUndefined(); // the old 'b' lies at hi
    expect(mergeIntoEntries(d, [mrow('b')], 'b', undefined, 0)).toBeUndefined(); // the old 'a' lies below lo
    // rows outside [lo, hi) of an item whose entries all lie in it
    const bc = encodeEntries(new Map([['b', { n: enc.encode('1') }], ['c', { n: enc.encode('2') }]]));
    expect(mergeIntoEntries(bc, [mrow('b'), mrow('c')], 'b', 'd', 0)).toBeDefined();
    expect(mergeIntoEntries(bc, [mrow('a')], 'b', 'd', 0)).toBeUndefined();
    expect(mergeIntoEntries(bc, [mrow('d')], 'b', 'd', 0)).toBeUndefined();
    expect(mergeIntoEntries(bc, [mrow('a')], undefined, 'd', 0)).toBeDefined();
    expect(mergeIntoEntries(bc, [mrow('d')], 'b', undefined, 0)).toBeDefined();
    // (several rows: the first or the last outside)
    expect(mergeIntoEntries(bc, [mrow('b'), mrow('c'), mrow('d')], 'b', 'd', 0)).toBeUndefined();
    expect(mergeIntoEntries(bc, [mrow('a'), mrow('b'), mrow('c')], 'b', 'd', 0)).toBeUndefined();
    expect(mergeIntoEntries(bc, [mrow('b'), mrow('bb'), mrow('c')], 'b', 'd', 0)).toBeDefined();
    expect(mergeIntoEntries(d, [mrow('a', {}), mrow('b', {})], undefined, undefined, 0)).toBeUndefined();
    expect(mergeIntoEntries(d.subarray(0, d.length - 1), [mrow('a')], undefined, undefined, 0)).toBeUndefined();
  });

  it('leaves to the general merge an item whose bytes it does not recognise as the common case', () => {
    const ok = oneName([{ shared: 0, rest: 'a' }, { shared: 1, rest: 'b' }, { shared: 0, rest: 'b' }]);
    expect(mergeIntoEntries(ok, [mrow('c')], undefined, undefined, 0)).toBeDefined();
    const refused: Record<string, Uint8Array> = {
      'another format': new Writer().varint(2).varint(1).bytes('n').varint(0).done(),
      'no state name': new Writer().varint(1).varint(0).varint(0).done(),
      'a name past the end': new Writer().varint(1).varint(1).varint(5).raw(110).done(),
      'a name not ASCII': oneName([{ shared: 0, rest: 'a' }], 'ü'),
      'no entry count': new Writer().varint(1).varint(1).bytes('n').done(),
      'an entry count past the entries': new Writer().varint(1).varint(1).bytes('n').varint(2).varint(0).bytes('a').varint(1).varint(0).bytes([7]).done(),
      'more bytes after the last entry': new Writer().raw(...ok).raw(0).done(),
      // six bytes for a count of 1: read as one, the item would be taken
      'a varint of more bytes than a length takes': new Writer().varint(1).varint(1).bytes('n').raw(0x81, 0x80, 0x80, 0x80, 0x80, 0x00).varint(0).bytes('a').varint(1).varint(0).bytes([7]).done(),
      'sharing more than the last key': oneName([{ shared: 1, rest: 'a' }]),
      'sharing more than the last key, later': oneName([{ shared: 0, rest: 'a' }, { shared: 2, rest: 'b' }]),
      'a key past the end': new Writer().varint(1).varint(1).bytes('n').varint(1).varint(0).varint(9).raw(97).done(),
      'a key not ASCII': oneName([{ shared: 0, rest: [0x61, 0xc3, 0xa9] }]),
      'keys descending': oneName([{ shared: 0, rest: 'b' }, { shared: 0, rest: 'a' }]),
      'keys descending after a shared prefix': oneName([{ shared: 0, rest: 'ab' }, { shared: 1, rest: 'a' }]),
      'a key twice': oneName([{ shared: 0, rest: 'a' }, { shared: 1, rest: '' }]),
      'a key shorter than the one before it': oneName([{ shared: 0, rest: 'ab' }, { shared: 1, rest: '' }]),
      'two states': oneName([{ shared: 0, rest: 'a', states: [[0, [1]], [0, [2]]] }]),
      'a state of another name': oneName([{ shared: 0, rest: 'a', states: [[1, [1]]] }]),
      'a value past the end': new Writer().varint(1).varint(1).bytes('n').varint(1).varint(0).bytes('a').varint(1).varint(0).varint(5).raw(1).done(),
      'no state count': new Writer().varint(1).varint(1).bytes('n').varint(1).varint(0).bytes('a').done(),
    };
    for (const [what, d] of Object.entries(refused)) expect(mergeIntoEntries(d, [mrow('c')], undefined, undefined, 0), what).toBeUndefined();
    // a varint of five bytes is still one (a length written with more bytes than it needs)
    const padded = new Writer().varint(1).varint(1).bytes('n').raw(0x81, 0x80, 0x80, 0x80, 0x00).varint(0).bytes('a').varint(1).varint(0).bytes([7]).done();
    expect(hex(mergeIntoEntries(padded, [mrow('c')], undefined, undefined, 0)!.d)).toBe(hex(oneName([{ shared: 0, rest: 'a' }, { shared: 0, rest: 'c', states: [[0, enc.encode('9')]] }])));
  });
});

describe('an item made from rows alone, on bytes', () => {
  // keys from a few letters, now and then not ASCII; states of one name mostly, a clear now and then, rarely another name or two
  const keyArb = fc.oneof({ weight: 60, arbitrary: fc.string({ unit: fc.constantFrom('a', 'b', 'ab', 'k1', '-'), minLength: 1, maxLength: 7 }) }, { weight: 1, arbitrary: fc.constantFrom('é', '\u{1F642}') });
  const valuesArb = fc.oneof(
    { weight: 20, arbitrary: fc.uint8Array({ maxLength: 150 }).map((v): Values => ({ count: v })) },
    { weight: 3, arbitrary: fc.constant({} as Values) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 4 }).map((v): Values => ({ sum: v })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 4 }).map((v): Values => ({ count: v, sum: v })) },
  );

  it('writes what encoding the rows that set a state writes (the general path of a new item), whenever it takes the rows, and counts their size', () => {
    let taken = 0;
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(keyArb, valuesArb), { selector: ([k]) => k, maxLength: 200 }), fc.nat(9).map((n) => n > 0), fc.nat(200), (pairs, sortRows, overhead) => {
        const rows = pairs.map(([key, values]) => mrow(key, values));
        if (sortRows) rows.sort((a, b) => byString(a.key, b.key));
        const fast = entriesFromRows(rows, overhead);
        if (!fast) return;
        taken++;
        // the oracle: the rows that set a state, sorted, in the documented layout
        const entries = rows.filter((r) => Object.keys(r.values).length).map((r) => [r.key, r.values] as const).sort(([a], [b]) => byString(a, b));
        let size = overhead;
        for (const [k, v] of entries) {
          size += enc.encode(k).length + 3;
          for (const [n, b] of Object.entries(v)) size += n.length + b.length + 4;
        }
        expect(hex(fast.d)).toBe(hex(reference(entries)));
        expect(hex(fast.d)).toBe(hex(encodeSortedEntries(entries.map(([key, values]) => ({ key, kb: enc.encode(key), values })))));
        expect(fast.size).toBe(size);
      }),
      { numRuns: 1500, seed: 20261204 },
    );
    expect(taken).toBeGreaterThan(300);
  });

  it('leaves to the general merge rows it does not handle: no state set, two names, a name not ASCII, keys not ASCII or out of order', () => {
    expect(entriesFromRows([mrow('a', {}), mrow('b', {})], 0)).toBeUndefined();
    expect(entriesFromRows([], 0)).toBeUndefined();
    expect(entriesFromRows([mrow('a', { n: enc.encode('1'), m: enc.encode('2') })], 0)).toBeUndefined();
    expect(entriesFromRows([mrow('a', { n: enc.encode('1') }), mrow('b', { m: enc.encode('2') })], 0)).toBeUndefined();
    // (names whose bytes the item's header would misstate: a code unit past one byte, a length past one varint byte)
    expect(entriesFromRows([mrow('a', { 'é': enc.encode('1') })], 0)).toBeUndefined();
    expect(entriesFromRows([mrow('a', { 'n\u0101': enc.encode('1') })], 0)).toBeUndefined();
    expect(entriesFromRows([mrow('a', { ['x'.repeat(128)]: enc.encode('1') })], 0)).toBeUndefined();
    expect(entriesFromRows([mrow('a', { [`\u0000\u0000${'x'.repeat(128)}`]: enc.encode('1') })], 0)).toBeUndefined();
    expect(entriesFromRows([mrow('é')], 0)).toBeUndefined();
    expect(entriesFromRows([mrow('b'), mrow('a')], 0)).toBeUndefined();
    // the first row that sets a state names the item's state; clears before it are fine
    const d = entriesFromRows([mrow('a', {}), mrow('b', { n: enc.encode('1') }), mrow('c', {})], 0)!.d;
    expect(hex(d)).toBe(hex(encodeEntries(new Map([['b', { n: enc.encode('1') }]]))));
    expect(hex(entriesFromRows([mrow('a', { ['x'.repeat(127)]: enc.encode('1') })], 0)!.d)).toBe(hex(reference([['a', { ['x'.repeat(127)]: enc.encode('1') }]])));
  });
});
