import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MemoryStateTable } from '../adapters/memory/memory-ports.js';
import { decodeEntries, encodeEntries } from '../codec/packed-entries.js';
import { groupPk, PackedStateStore, ROOT_SK, type StoredItem } from './packed-state.js';
import type { StateRow } from './ports.js';
import { SpillingStateStore } from './spilling-state-store.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const row = (key: string, v: string | Uint8Array, keyGroup = 7, operatorId = 'op'): StateRow => ({
  operatorId,
  keyGroup,
  key,
  values: typeof v === 'string' ? (v ? { count: enc.encode(v) } : {}) : { blob: v },
});
const id = (key: string, keyGroup = 7) => ({ operatorId: 'op', keyGroup, key });
const items = (t: MemoryStateTable, keyGroup = 7) => [...(t.groups.get(groupPk('op', keyGroup))?.values() ?? [])];
const text = (r: StateRow | undefined) => (r?.values.count ? dec.decode(r.values.count) : undefined);

describe('PackedStateStore', () => {
  it('packs the keys of a key group into one item and reads them back by id', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    await s.applyRows(1, 1, Array.from({ length: 100 }, (_, i) => row(`user-${i}`, String(i))));
    await s.applyRows(1, 1, [row('other', 'x', 8)]);
    expect(items(t)).toHaveLength(1);
    expect(t.puts).toBe(2);
    const got = await new PackedStateStore(t).getRows([id('user-5'), id('user-99'), id('other', 8), id('nope', 9)]);
    expect(Object.fromEntries(got.map((r) => [r.key, text(r)]))).toEqual({ 'user-5': '5', 'user-99': '99', other: 'x' });
    expect(got.every((r) => r.checkpointId === 1)).toBe(true);
  });

  it('a stale writer of checkpoint n cannot overwrite keys that checkpoint n+1 wrote in the same item', async () => {
    const t = new MemoryStateTable();
    const owner = new PackedStateStore(t);
    const zombie = new PackedStateStore(t);
    await owner.applyRows(1, 1, [row('a', 'a1'), row('b', 'b1')]);
    // the zombie has read the item as of checkpoint 1 (a cached view), the owner moves on
    await zombie.getRows([id('a')]);
    await owner.applyRows(2, 2, [row('a', 'a2')]);
    // the zombie's checkpoint 1 redo, with other keys of the same item: nothing of it lands
    const r = await zombie.apply(1, [row('a', 'stale'), row('b', 'stale'), row('c', 'stale')]);
    expect(r.rejected.map((x) => x.key)).toEqual(['a', 'b', 'c']);
    const got = await owner.getRows([id('a'), id('b'), id('c')]);
    expect(Object.fromEntries(got.map((x) => [x.key, text(x) ?? null]))).toEqual({ a: 'a2', b: 'b1', c: null });
    // every row read says "checkpoint 2 wrote this item": a zombie at epoch 1 sees it is behind
    expect(got.map((x) => x.checkpointId)).toEqual([2, 2, 2]);
  });

  it('a redo of the same checkpoint is idempotent and writes nothing it would not change', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    await s.applyRows(3, 1, [row('a', '1'), row('b', '2'), row('gone', '')]);
    const before = structuredClone(items(t));
    const puts = t.puts;
    await new PackedStateStore(t).applyRows(3, 1, [row('a', '1'), row('b', '2'), row('gone', '')]);
    expect(items(t)).toEqual(before);
    expect(t.puts).toBe(puts);
  });

  it('merges two writers of one item: the version condition makes the loser read again', async () => {
    const t = new MemoryStateTable();
    const a = new PackedStateStore(t);
    const b = new PackedStateStore(t);
    await a.applyRows(1, 1, [row('x', '1')]);
    await b.getRows([id('x')]);
    await a.applyRows(2, 1, [row('y', '2')]);
    // b's cached view is at version 1: its put fails, it re-reads and merges
    await b.applyRows(2, 1, [row('z', '2')]);
    expect(b.versionConflicts).toBe(1);
    const got = await a.getRows([id('x'), id('y'), id('z')]);
    expect(got.map(text)).toEqual(['1', '2', '2']);
  });

  it('cleared keys disappear from the item', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    await s.applyRows(1, 1, [row('a', '1'), row('b', '2')]);
    await s.applyRows(2, 1, [row('a', '')]);
    expect([...decodeEntries(items(t)[0]!.d!).keys()]).toEqual(['b']);
    expect((await s.readGroup('op', 7)).map((r) => r.key)).toEqual(['b']);
    const [a] = await s.getRows([id('a')]);
    expect(a).toMatchObject({ key: 'a', values: {}, checkpointId: 2 });
  });

  it('splits a key group past the item size limit over several items, and reads it back', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    // 60 keys of 20 KB: 1.2 MB, three times DynamoDB's item limit, in one checkpoint
    const big = (i: number) => new Uint8Array(20 * 1024).fill(i);
    await s.applyRows(1, 1, Array.from({ length: 60 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, big(i))));
    const stored = items(t);
    expect(stored.length).toBeGreaterThanOrEqual(3);
    for (const i of stored) expect(i.d!.length).toBeLessThan(390 * 1024);
    const all = await new PackedStateStore(t).readGroup('op', 7);
    expect(all).toHaveLength(60);
    for (const r of all) expect(r.values.blob![0]).toBe(Number(r.key.slice(1)));
    // later writes go to the item whose range holds the key; the others are not rewritten
    const puts = t.puts;
    await s.applyRows(2, 1, [row('k33', new Uint8Array([1]))]);
    expect(t.puts).toBe(puts + 1);
    const [k33] = await new PackedStateStore(t).getRows([id('k33')]);
    expect(k33!.values.blob).toEqual(new Uint8Array([1]));
  });

  it('grows by splitting as small keys accumulate, with items near the split size', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t, { splitBytes: 1024 });
    for (let n = 1; n <= 20; n++) await s.applyRows(n, 1, Array.from({ length: 20 }, (_, i) => row(`user-${n * 20 + i}`, String(n))));
    const stored = items(t);
    expect(stored.length).toBeGreaterThan(3);
    for (const i of stored) expect(i.d!.length).toBeLessThanOrEqual(1024);
    const rows = await new PackedStateStore(t).readGroup('op', 7);
    expect(rows).toHaveLength(400);
  });

  it('a split that crashed before linking its new items leaves them unread, and the next writer deletes them', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t, { splitBytes: 1024 });
    await s.applyRows(1, 1, Array.from({ length: 10 }, (_, i) => row(`k${i}`, 'old')));
    // the new items go first (they land), then the root's rewrite crashes
    const many = Array.from({ length: 80 }, (_, i) => row(`k${i}`, 'new'));
    let n = 0;
    const s2 = new PackedStateStore(
      new Proxy(t, {
        get(target, p, r) {
          if (p === 'put')
            return async (pk: string, item: StoredItem, expected: number | undefined) => {
              if (item.sk === ROOT_SK && n++ === 0) throw new Error('crash');
              return target.put(pk, item, expected);
            };
          return Reflect.get(target, p, r) as unknown;
        },
      }),
      { splitBytes: 1024 },
    );
    await expect(s2.applyRows(2, 1, many)).rejects.toThrow('crash');
    expect(items(t).length).toBeGreaterThan(1);
    const reader = new PackedStateStore(t);
    expect((await reader.readGroup('op', 7)).map(text)).toEqual(Array(10).fill('old'));
    // the redo after the crash links its own split; the unlinked items of the first try are deleted
    await new PackedStateStore(t, { splitBytes: 1024 }).applyRows(2, 1, many);
    const rows = await reader.readGroup('op', 7);
    expect(rows).toHaveLength(80);
    expect(rows.every((r) => text(r) === 'new' && r.checkpointId === 2)).toBe(true);
    const chainLength = (() => {
      const byS = new Map(items(t).map((i) => [i.sk, i]));
      let k = 0;
      for (let sk: string | undefined = ROOT_SK; sk; sk = byS.get(sk)?.n) k++;
      return k;
    })();
    expect(items(t)).toHaveLength(chainLength);
  });

  it('reads rows of the older one-key-per-item layout and folds them into the root on the first write', async () => {
    const t = new MemoryStateTable();
    const pk = groupPk('op', 7);
    t.groups.set(
      pk,
      new Map<string, StoredItem>([
        ['a', { sk: 'a', ckpt: 4, v: { count: enc.encode('A') } }],
        ['b', { sk: 'b', ckpt: 5, v: { count: enc.encode('B') } }],
        ['c', { sk: 'c', ckpt: 5, v: {} }],
      ]),
    );
    const s = new PackedStateStore(t);
    expect((await s.getRows([id('a'), id('b'), id('c')])).map((r) => [r.key, text(r), r.checkpointId])).toEqual([
      ['a', 'A', 4],
      ['b', 'B', 5],
      ['c', undefined, 5],
    ]);
    await s.applyRows(6, 1, [row('b', 'B6')]);
    expect(items(t).map((i) => i.sk)).toEqual([ROOT_SK]);
    expect(Object.fromEntries((await s.readGroup('op', 7)).map((r) => [r.key, text(r)]))).toEqual({ a: 'A', b: 'B6' });
  });

  it("a group's first write makes its items from the rows alone: the bytes of its keys' entries, whichever way they are made", async () => {
    // seeded rows of one group (ASCII keys in order: made on bytes; else, or two states, or a split: by the general merge)
    fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.tuple(fc.oneof({ weight: 400, arbitrary: fc.string({ unit: fc.constantFrom('a', 'b', 'k', '1'), minLength: 1, maxLength: 7 }) }, { weight: 1, arbitrary: fc.constantFrom('é', 'aé') }), fc.oneof({ weight: 8, arbitrary: fc.string({ maxLength: 8 }) }, { weight: 1, arbitrary: fc.uint8Array({ maxLength: 3 }) })), { selector: ([k]) => k, maxLength: 300 }),
        fc.boolean(),
        fc.boolean(),
        async (pairs, sorted, legacy) => {
          const t = new MemoryStateTable();
          // a cleared row of the older layout: no entry, but its checkpoint is the root's
          if (legacy) t.groups.set(groupPk('op', 7), new Map<string, StoredItem>([['z', { sk: 'z', ckpt: 2, v: {} }]]));
          const rows = pairs.map(([k, v]) => row(k, v));
          if (sorted) rows.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
          await new PackedStateStore(t, { splitBytes: 1024 }).applyRows(3, 1, rows);
          const stored = items(t).filter((i) => i.f !== undefined);
          const want = new Map(rows.filter((r) => Object.keys(r.values).length).map((r) => [r.key, r.values]));
          if (!want.size && !stored.length) return;
          // every item holds the entries of its range, in the layout the codec writes for them
          const chain: StoredItem[] = [];
          for (let sk: string | undefined = ROOT_SK; sk !== undefined; sk = chain[chain.length - 1]!.n) chain.push(stored.find((i) => i.sk === sk)!);
          expect(chain.length).toBe(stored.length);
          chain.forEach((item, i) => {
            const hi = chain[i + 1]?.l;
            const mine = new Map([...want].filter(([k]) => (item.l === undefined || item.l <= k) && (hi === undefined || k < hi)));
            expect(Buffer.from(item.d!).toString('hex')).toBe(Buffer.from(encodeEntries(mine)).toString('hex'));
            expect([item.c, item.r]).toEqual([3, 1]);
          });
          expect(chain.reduce((n, i) => n + decodeEntries(i.d!).size, 0)).toBe(want.size);
          // split as the sizes the layout documents say (80 per item, per entry its key's bytes + 3, per state its name and bytes + 4)
          let total = 80;
          for (const [k, v] of want) total += enc.encode(k).length + 3 + Object.entries(v).reduce((n, [name, b]) => n + name.length + b.length + 4, 0);
          expect(chain.length > 1).toBe(total > 1024 && want.size > 1);
        },
      ),
      { numRuns: 600, seed: 4122026 },
    );
    // at the split size: 80 + 17 bytes per key is 1015 for 55 keys (one item), 1032 for 56 (split)
    for (const [n, split] of [[55, false], [56, true]] as const) {
      const t = new MemoryStateTable();
      await new PackedStateStore(t, { splitBytes: 1024 }).applyRows(1, 1, Array.from({ length: n }, (_, i) => row(`k${String(i).padStart(3, '0')}`, 'x')));
      expect(items(t).length > 1).toBe(split);
    }
  });

  it('keeps spilled values working: a key larger than an item goes to the blob store', async () => {
    const t = new MemoryStateTable();
    const blobs = new Map<string, Uint8Array>();
    const s = new SpillingStateStore(new PackedStateStore(t), { put: async (k, b) => void blobs.set(k, b), get: async (k) => blobs.get(k)! }, 1000);
    await s.applyRows(1, 1, [row('huge', new Uint8Array(5000).fill(7)), row('small', '1')]);
    expect(blobs.size).toBe(1);
    const got = await s.getRows([id('huge'), id('small')]);
    expect(got.find((r) => r.key === 'huge')!.values.blob).toEqual(new Uint8Array(5000).fill(7));
    expect((await s.readGroup('op', 7)).map((r) => r.key).sort()).toEqual(['huge', 'small']);
  });
});

describe('PackedStateStore: cached items', () => {
  // A store keeps the decoded entries (with their key bytes and sizes) of the items it read or
  // wrote, and a write builds the item's new entries from them. A write that fails must leave the
  // cached ones as the table holds them: a later read at the same item version uses them unread.
  it('a checkpoint whose item write fails leaves the cached entries as stored (reads and the next write see the table)', async () => {
    const t = new MemoryStateTable();
    let failPuts = false;
    const flaky: PackedTableLike = new Proxy(t, {
      get(target, p, r) {
        if (p === 'put')
          return async (pk: string, item: StoredItem, expected: number | undefined) => {
            if (failPuts) throw new Error('network error');
            return target.put(pk, item, expected);
          };
        return Reflect.get(target, p, r) as unknown;
      },
    });
    const s = new PackedStateStore(flaky, { splitBytes: 256 });
    await s.applyRows(1, 1, Array.from({ length: 12 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, `v1-${i}`)));
    const stored = structuredClone(items(t));
    failPuts = true;
    // checkpoint 2 changes, clears and adds keys in every item (and would split): its writes fail
    await expect(s.applyRows(2, 1, [row('k00', 'v2'), row('k05', ''), row('k11', 'v2'), row('k05a', 'x'.repeat(200))])).rejects.toThrow('network error');
    failPuts = false;
    expect(items(t)).toEqual(stored);
    const got = await s.getRows([id('k00'), id('k05'), id('k05a'), id('k11')]);
    expect(Object.fromEntries(got.map((r) => [r.key, text(r) ?? null]))).toEqual({ k00: 'v1-0', k05: 'v1-5', k05a: null, k11: 'v1-11' });
    // checkpoint 2 again, other rows: the items hold checkpoint 1's keys and these, nothing of the failed attempt
    await s.applyRows(2, 1, [row('k01', 'v2')]);
    const all = await new PackedStateStore(t).readGroup('op', 7);
    expect(Object.fromEntries(all.map((r) => [r.key, text(r)]))).toEqual(
      Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`k${String(i).padStart(2, '0')}`, i === 1 ? 'v2' : `v1-${i}`])),
    );
  });

  it('a stale writer whose rows are refused leaves the cached entries as stored', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    await s.applyRows(5, 5, [row('a', 'a5'), row('b', 'b5')]);
    const r = await s.apply(3, [row('a', 'stale'), row('c', 'stale')]);
    expect(r.rejected).toHaveLength(2);
    const got = await s.getRows([id('a'), id('b'), id('c')]);
    expect(Object.fromEntries(got.map((x) => [x.key, text(x) ?? null]))).toEqual({ a: 'a5', b: 'b5', c: null });
  });

  it('rows in any order, a key twice: the last row of a key wins, the item is written in key order', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    await s.applyRows(1, 1, [row('m', '1'), row('c', '1'), row('x', '1'), row('c', '2'), row('a', '1'), row('x', '')]);
    expect([...decodeEntries(items(t)[0]!.d!).entries()].map(([k, v]) => [k, dec.decode(v.count)])).toEqual([
      ['a', '1'],
      ['c', '2'],
      ['m', '1'],
    ]);
  });
});

describe('PackedStateStore reads', () => {
  it('reads only the items holding the keys once it knows the chain, and still sees newer writes and splits', async () => {
    const t = new MemoryStateTable();
    const reads: string[] = [];
    t.onRead = (pk, items) => reads.push(pk ? `query ${items.length}` : `get ${items.length}`);
    const writer = new PackedStateStore(t, { splitBytes: 1024 });
    await writer.applyRows(1, 1, Array.from({ length: 200 }, (_, i) => row(`user-${String(i).padStart(3, '0')}`, '1')));
    reads.length = 0;
    const reader = new PackedStateStore(t, { splitBytes: 1024 });
    await reader.getRows([id('user-000')]);
    expect(reads.splice(0)).toEqual([expect.stringMatching(/^query \d+$/)]);
    // the chain is known: one item read, fresh (another writer's checkpoint 2 shows)
    await writer.applyRows(2, 1, [row('user-150', '2')]);
    const [r] = await reader.getRows([id('user-150')]);
    expect(reads.splice(0)).toEqual(['get 1']);
    expect(r).toMatchObject({ checkpointId: 2 });
    expect(text(r)).toBe('2');
    // the writer splits the item holding user-150's neighbours: the reader notices and reads the group again
    await writer.applyRows(3, 1, Array.from({ length: 60 }, (_, i) => row(`user-150-${i}`, '3')));
    const got = await reader.getRows([id('user-150-59'), id('user-150')]);
    expect(reads.some((x) => x.startsWith('query'))).toBe(true);
    expect(got.map(text).sort()).toEqual(['2', '3']);
  });
});

describe('PackedStateStore: a retry never unlinks what a successful write linked', () => {
  // Store A redoes checkpoint 2 from a stale cached view, after store B had applied part of it: A's
  // rewrite of the root splits it and links new pieces, the write of the other item fails its
  // version condition. The retry must keep the pieces the root now links (only pieces nobody links
  // may go), else the chain names an item that does not exist and every read of the group fails.
  it('split + version conflict in one apply: pieces linked by the write that succeeded stay (retry keeps linked pieces)', async () => {
    const t = new MemoryStateTable();
    const x = new PackedStateStore(t, { splitBytes: 1024 });
    await x.applyRows(1, 1, Array.from({ length: 60 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, '1'.repeat(30))));
    const chain = items(t);
    expect(chain.length).toBeGreaterThan(1);
    const last = chain.reduce((m, i) => (i.l !== undefined && (m.l === undefined || i.l > m.l) ? i : m));
    const inSecond = 'k59';
    expect(last.sk).not.toBe(ROOT_SK);
    expect(inSecond >= last.l!).toBe(true);
    const a = new PackedStateStore(t, { splitBytes: 1024 });
    const b = new PackedStateStore(t, { splitBytes: 1024 });
    await a.getRows([id('k00'), id(inSecond)]);
    // B applies the part of checkpoint 2 that falls in the second item, then its invocation dies
    await b.applyRows(2, 1, [row(inSecond, '2')]);
    // A redoes all of checkpoint 2: the root splits (new pieces linked), the second item's write conflicts
    const rootRows = Array.from({ length: 60 }, (_, i) => row(`k00-${String(i).padStart(2, '0')}`, '2'));
    await a.applyRows(2, 1, [...rootRows, row(inSecond, '2')]);
    expect(a.versionConflicts).toBeGreaterThan(0);
    const all = await new PackedStateStore(t).readGroup('op', 7);
    expect(all).toHaveLength(120);
    expect(Object.fromEntries(all.filter((r) => r.key === inSecond || r.key.startsWith('k00-')).map((r) => [r.key, text(r)]))).toEqual(
      Object.fromEntries([...rootRows.map((r) => [r.key, '2']), [inSecond, '2']]),
    );
  });

  // On AWS an SDK-retried PutItem that applied and then fails its own condition does the same with a
  // single writer: the store sees "condition failed" for a write that is in the table.
  it('a write that applied but answered "condition failed" (SDK retry) keeps the pieces it linked (retry keeps linked pieces)', async () => {
    const t = new MemoryStateTable();
    await new PackedStateStore(t, { splitBytes: 1024 }).applyRows(1, 1, Array.from({ length: 10 }, (_, i) => row(`k${i}`, '1')));
    let lied = 0;
    const liar = new Proxy(t, {
      get(target, p, r) {
        if (p === 'put')
          return async (pk: string, item: StoredItem, expected: number | undefined) => {
            const ok = await target.put(pk, item, expected);
            if (ok && item.sk === ROOT_SK && lied++ === 0) return false; // applied; the retry's answer is lost
            return ok;
          };
        return Reflect.get(target, p, r) as unknown;
      },
    });
    const s = new PackedStateStore(liar, { splitBytes: 1024 });
    const many = Array.from({ length: 80 }, (_, i) => row(`k${i}`, '2'));
    await s.applyRows(2, 1, many);
    expect(lied).toBe(1);
    const rows = await new PackedStateStore(t).readGroup('op', 7);
    expect(rows).toHaveLength(80);
    expect(rows.every((r) => text(r) === '2')).toBe(true);
  });
});

describe('PackedStateStore: property, several stores over one table', () => {
  // Several stores (environments, zombies) apply checkpoints to one table: some apply part of a
  // checkpoint and die, others redo it whole from stale cached views, at the same time; a zombie
  // redoes an older checkpoint late; item writes interleave at random; some writes that applied
  // answer "condition failed" (an SDK-retried PutItem). Items split (small split size). A fresh
  // reader must always find every key at the value of the newest checkpoint that wrote it.
  it('splits, version conflicts, partial applies, redos and zombies never lose or corrupt a key', async () => {
    const keyArb = fc.integer({ min: 0, max: 39 }).map((i) => `u${String(i).padStart(2, '0')}`);
    const checkpointArb = fc.array(fc.tuple(keyArb, fc.oneof(fc.constant(''), fc.string({ minLength: 8, maxLength: 60 }))), { minLength: 1, maxLength: 30 });
    const stepArb = fc.record({
      rows: checkpointArb,
      // stores redoing this checkpoint: each applies a prefix (a partial apply that died) or all of it
      appliers: fc.array(fc.record({ store: fc.nat(2), cut: fc.option(fc.nat(29), { nil: undefined }) }), { minLength: 1, maxLength: 3 }),
      zombie: fc.option(fc.record({ store: fc.nat(2), back: fc.integer({ min: 1, max: 3 }) }), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 8 }), fc.infiniteStream(fc.nat(99)), async (steps, noise) => {
        const t = new MemoryStateTable();
        const it = noise[Symbol.iterator]();
        const pick = () => it.next().value as number;
        const flaky: PackedTableLike = new Proxy(t, {
          get(target, p, r) {
            if (p === 'put')
              return async (pk: string, item: StoredItem, expected: number | undefined) => {
                for (let i = pick() % 4; i > 0; i--) await Promise.resolve();
                const ok = await target.put(pk, item, expected);
                return ok && pick() < 8 ? false : ok; // applied, answered "condition failed"
              };
            if (p === 'query')
              return async (pk: string) => {
                for (let i = pick() % 3; i > 0; i--) await Promise.resolve();
                return target.query(pk);
              };
            return Reflect.get(target, p, r) as unknown;
          },
        });
        const stores = [0, 1, 2].map(() => new PackedStateStore(flaky, { splitBytes: 256 }));
        const history: StateRow[][] = [];
        const truth = new Map<string, string>();
        for (let n = 1; n <= steps.length; n++) {
          const step = steps[n - 1]!;
          const rows = [...new Map(step.rows).entries()].map(([k, v], i) => row(k, v, 7 + (i % 2)));
          history.push(rows);
          const runs = step.appliers.map((a, i) => {
            const last = i === step.appliers.length - 1;
            const part = !last && a.cut !== undefined ? rows.slice(0, a.cut % (rows.length + 1)) : rows;
            return stores[a.store]!.applyRows(n, 1, part);
          });
          if (step.zombie && n - step.zombie.back >= 1) runs.push(stores[step.zombie.store]!.applyRows(n - step.zombie.back, 1, history[n - step.zombie.back - 1]!));
          await Promise.all(runs);
          for (const r of rows) truth.set(`${r.keyGroup}/${r.key}`, text(r) ?? '');
        }
        const reader = new PackedStateStore(t);
        const got = new Map<string, string>();
        for (const g of [7, 8]) for (const r of await reader.readGroup('op', g)) got.set(`${g}/${r.key}`, text(r) ?? '');
        const want = new Map([...truth].filter(([, v]) => v !== ''));
        expect(Object.fromEntries([...got].sort())).toEqual(Object.fromEntries([...want].sort()));
      }),
      { numRuns: 150 },
    );
  });
});

type PackedTableLike = ConstructorParameters<typeof PackedStateStore>[0];
