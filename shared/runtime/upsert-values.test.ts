/**
 * The upsert sink's values against DynamoDB's documented limits: each refusal names the field (a
 * path into the item) and why; values DynamoDB takes pass.
 */
import { describe, expect, it } from 'vitest';
import { digitsSize, MAX_ITEM_BYTES, upsertProblem } from './upsert-values.js';

const problem = (item: Record<string, unknown>, key: unknown = 'k1') => upsertProblem('pk', key, item);

describe('upsertProblem', () => {
  it('passes what DynamoDB stores', () => {
    const ok = { n: 1, x: -0.5, big: 2 ** 53 - 1, neg: -(2 ** 53) + 1, tiny: 1e-130, zero: 0, s: '', e: 'é😀', b: true, nil: null, l: [1, 'a', [], {}], m: { a: { b: [new Uint8Array(3)] } }, obj: Object.assign(Object.create(null) as object, { a: 1 }), inst: new (class P { x = 1 })(), set: new Set(['a', 'b']), ns: new Set([1, 2n]), big2: 10n ** 40n, gone: undefined, pk: 'ignored: the key attribute is written from the key' };
    expect(problem(ok)).toBeUndefined();
  });

  it.each([
    [{ n: Number.NaN }, 'item.n', /NaN/],
    [{ n: Number.POSITIVE_INFINITY }, 'item.n', /Infinity/],
    [{ a: [1, { b: Number.NEGATIVE_INFINITY }] }, 'item.a[1].b', /-Infinity/],
    [{ n: 2 ** 53 }, 'item.n', /2\^53/],
    [{ n: -(2 ** 60) }, 'item.n', /2\^53/],
    [{ n: 1e300 }, 'item.n', /2\^53/],
    [{ n: 5e-324 }, 'item.n', /1E-130/],
    [{ m: new Map([['x', -1e-131]]) }, 'item.m.x', /1E-130/],
    [{ n: 10n ** 126n }, 'item.n', /9\.99…E\+125/],
    [{ n: 12345678901234567890123456789012345678901n }, 'item.n', /38 significant digits/],
    [{ s: 'a\uD800' }, 'item.s', /surrogate/],
    [{ m: { 'b\uDC00': 1 } }, 'item.m.b\uDC00', /surrogate/],
    [{ 'c\uD800': 1 }, 'item.c\uD800', /surrogate/],
    [{ tags: new Set() }, 'item.tags', /empty set/],
    [{ tags: new Set(['a', 1]) }, 'item.tags', /one kind/],
    [{ tags: new Set([true]) }, 'item.tags', /strings, numbers or binary/],
    [{ f: () => 1 }, 'item.f', /function/],
    [{ at: new Date(0) }, 'item.at', /Date has no fields.*empty map/],
    [{ l: [new (class Marker {})()] }, 'item.l[0]', /Marker has no fields/],
    [{ '': 1 }, 'item', /empty name/],
    [{ _sluice_epoch: 1 }, 'item._sluice_epoch', /engine's own/],
    [{ blob: 'x'.repeat(MAX_ITEM_BYTES) }, 'item', /400 KB/],
  ] as const)('refuses %o at %s', (item, path, why) => {
    const p = problem(item as Record<string, unknown>);
    expect(p?.path).toBe(path);
    expect(p?.reason).toMatch(why);
  });

  it('refuses a key DynamoDB would: not a string, empty, half a surrogate pair, beyond 2048 bytes', () => {
    expect(problem({}, 5)?.reason).toMatch(/must be a string/);
    expect(problem({}, '')?.reason).toMatch(/empty/);
    expect(problem({}, 'a\uDC00')?.reason).toMatch(/surrogate/);
    expect(problem({}, 'x'.repeat(2048))).toBeUndefined();
    expect(problem({}, 'é'.repeat(1025))).toEqual({ path: 'key', reason: expect.stringMatching(/2050 bytes of UTF-8, beyond DynamoDB's 2048/) });
  });

  it('refuses nesting beyond 32 levels, and a cycle, instead of overflowing the stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) deep = [deep];
    expect(problem({ deep })?.reason).toMatch(/32 levels/);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(problem({ cyclic })?.path).toMatch(/^item\.cyclic(\.self)+$/);
  });

  it("counts an item's size as DynamoDB's guide does, near 400 KB", () => {
    // names and values in UTF-8, the key, and the engine's version attributes
    expect(problem({ blob: 'x'.repeat(MAX_ITEM_BYTES - 200) })).toBeUndefined();
    expect(problem({ blob: 'é'.repeat(MAX_ITEM_BYTES / 2 - 50) })?.reason).toMatch(/400 KB/);
    // lists: 3 bytes, and one per element besides its own (a boolean: 1)
    expect(problem({ l: Array.from({ length: MAX_ITEM_BYTES / 2 }, () => true) })?.reason).toMatch(/400 KB/);
  });

  it('counts a number as one byte per two significant digits, plus one', () => {
    expect([digitsSize('7'), digitsSize('1000'), digitsSize('123.45'), digitsSize('0.000012'), digitsSize('1.5e-200'), digitsSize('9007199254740991')]).toEqual([2, 2, 4, 2, 2, 9]);
  });
});
