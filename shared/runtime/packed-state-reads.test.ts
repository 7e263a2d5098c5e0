/**
 * Reads of the packed state store are strongly consistent whatever its cache holds: a reader that
 * knows a group's chain reads only the items holding the keys, and must still see every write and
 * split another store made since (checked against a Map of the writes), across several groups at
 * once, with keys asked twice or never written; and rows of the older one-key-per-item layout.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStateTable } from '../adapters/memory/memory-state.js';
import { groupPk, groupRows, PackedStateStore, ROOT_SK, type StoredItem } from './packed-state.js';
import type { StateRow } from './ports.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const row = (key: string, v: string, keyGroup: number): StateRow => ({ operatorId: 'op', keyGroup, key, values: v ? { n: enc.encode(v) } : {} });
const text = (r: StateRow | undefined) => (r?.values.n ? dec.decode(r.values.n) : undefined);

describe('PackedStateStore reads against a Map of the writes', () => {
  it('a reader with a cached chain sees every write and split of another store, in every group it asks', async () => {
    const keyArb = fc.integer({ min: 0, max: 49 }).map((i) => `k${String(i).padStart(2, '0')}`);
    const groupArb = fc.integer({ min: 1, max: 3 });
    const stepArb = fc.oneof(
      // a checkpoint by the writer (value '' clears)
      fc.record({ write: fc.array(fc.tuple(keyArb, groupArb, fc.oneof(fc.constant(''), fc.string({ minLength: 1, maxLength: 24 }))), { minLength: 1, maxLength: 20 }) }),
      // a read by the reader, keys repeated and never written among them
      fc.record({ read: fc.array(fc.tuple(keyArb, fc.integer({ min: 1, max: 4 })), { minLength: 1, maxLength: 12 }), cacheBytes: fc.constantFrom(0, 600, 1 << 20) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 12 }), async (steps) => {
        const t = new MemoryStateTable();
        const writer = new PackedStateStore(t, { splitBytes: 300 });
        const readers = new Map<number, PackedStateStore>();
        const truth = new Map<string, { v: string; n: number }>();
        let n = 0;
        for (const step of steps) {
          if ('write' in step) {
            n++;
            await writer.applyRows(
              n,
              1,
              step.write.map(([k, g, v]) => row(k, v, g)),
            );
            for (const [k, g, v] of step.write) truth.set(`${g}/${k}`, { v, n });
            continue;
          }
          let reader = readers.get(step.cacheBytes);
          if (!reader) readers.set(step.cacheBytes, (reader = new PackedStateStore(t, { splitBytes: 300, cacheBytes: step.cacheBytes })));
          const ids = step.read.map(([key, keyGroup]) => ({ operatorId: 'op', keyGroup, key }));
          const got = await reader.getRows(ids);
          // each key once, in the order asked (by group, first asked first)
          const once = [...new Map(ids.map((i) => [`${i.keyGroup}/${i.key}`, i])).values()];
          const groupsInOrder = [...new Set(once.map((i) => i.keyGroup))];
          const rowsWanted = groupsInOrder.flatMap((g) => once.filter((i) => i.keyGroup === g));
          const written = (i: { keyGroup: number; key: string }) => [...truth.keys()].some((k) => k.startsWith(`${i.keyGroup}/`));
          expect(got.map((r) => `${r.keyGroup}/${r.key}`)).toEqual(rowsWanted.filter(written).map((i) => `${i.keyGroup}/${i.key}`));
          for (const r of got) {
            const want = truth.get(`${r.keyGroup}/${r.key}`);
            expect(text(r) ?? '').toBe(want?.v ?? '');
            // the row carries its item's checkpoint: at least the one that last wrote the key
            if (want) expect(r.checkpointId).toBeGreaterThanOrEqual(want.n);
            expect(r.checkpointId).toBeLessThanOrEqual(n);
          }
        }
      }),
      { numRuns: 150 },
    );
  });

  it('an item rewritten at the same range is read fresh through the cached chain; one split since is read with its group', async () => {
    const t = new MemoryStateTable();
    const reads: string[] = [];
    t.onRead = (pk, items) => reads.push(pk ? `query ${items.length}` : `get ${items.length}`);
    const writer = new PackedStateStore(t, { splitBytes: 300 });
    await writer.applyRows(1, 1, Array.from({ length: 20 }, (_, i) => row(`k${String(i).padStart(2, '0')}`, 'a'.repeat(8), 1)));
    const reader = new PackedStateStore(t, { splitBytes: 300 });
    const ids = (...ks: string[]) => ks.map((key) => ({ operatorId: 'op', keyGroup: 1, key }));
    await reader.getRows(ids('k00'));
    reads.length = 0;
    // two keys of different items: one BatchGetItem of both
    const two = await reader.getRows(ids('k00', 'k19', 'k00'));
    expect(reads.splice(0)).toEqual(['get 2']);
    expect(two.map(text)).toEqual(['a'.repeat(8), 'a'.repeat(8)]);
    // an item cleared of every key is still read fresh and answers "cleared" at its new checkpoint
    await writer.applyRows(2, 1, [row('k19', '', 1)]);
    expect((await reader.getRows(ids('k19'))).map((r) => [text(r) ?? null, r.checkpointId])).toEqual([[null, 2]]);
    expect(reads.splice(0)).toEqual(['get 1']);
    // an item gone from the table (the group reset): the group is read whole
    t.groups.delete(groupPk('op', 1));
    expect((await reader.getRows(ids('k00'))).map(text)).toEqual([]);
    expect(reads.splice(0)).toEqual(['get 0', 'query 0']);
  });
});

describe('rows of the older one-key-per-item layout', () => {
  it('are read with their own checkpoint until the group has a root; the root then starts at the newest of them and they are deleted', async () => {
    const t = new MemoryStateTable();
    const pk = groupPk('op', 7);
    // in no particular order (a Query returns them by sk, the older layout's writers in any order)
    const legacy: StoredItem[] = [
      { sk: 'c', v: { n: enc.encode('C') } },
      { sk: 'a', ckpt: 4, v: { n: enc.encode('A') } },
      { sk: 'b', ckpt: 9, v: {} },
    ];
    t.groups.set(pk, new Map(legacy.map((i) => [i.sk, i])));
    expect([...groupRows(pk, legacy)].map(([k, r]) => [k, dec.decode(r.values.n), r.checkpointId]).sort()).toEqual([
      ['a', 'A', 4],
      ['c', 'C', 0],
    ]);
    const s = new PackedStateStore(t);
    const ids = ['a', 'b', 'c', 'd'].map((key) => ({ operatorId: 'op', keyGroup: 7, key }));
    expect((await s.getRows(ids)).map((r) => [r.key, text(r) ?? null, r.checkpointId])).toEqual([
      ['a', 'A', 4],
      ['b', null, 9],
      ['c', 'C', 0],
    ]);
    // the root starts stamped by the newest checkpoint among them: checkpoint 5 is behind it
    const stale = await s.apply(5, [row('d', 'stale', 7)]);
    expect(stale.rejected.map((x) => x.key)).toEqual(['d']);
    expect(stale.itemWrites).toBe(0);
    const r = await s.apply(10, [row('d', 'D', 7)]);
    expect(r.accepted.map((x) => x.key)).toEqual(['d']);
    const items = [...t.groups.get(pk)!.values()];
    expect(items.map((i) => i.sk)).toEqual([ROOT_SK]);
    expect(items[0]).toMatchObject({ c: 10, r: 1 });
    expect((await new PackedStateStore(t).getRows(ids)).map((x) => [x.key, text(x) ?? null, x.checkpointId])).toEqual([
      ['a', 'A', 10],
      ['b', null, 10],
      ['c', 'C', 10],
      ['d', 'D', 10],
    ]);
  });
});
