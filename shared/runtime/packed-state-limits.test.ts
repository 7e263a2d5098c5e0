/**
 * The packed state store's bounds and its answers to damage: the cache of group views, the groups
 * written at a time, contention that does not end, and a chain of items that names one missing or
 * twice.
 */
import { describe, expect, it } from 'vitest';
import { MemoryStateTable } from '../adapters/memory/memory-state.js';
import { groupPk, groupRows, PackedStateStore, ROOT_SK, type PackedTable, type StoredItem } from './packed-state.js';
import type { StateRow } from './ports.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const row = (key: string, v: string, keyGroup = 7): StateRow => ({ operatorId: 'op', keyGroup, key, values: v ? { count: enc.encode(v) } : {} });
const id = (key: string, keyGroup = 7) => ({ operatorId: 'op', keyGroup, key });
const text = (r: StateRow | undefined) => (r?.values.count ? dec.decode(r.values.count) : undefined);

/** a table whose puts wait until `release` is called, counting how many wait at once */
function gatedTable(t: MemoryStateTable) {
  let waiting: Array<() => void> = [];
  let inFlight = 0;
  let most = 0;
  const table: PackedTable = {
    query: (pk) => t.query(pk),
    getItems: (keys) => t.getItems(keys),
    delete: (pk, sk, expected) => t.delete(pk, sk, expected),
    put: async (pk, item, expected) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise<void>((resolve) => waiting.push(resolve));
      inFlight--;
      return t.put(pk, item, expected);
    },
  };
  return {
    table,
    most: () => most,
    inFlight: () => inFlight,
    release: () => {
      const w = waiting;
      waiting = [];
      for (const r of w) r();
    },
  };
}

describe('PackedStateStore bounds', () => {
  it('writes at most `concurrency` key groups at a time, and every group of the checkpoint lands', async () => {
    const t = new MemoryStateTable();
    const g = gatedTable(t);
    const s = new PackedStateStore(g.table, { concurrency: 3 });
    const done = s.applyRows(1, 1, Array.from({ length: 10 }, (_, i) => row(`k${i}`, String(i), i)));
    for (let spins = 0; spins < 1000 && t.puts < 10; spins++) {
      await new Promise((r) => setImmediate(r));
      g.release();
    }
    await done;
    expect(g.most()).toBe(3);
    const got = await new PackedStateStore(t).getRows(Array.from({ length: 10 }, (_, i) => id(`k${i}`, i)));
    expect(got.map(text).sort()).toEqual(Array.from({ length: 10 }, (_, i) => String(i)).sort());
  });

  it('keeps group views up to `cacheBytes`: a group pushed out of the cache is read whole again, one kept is not', async () => {
    const t = new MemoryStateTable();
    const reads: string[] = [];
    t.onRead = (pk) => reads.push(pk ? `query ${pk}` : 'get');
    // each group's view is about 100 bytes of entries + overhead: room for two, not three
    const s = new PackedStateStore(t, { cacheBytes: 500 });
    for (const g of [1, 2, 3]) await s.applyRows(1, 1, Array.from({ length: 8 }, (_, i) => row(`key-${i}`, 'v'.repeat(4), g)));
    reads.length = 0;
    await s.getRows([id('key-1', 3)]);
    await s.getRows([id('key-1', 1)]);
    // group 3 was written last (kept: one item read fresh), group 1 first (pushed out: the group queried)
    expect(reads).toEqual(['get', `query ${groupPk('op', 1)}`]);
    // a store whose cache holds nothing reads every group whole
    const none = new PackedStateStore(t, { cacheBytes: 0 });
    await none.getRows([id('key-1', 2)]);
    reads.length = 0;
    await none.getRows([id('key-1', 2)]);
    expect(reads).toEqual([`query ${groupPk('op', 2)}`]);
  });

  it('the same key asked for twice is answered once', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t);
    await s.applyRows(1, 1, [row('a', '1'), row('b', '2')]);
    for (const reader of [s, new PackedStateStore(t)]) {
      const got = await reader.getRows([id('a'), id('b'), id('a'), id('nope'), id('nope')]);
      expect(got.map((r) => [r.key, text(r) ?? null])).toEqual([
        ['a', '1'],
        ['b', '2'],
        ['nope', null],
      ]);
    }
  });

  it('a split size above the item limit is held to it: no item grows past what DynamoDB takes', async () => {
    const t = new MemoryStateTable();
    const s = new PackedStateStore(t, { splitBytes: 10 * 1024 * 1024 });
    // 1.2 MB in one key group
    await s.applyRows(1, 1, Array.from({ length: 60 }, (_, i) => ({ ...row(`k${String(i).padStart(2, '0')}`, ''), values: { blob: new Uint8Array(20 * 1024).fill(i) } })));
    const items = [...t.groups.get(groupPk('op', 7))!.values()];
    expect(items.length).toBeGreaterThanOrEqual(3);
    for (const i of items) expect(i.d!.length).toBeLessThan(390 * 1024);
  });
});

describe('PackedStateStore under contention it cannot win', () => {
  it('gives up after 21 attempts with a retryable error naming the group, having re-read it each time', async () => {
    const t = new MemoryStateTable();
    await new PackedStateStore(t).applyRows(1, 1, [row('a', '1')]);
    let puts = 0;
    const loser: PackedTable = {
      query: (pk) => t.query(pk),
      getItems: (keys) => t.getItems(keys),
      delete: (pk, sk, expected) => t.delete(pk, sk, expected),
      // another writer always got there first
      put: async () => (puts++, false),
    };
    const s = new PackedStateStore(loser);
    const err = await s.applyRows(2, 2, [row('a', '2')]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STATE_CONTENDED', retryable: true, message: `state items of ${groupPk('op', 7)}: still contended after 21 attempts` });
    expect(puts).toBe(21);
    expect(s.versionConflicts).toBe(21);
  });
});

describe('PackedStateStore: a damaged chain is named, not misread', () => {
  const packed = async () => {
    const t = new MemoryStateTable();
    await new PackedStateStore(t, { splitBytes: 512 }).applyRows(3, 1, Array.from({ length: 40 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, 'x'.repeat(20))));
    const items = t.groups.get(groupPk('op', 7))!;
    expect(items.size).toBeGreaterThan(2);
    return { t, items };
  };

  it('an item the chain names that is missing: STATE_CORRUPT naming it, the item linking it, and the keys lost', async () => {
    const { t, items } = await packed();
    const root = items.get(ROOT_SK)!;
    items.delete(root.n!);
    for (const s of [new PackedStateStore(t), undefined]) {
      const read = s ? s.getRows([id('k00')]) : Promise.resolve().then(() => groupRows(groupPk('op', 7), [...items.values()]));
      await expect(read).rejects.toMatchObject({
        code: 'STATE_CORRUPT',
        message: `state items of op#7: the chain names ${JSON.stringify(root.n)} by item ${JSON.stringify(ROOT_SK)} (checkpoint 3, version ${root.r}), which is missing; the keys of its range cannot be read (a retry unlinked what a successful write had linked?)`,
      });
    }
  });

  it('a chain that comes back to an item it passed: STATE_CORRUPT, "already in it"', async () => {
    const { t, items } = await packed();
    const root = items.get(ROOT_SK)!;
    const second = items.get(root.n!)!;
    items.set(second.sk, { ...second, n: ROOT_SK } as StoredItem);
    await expect(new PackedStateStore(t).readGroup('op', 7)).rejects.toMatchObject({
      code: 'STATE_CORRUPT',
      message: `state items of op#7: the chain names ${JSON.stringify(ROOT_SK)} by item ${JSON.stringify(second.sk)} (checkpoint 3, version ${second.r}), which is already in it`,
    });
  });
});
