/**
 * What the packed state store writes, item by item: the layout its header documents (a chain from
 * the root by `n`, ascending `l`, each key inside its item's range, `c` the newest checkpoint that
 * wrote it, `r` +1 per write, `p`/`q` on a split's new items), checked on the stored items against a
 * Map of every checkpoint's rows; what apply reports; the fence against a stale writer and its
 * boundary; and a redo after a failed write.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStateTable } from '../adapters/memory/memory-state.js';
import { decodeEntries, encodeEntries } from '../codec/packed-entries.js';
import { groupPk, PackedStateStore, ROOT_SK, type PackedTable, type StoredItem } from './packed-state.js';
import type { StateRow } from './ports.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const row = (key: string, v: string, keyGroup = 7): StateRow => ({ operatorId: 'op', keyGroup, key, values: v ? { n: enc.encode(v) } : {} });
const id = (key: string, keyGroup = 7) => ({ operatorId: 'op', keyGroup, key });
const text = (r: StateRow | undefined) => (r?.values.n ? dec.decode(r.values.n) : undefined);
const stored = (t: MemoryStateTable, keyGroup = 7) => [...(t.groups.get(groupPk('op', keyGroup))?.values() ?? [])];
/** bytes of an item as split decisions count them: pk + sk + small attributes, then per entry key + 3, per state name + bytes + 4 */
const countedBytes = (d: Uint8Array) => [...decodeEntries(d)].reduce((a, [k, v]) => a + enc.encode(k).length + 3 + Object.entries(v).reduce((b, [n, x]) => b + n.length + x.length + 4, 0), 80);

/** The chain of a group as stored, checked against the layout; returns it root first. */
function chainOf(t: MemoryStateTable, keyGroup = 7): StoredItem[] {
  const items = stored(t, keyGroup);
  const bySk = new Map(items.map((i) => [i.sk, i]));
  const chain: StoredItem[] = [];
  for (let sk: string | undefined = ROOT_SK; sk !== undefined; sk = bySk.get(sk)!.n) {
    expect(bySk.has(sk), `the chain names ${sk}`).toBe(true);
    chain.push(bySk.get(sk)!);
  }
  expect(chain[0]!.l).toBeUndefined();
  expect(chain[0]!.p).toBeUndefined();
  chain.forEach((item, i) => {
    expect(item.f).toBe(1);
    expect(item.r).toBeGreaterThanOrEqual(1);
    if (i > 0) expect(item.l! > (chain[i - 1]!.l ?? '')).toBe(true);
    const hi = chain[i + 1]?.l;
    for (const k of decodeEntries(item.d!).keys()) {
      if (item.l !== undefined) expect(k >= item.l).toBe(true);
      if (hi !== undefined) expect(k < hi).toBe(true);
    }
    // a split's new item names its parent and the version that links it
    if (item.p !== undefined) {
      expect(bySk.has(item.p)).toBe(true);
      expect(item.q).toBeGreaterThanOrEqual(1);
      expect(item.q).toBeLessThanOrEqual(bySk.get(item.p)!.r!);
    }
  });
  return chain;
}

describe('PackedStateStore writes: the stored layout against a Map of every checkpoint', () => {
  it('after each checkpoint: one chain holding every key at its newest value, each item stamped by the newest checkpoint that wrote it', async () => {
    const keyArb = fc.integer({ min: 0, max: 59 }).map((i) => `k${String(i).padStart(2, '0')}`);
    const checkpointArb = fc.array(fc.tuple(keyArb, fc.oneof({ weight: 1, arbitrary: fc.constant('') }, { weight: 4, arbitrary: fc.string({ minLength: 1, maxLength: 20 }) })), { minLength: 1, maxLength: 25 });
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(checkpointArb, fc.boolean()), { minLength: 1, maxLength: 8 }), fc.integer({ min: 256, max: 700 }), async (checkpoints, splitBytes) => {
        const t = new MemoryStateTable();
        const s = new PackedStateStore(t, { splitBytes });
        const truth = new Map<string, string>();
        const writtenAt = new Map<string, number>(); // sk → the checkpoint that last wrote it, as seen by puts
        for (let n = 1; n <= checkpoints.length; n++) {
          const [pairs, cold] = checkpoints[n - 1]!;
          if (cold) s.forget();
          const versions = new Map(stored(t).map((i) => [i.sk, i.r!]));
          const r = await s.apply(n, pairs.map(([k, v]) => row(k, v)));
          for (const [k, v] of pairs) truth.set(k, v);
          const after = stored(t);
          const rewritten = after.filter((i) => versions.get(i.sk) !== i.r);
          expect(r.itemWrites).toBe(rewritten.length);
          expect(r.conflicts).toBe(0);
          expect(r.rejected).toEqual([]);
          expect(r.accepted).toHaveLength(new Set(pairs.map(([k]) => k)).size);
          for (const i of rewritten) {
            expect(i.c).toBe(n);
            expect(i.r).toBe((versions.get(i.sk) ?? 0) + 1);
            writtenAt.set(i.sk, n);
          }
          const chain = chainOf(t);
          // one store, no failures: nothing left unreachable
          expect(after).toHaveLength(chain.length);
          for (const i of chain) {
            expect(i.c).toBe(writtenAt.get(i.sk));
            // small entries: every item within the split size
            expect(countedBytes(i.d!)).toBeLessThanOrEqual(splitBytes);
          }
          const want = Object.fromEntries([...truth].filter(([, v]) => v !== '').sort());
          const got = await new PackedStateStore(t).readGroup('op', 7);
          expect(Object.fromEntries(got.map((x) => [x.key, text(x)]))).toEqual(want);
          for (const x of got) expect(x.checkpointId).toBe(chain.find((i, j) => (i.l ?? '') <= x.key && (chain[j + 1]?.l === undefined || x.key < chain[j + 1]!.l!))!.c);
          // and by id, through the store's cached chain and through a fresh one
          const ids = [...truth.keys()].map((k) => id(k));
          for (const reader of [s, new PackedStateStore(t)]) {
            const rows = await reader.getRows(ids);
            expect(Object.fromEntries(rows.filter((x) => text(x) !== undefined).map((x) => [x.key, text(x)]))).toEqual(want);
            expect(rows).toHaveLength(ids.length);
          }
        }
      }),
      { numRuns: 120 },
    );
  });

  it('a write of a new checkpoint restamps every item it touches, even with rows it already holds; a redo of the same checkpoint does not', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    await s.applyRows(1, 1, [row('a', '1'), row('b', '2')]);
    const r2 = await s.apply(2, [row('a', '1')]);
    expect(r2).toMatchObject({ itemWrites: 1, conflicts: 0 });
    expect(stored(t)[0]).toMatchObject({ c: 2, r: 2 });
    const redo = await s.apply(2, [row('a', '1'), row('b', '2'), row('gone', '')]);
    expect(redo).toMatchObject({ itemWrites: 0, conflicts: 0 });
    expect(redo.accepted).toHaveLength(3);
    expect(stored(t)[0]).toMatchObject({ c: 2, r: 2 });
    // a redo that changes something writes, and keeps the stamp
    const again = await s.apply(2, [row('b', '3')]);
    expect(again.itemWrites).toBe(1);
    expect(stored(t)[0]).toMatchObject({ c: 2, r: 3 });
    expect((await new PackedStateStore(t).getRows([id('b')])).map(text)).toEqual(['3']);
  });

  it('the fence: rows of checkpoint n go to an item written by n (a redo) but not to one written by n+1', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    await s.applyRows(4, 4, [row('a', '4'), row('z', '4', 8)]);
    const same = await s.apply(4, [row('b', 'redo')]);
    expect(same.accepted.map((r) => r.key)).toEqual(['b']);
    const stale = await s.apply(3, [row('a', 'stale'), row('c', 'stale'), row('y', 'new group', 9)]);
    expect(stale.rejected.map((r) => r.key)).toEqual(['a', 'c']);
    expect(stale.accepted.map((r) => r.key)).toEqual(['y']); // a group checkpoint 4 never wrote
    expect(stale.itemWrites).toBe(1);
    const got = await new PackedStateStore(t).getRows([id('a'), id('b'), id('c'), id('y', 9)]);
    expect(got.map((r) => [r.key, text(r) ?? null, r.checkpointId])).toEqual([
      ['a', '4', 4],
      ['b', 'redo', 4],
      ['c', null, 4],
      ['y', 'new group', 3],
    ]);
  });

  it('a split item: the root keeps its sk and range, new items get the first key of theirs and name the parent version that links them', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t, { splitBytes: 300 });
    await s.applyRows(1, 1, [row('m', 'x')]);
    const r = await s.apply(2, Array.from({ length: 30 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, 'v'.repeat(10))));
    const chain = chainOf(t);
    expect(chain.length).toBeGreaterThan(1);
    expect(r.itemWrites).toBe(chain.length);
    expect(chain[0]).toMatchObject({ sk: ROOT_SK, r: 2, c: 2 });
    for (const i of chain.slice(1)) {
      expect(i).toMatchObject({ r: 1, c: 2, p: ROOT_SK, q: 2 });
      expect(i.l).toBe([...decodeEntries(i.d!).keys()][0]);
    }
    expect(chain[chain.length - 1]!.n).toBeUndefined();
    // splitting a middle item later: its new items chain on to the item that came after it
    const mid = chain[1]!;
    const after = chain[2]?.sk;
    await s.applyRows(3, 1, Array.from({ length: 20 }, (_, i) => row(`${mid.l!}${String(i).padStart(2, '0')}`, 'w'.repeat(10))));
    const chain2 = chainOf(t);
    const at = chain2.findIndex((i) => i.sk === mid.sk);
    expect(chain2[at]).toMatchObject({ l: mid.l, r: 2, c: 3 });
    const born = chain2.filter((i) => i.c === 3 && i.sk !== mid.sk);
    expect(born.length).toBeGreaterThan(0);
    for (const i of born) expect(i).toMatchObject({ p: mid.sk, q: 2, r: 1 });
    expect(chain2[at + born.length + 1]?.sk).toBe(after);
  });

  it('an entry larger than the split size stays whole in an item of its own; a group of one such entry is not split', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t, { splitBytes: 256 });
    await s.applyRows(1, 1, [row('big', 'x'.repeat(1000))]);
    expect(stored(t)).toHaveLength(1);
    await s.applyRows(2, 1, [row('a', '1'), row('c', '1')]);
    const chain = chainOf(t);
    expect(chain.map((i) => [...decodeEntries(i.d!).keys()])).toEqual([['a'], ['big'], ['c']]);
  });

  it('pieces of about three quarters of the split size, each closed before the entry that would take it past that by more than half', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t, { splitBytes: 1000 });
    // 100 entries of 26 counted bytes (key 3 + 3, state 1 + 15 + 4): 2680 with the overhead of 80, so
    // ceil(2680 / 750) = 4 pieces of 670; a piece of k entries counts 80 + 26k and takes one more
    // while 80 + 26k + 13 <= 670: 23 entries a piece, the rest in a fifth
    await s.applyRows(1, 1, Array.from({ length: 100 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, 'v'.repeat(15))));
    expect(chainOf(t).map((i) => decodeEntries(i.d!).size)).toEqual([23, 23, 23, 23, 8]);
  });
});

describe('PackedStateStore writes: the edges of the rules', () => {
  it('an item of exactly the split size stays whole, one byte more splits it; two entries over it go into two items', async () => {
    // a second state name keeps the merge off the common case: the general merge decides the split
    const rows = (pad: number) => [{ ...row('a', 'x'.repeat(10)), values: { n: enc.encode('x'.repeat(10)), m: new Uint8Array(pad) } }, ...Array.from({ length: 9 }, (_, i) => row(`k${i}`, 'v'.repeat(10)))];
    const counted = (pad: number) => {
      const t = new MemoryStateTable();
      return { t, bytes: 80 + (1 + 3 + (1 + 10 + 4) + (1 + pad + 4)) + 9 * (2 + 3 + 1 + 10 + 4) };
    };
    for (const extra of [0, 1]) {
      const { t, bytes } = counted(20);
      const s = new PackedStateStore(t, { splitBytes: bytes - extra });
      await s.applyRows(1, 1, rows(20));
      expect(chainOf(t).length > 1).toBe(extra > 0);
    }
    const t = new MemoryStateTable();
    await new PackedStateStore(t, { splitBytes: 256 }).applyRows(1, 1, [row('a', 'x'.repeat(200)), row('b', 'y'.repeat(200))]);
    expect(chainOf(t).map((i) => [...decodeEntries(i.d!).keys()])).toEqual([['a'], ['b']]);
  });

  it("a piece closes before an entry that would take it past DynamoDB's item limit, even below its target", async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t, { splitBytes: 10 * 1024 * 1024 });
    // 100 KB, 300 KB, 150 KB: two pieces of about 275 KB would be the target, but 100 + 300 KB is
    // over the limit, so the first two go apart
    const big = (key: string, kb: number) => ({ ...row(key, ''), values: { n: new Uint8Array(kb * 1000) } });
    await s.applyRows(1, 1, [big('a', 100), big('b', 300), big('c', 150)]);
    const chain = chainOf(t);
    expect(chain.map((i) => [...decodeEntries(i.d!).keys()])).toEqual([['a'], ['b'], ['c']]);
  });

  it('a new checkpoint restamps an item off the common case too (keys not ASCII), with rows it already holds', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    await s.applyRows(1, 1, [row('é', '1'), row('ü', '2')]);
    expect((await s.apply(2, [row('é', '1')])).itemWrites).toBe(1);
    expect(stored(t)[0]).toMatchObject({ c: 2, r: 2 });
    expect((await s.apply(2, [row('é', '1')])).itemWrites).toBe(0);
    // a checkpoint that only clears a key the item does not hold still stamps it: a zombie of an
    // earlier checkpoint must not bring the key back
    expect((await s.apply(3, [row('ö', '')])).itemWrites).toBe(1);
    expect(stored(t)[0]).toMatchObject({ c: 3 });
    expect((await new PackedStateStore(t).apply(2, [row('ö', 'zombie')])).rejected.map((r) => r.key)).toEqual(['ö']);
  });

  it('keys an item holds outside its range (a split that never rewrote it) are neither read nor kept by its next write', async () => {
    const t = new MemoryStateTable();
    const pk = groupPk('op', 7);
    const d = (m: Record<string, string>) => encodeEntries(new Map(Object.entries(m).map(([k, v]) => [k, { n: enc.encode(v) }])));
    t.groups.set(
      pk,
      new Map<string, StoredItem>([
        [ROOT_SK, { sk: ROOT_SK, f: 1, c: 1, r: 1, n: '\u0000m', d: d({ a: 'root', z: 'stale' }) }],
        ['\u0000m', { sk: '\u0000m', f: 1, c: 2, r: 1, l: 'm', n: '\u0000q', d: d({ c: 'stale', m: 'm', z: 'fresh' }) }],
        ['\u0000q', { sk: '\u0000q', f: 1, c: 2, r: 1, l: 'q', d: d({}) }],
      ]),
    );
    const rows = await new PackedStateStore(t).readGroup('op', 7);
    expect(rows.map((r) => [r.key, text(r), r.checkpointId])).toEqual([
      ['a', 'root', 1],
      ['m', 'm', 2],
    ]);
    expect((await new PackedStateStore(t).getRows([id('z'), id('c')])).map((r) => [r.key, text(r) ?? null])).toEqual([
      ['z', null],
      ['c', null],
    ]);
    // a write to the root and to the middle item: each keeps only the keys of its range
    await new PackedStateStore(t).applyRows(3, 1, [row('b', 'b'), row('n', 'n')]);
    expect([...decodeEntries(t.groups.get(pk)!.get(ROOT_SK)!.d!).keys()]).toEqual(['a', 'b']);
    expect([...decodeEntries(t.groups.get(pk)!.get('\u0000m')!.d!).keys()]).toEqual(['m', 'n']);
  });

  it('deletes only what is left to delete: nothing after an ordinary write, each legacy row once after the first', async () => {
    const t = new MemoryStateTable();
    const deletes: string[] = [];
    const table: PackedTable = {
      query: (pk) => t.query(pk),
      getItems: (keys) => t.getItems(keys),
      put: (pk, item, expected) => t.put(pk, item, expected),
      delete: async (pk, sk, expected) => {
        deletes.push(sk);
        return t.delete(pk, sk, expected);
      },
    };
    const pk = groupPk('op', 7);
    t.groups.set(pk, new Map<string, StoredItem>([['old', { sk: 'old', ckpt: 1, v: { n: enc.encode('o') } }]]));
    const s = new PackedStateStore(table, { splitBytes: 300 });
    await s.applyRows(2, 1, [row('a', '1')]);
    expect(deletes.splice(0)).toEqual(['old']);
    await s.applyRows(3, 1, Array.from({ length: 30 }, (_, i) => row(`k${i}`, 'v'.repeat(10))));
    await s.applyRows(4, 1, [row('a', '2')]);
    await new PackedStateStore(table).applyRows(5, 1, [row('a', '3')]);
    expect(deletes).toEqual([]);
  });
});

describe('PackedStateStore writes that fail', () => {
  /** the table, with puts of the root failing while `failRoot` is set (after the new items landed) */
  function failing(t: MemoryStateTable) {
    const ctl = { failRoot: false, failAll: false };
    const table: PackedTable = {
      query: (pk) => t.query(pk),
      getItems: (keys) => t.getItems(keys),
      delete: (pk, sk, expected) => t.delete(pk, sk, expected),
      put: async (pk, item, expected) => {
        if (ctl.failAll || (ctl.failRoot && item.sk === ROOT_SK)) throw new Error('network error');
        return t.put(pk, item, expected);
      },
    };
    return { table, ctl };
  }

  it("a redo after a split whose root write failed: the same keys land, and the next writer to read the group deletes the first try's new items", async () => {
    const t = new MemoryStateTable();
    const { table, ctl } = failing(t);
    const s = new PackedStateStore(table, { splitBytes: 300 });
    await s.applyRows(1, 1, [row('a', '1')]);
    ctl.failRoot = true;
    const rows = Array.from({ length: 30 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, 'v'.repeat(10)));
    await expect(s.applyRows(2, 1, rows)).rejects.toThrow('network error');
    const orphans = stored(t).filter((i) => i.sk !== ROOT_SK);
    expect(orphans.length).toBeGreaterThan(0);
    // the failed write read nothing new into the store: it still sees checkpoint 1
    expect((await s.getRows([id('a'), id('k00')])).map((r) => [r.key, text(r) ?? null, r.checkpointId])).toEqual([
      ['a', '1', 1],
      ['k00', null, 1],
    ]);
    ctl.failRoot = false;
    await s.applyRows(2, 1, rows);
    const readBack = async () => (await new PackedStateStore(t).readGroup('op', 7)).map((r) => r.key);
    expect(await readBack()).toEqual(['a', ...rows.map((r) => r.key)]);
    // the next writer that reads the group deletes the first try's items (the root passed the version that would have linked them)
    await new PackedStateStore(t, { splitBytes: 300 }).applyRows(3, 1, [row('a', '3')]);
    const chain = chainOf(t);
    expect(stored(t)).toHaveLength(chain.length);
    for (const o of orphans) expect(chain.some((i) => i.sk === o.sk)).toBe(false);
    expect(await readBack()).toEqual(['a', ...rows.map((r) => r.key)]);
  });

  it('unlinked items wait for their parent to pass the version that would link them before they are deleted', async () => {
    const t = new MemoryStateTable();
    const pk = groupPk('op', 7);
    const s = new PackedStateStore(t);
    await s.applyRows(1, 1, [row('a', '1')]); // root at version 1
    const piece = (sk: string, q: number | undefined, p: string | undefined = ROOT_SK): StoredItem => ({
      sk,
      f: 1,
      c: 1,
      r: 1,
      l: 'b',
      ...(p !== undefined ? { p } : {}),
      ...(q !== undefined ? { q } : {}),
      d: stored(t)[0]!.d!,
    });
    // one a split of the root at version 1 → 2 may still link, one whose link (→ 1) can no longer
    // happen, one of a parent that is gone, one naming no parent
    for (const [sk, q, p] of [['\u0000wait', 3, ROOT_SK], ['\u0000dead', 1, ROOT_SK], ['\u0000lost', 1, '\u0000nope'], ['\u0000bare', undefined, undefined]] as const) {
      expect(await t.put(pk, piece(sk, q, p), undefined)).toBe(true);
    }
    const fresh = new PackedStateStore(t);
    await fresh.applyRows(2, 1, [row('a', '2')]); // root → version 2
    expect(stored(t).map((i) => i.sk).sort()).toEqual(['\u0000lost', '\u0000wait', ROOT_SK].sort());
    await new PackedStateStore(t).applyRows(3, 1, [row('a', '3')]); // root → version 3
    expect(stored(t).map((i) => i.sk).sort()).toEqual(['\u0000lost', ROOT_SK].sort());
    // none of them was ever read
    expect((await new PackedStateStore(t).readGroup('op', 7)).map((r) => [r.key, text(r)])).toEqual([['a', '3']]);
  });

  it('a group whose writes fail is read again by the next write, which merges into what the table holds', async () => {
    const t = new MemoryStateTable();
    const { table, ctl } = failing(t);
    const s = new PackedStateStore(table);
    const other = new PackedStateStore(t);
    await s.applyRows(1, 1, [row('a', '1')]);
    ctl.failAll = true;
    await expect(s.applyRows(2, 1, [row('b', '2')])).rejects.toThrow('network error');
    ctl.failAll = false;
    await other.applyRows(2, 1, [row('c', '2')]);
    const r = await s.apply(2, [row('b', '2')]);
    expect(r.conflicts).toBe(1);
    expect(s.versionConflicts).toBe(1);
    expect(Object.fromEntries((await new PackedStateStore(t).readGroup('op', 7)).map((x) => [x.key, text(x)]))).toEqual({ a: '1', b: '2', c: '2' });
  });
});
