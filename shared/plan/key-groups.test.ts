import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hashKeyOfEvenShard, hashKeyOfKeyGroup, keyFromString, keyGroupOf, keyGroupsOfHashRange, keyString, murmur3, murmur3String } from './key-groups.js';

const HASH_SPACE = 1n << 128n;
const utf8 = (s: string) => new TextEncoder().encode(s);
const bytes = (...b: number[]) => new Uint8Array(b);

/** N shards splitting the hash space evenly, as Kinesis' CreateStream does (computed independently of the code under test). */
function evenShards(n: number): Array<[bigint, bigint]> {
  return Array.from({ length: n }, (_, i) => [(BigInt(i) * HASH_SPACE) / BigInt(n), (BigInt(i + 1) * HASH_SPACE) / BigInt(n) - 1n]);
}

describe('murmur3 (x86, 32-bit)', () => {
  // reference vectors of the canonical implementation (SMHasher's MurmurHash3_x86_32)
  const vectors: Array<[string, Uint8Array, number, number]> = [
    ['empty, seed 0', bytes(), 0, 0],
    ['empty, seed 1', bytes(), 1, 0x514e28b7],
    ['empty, seed 0xffffffff', bytes(), 0xffffffff, 0x81f16f39],
    ['4 zero bytes', bytes(0, 0, 0, 0), 0, 0x2362f9de],
    ['one block', bytes(0x21, 0x43, 0x65, 0x87), 0, 0xf55b516b],
    ['one block, seeded', bytes(0x21, 0x43, 0x65, 0x87), 0x5082edee, 0x2362f9de],
    ['3-byte tail', bytes(0x21, 0x43, 0x65), 0, 0x7e4a8634],
    ['2-byte tail', bytes(0x21, 0x43), 0, 0xa0f7b07a],
    ['1-byte tail', bytes(0x21), 0, 0x72661cf4],
    ['3 zero bytes', bytes(0, 0, 0), 0, 0x85f0b427],
    ['2 zero bytes', bytes(0, 0), 0, 0x30f4c306],
    ['1 zero byte', bytes(0), 0, 0x514e28b7],
    ['"hello"', utf8('hello'), 0, 0x248bfa47],
    ['"Hello, world!" seed 1234', utf8('Hello, world!'), 1234, 0xfaf6cdb3],
    ['quick brown fox', utf8('The quick brown fox jumps over the lazy dog'), 0, 0x2e4ff723],
  ];
  for (const [name, input, seed, expected] of vectors) {
    it(`${name} → 0x${expected.toString(16)}`, () => {
      expect(murmur3(input, seed)).toBe(expected);
    });
  }

  it('hashes a string as its UTF-8 bytes, bit for bit, for any unicode string (lone surrogates too)', () => {
    const lone = fc.constantFrom('\ud800', '\udbff', '\udc00', '\udfff', 'a\ud83d', '\ude00b');
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 12 }),
      fc.string({ maxLength: 40 }),
      fc.array(fc.oneof(fc.string({ unit: 'binary', maxLength: 5 }), lone), { maxLength: 8 }).map((xs) => xs.join('')),
    );
    fc.assert(
      fc.property(text, fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0xffffffff })), (s, seed) => {
        expect(murmur3String(s, seed)).toBe(murmur3(utf8(s), seed));
        expect(murmur3String(s)).toBe(murmur3(utf8(s)));
      }),
      { numRuns: 2000 },
    );
    for (const [, input, seed, expected] of vectors) {
      const s = new TextDecoder('utf-8', { fatal: false }).decode(input);
      if (utf8(s).length === input.length && utf8(s).every((b, i) => b === input[i])) expect(murmur3String(s, seed)).toBe(expected);
    }
  });

  it('is an unsigned 32-bit integer, and the default seed is 0', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
        const h = murmur3(b);
        expect(Number.isInteger(h) && h >= 0 && h <= 0xffffffff).toBe(true);
        expect(murmur3(b, 0)).toBe(h);
      }),
    );
  });
});

describe('keys and key groups', () => {
  it('maps keys to strings one to one, and back', () => {
    expect(keyString('abc')).toBe('abc');
    expect(keyString(42)).not.toBe(keyString('42'));
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string().map((s) => `\u0000${s}`), fc.double(), fc.integer()), fc.oneof(fc.string(), fc.double()), (a, b) => {
        const back = keyFromString(keyString(a));
        expect(typeof a === 'number' && Object.is(a, -0) ? back === 0 : Object.is(back, a)).toBe(true);
        // different keys never share a string form (a number never collides with a string)
        const same = typeof a === typeof b && (a === b || (Number.isNaN(a as number) && Number.isNaN(b as number)));
        if (!same) expect(keyString(a) === keyString(b)).toBe(typeof a === 'number' && typeof b === 'number' && a === b);
      }),
    );
  });

  it('puts every key in a stable group inside [0, maxParallelism)', () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 32_768 }), (key, mp) => {
        const g = keyGroupOf(key, mp);
        expect(Number.isInteger(g) && g >= 0 && g < mp).toBe(true);
        expect(keyGroupOf(key, mp)).toBe(g);
        expect(g).toBe(murmur3(utf8(key)) % mp);
      }),
    );
  });

  it('spreads keys over groups', () => {
    const counts = new Array(16).fill(0);
    for (let i = 0; i < 16_000; i++) counts[keyGroupOf(`user-${i}`, 16)]++;
    for (const c of counts) expect(c).toBeGreaterThan(800);
  });
});

describe('hash keys of key groups and shards', () => {
  it('places each key group hash key inside the 128-bit space, increasing with the group', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4096 }), (mp) => {
        let prev = -1n;
        for (let g = 0; g < mp; g += Math.max(1, Math.floor(mp / 64))) {
          const h = BigInt(hashKeyOfKeyGroup(g, mp));
          expect(h >= 0n && h < HASH_SPACE).toBe(true);
          expect(h > prev).toBe(true);
          prev = h;
        }
      }),
    );
  });

  it('every key group lands in exactly one of N evenly split shards; shards own contiguous runs; none is empty', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1024 }).chain((mp) => fc.tuple(fc.constant(mp), fc.integer({ min: 1, max: mp }), fc.integer({ min: 0, max: 1_000_000 }))),
        ([mp, n, pick]) => {
          const shards = evenShards(n);
          // the ranges partition the hash space
          expect(shards[0]![0]).toBe(0n);
          expect(shards[n - 1]![1]).toBe(HASH_SPACE - 1n);
          for (let i = 1; i < n; i++) expect(shards[i]![0]).toBe(shards[i - 1]![1] + 1n);
          // so a hash key has exactly one holder: the last shard starting at or below it
          const owner = new Array<number>(mp).fill(-1);
          for (let g = 0; g < mp; g++) {
            const h = BigInt(hashKeyOfKeyGroup(g, mp));
            let lo = 0;
            let hi = n - 1;
            while (lo < hi) {
              const mid = (lo + hi + 1) >> 1;
              if (shards[mid]![0] <= h) lo = mid;
              else hi = mid - 1;
            }
            expect(h >= shards[lo]![0] && h <= shards[lo]![1]).toBe(true);
            owner[g] = lo;
          }
          // owners never decrease and never skip a shard: contiguous runs, no idle shard (n ≤ maxParallelism)
          expect(owner[0]).toBe(0);
          expect(owner[mp - 1]).toBe(n - 1);
          for (let g = 1; g < mp; g++) expect(owner[g]! - owner[g - 1]!).toBeGreaterThanOrEqual(0);
          for (let g = 1; g < mp; g++) expect(owner[g]! - owner[g - 1]!).toBeLessThanOrEqual(1);
          // keyGroupsOfHashRange agrees, for a few shards
          for (const i of new Set([0, n - 1, pick % n])) {
            const [lo, hi] = shards[i]!;
            const groups = keyGroupsOfHashRange(lo.toString(), hi.toString(), mp);
            expect(groups).toEqual(owner.flatMap((o, g) => (o === i ? [g] : [])));
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('hashKeyOfEvenShard(i, n) lands in shard i of n', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 500 }).chain((n) => fc.tuple(fc.constant(n), fc.integer({ min: 0, max: n - 1 }))), ([n, i]) => {
        const h = BigInt(hashKeyOfEvenShard(i, n));
        const [lo, hi] = evenShards(n)[i]!;
        expect(h >= lo && h <= hi).toBe(true);
      }),
    );
  });

  it('after a uniform reshard, a key group still lies wholly in one shard', () => {
    // resharding moves whole groups: a group is one point of the hash space
    for (const [from, to] of [
      [2, 3],
      [4, 2],
      [3, 7],
    ] as const) {
      const mp = 128;
      for (const n of [from, to]) {
        const shards = evenShards(n);
        for (let g = 0; g < mp; g++) {
          const h = BigInt(hashKeyOfKeyGroup(g, mp));
          expect(shards.filter(([lo, hi]) => h >= lo && h <= hi)).toHaveLength(1);
        }
      }
    }
  });
});
