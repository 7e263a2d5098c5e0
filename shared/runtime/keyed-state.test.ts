import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { valueState } from '../api/state.js';
import { textSerializer } from '../api/serializers.js';
import { compareRows, KeyedStateCache } from './keyed-state.js';
import type { StateRow } from './ports.js';
import { encodeDelta } from '../codec/snapshot.js';

const count = valueState<number>('count', { defaultValue: 0 });
const label = valueState<string>('label', { serializer: textSerializer });
const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

function cache(): KeyedStateCache {
  const c = new KeyedStateCache();
  c.register('op2-process', [count, label]);
  c.register('op5-reduce', [valueState('reduce')]);
  return c;
}

describe('KeyedStateCache', () => {
  it('reads defaults, tracks writes as dirty, serializes dirty rows', () => {
    const c = cache();
    const s = c.valueState('op2-process', 'a', 7, count);
    expect(s.value()).toBe(0);
    expect(c.dirtyCount).toBe(0);
    s.update(3);
    c.valueState('op2-process', 'a', 7, label).update('hi');
    expect(c.dirtyCount).toBe(1);
    const rows = c.dirtyRows();
    expect(rows).toEqual([{ operatorId: 'op2-process', keyGroup: 7, key: 'a', values: { count: enc(3), label: new TextEncoder().encode('hi') } }]);
    // reading does not dirty
    c.valueState('op2-process', 'b', 1, count).value();
    expect(c.dirtyCount).toBe(1);
    expect(c.has('op2-process', 'b')).toBe(true);
  });

  it('clear makes an empty values map (the row is cleared at the checkpoint)', () => {
    const c = cache();
    c.load([{ operatorId: 'op2-process', keyGroup: 2, key: 'k' }], [{ operatorId: 'op2-process', keyGroup: 2, key: 'k', values: { count: enc(9) } }]);
    const s = c.valueState('op2-process', 'k', 2, count);
    expect(s.value()).toBe(9);
    s.clear();
    expect(s.value()).toBe(0); // back to the default
    expect(c.dirtyRows()).toEqual([{ operatorId: 'op2-process', keyGroup: 2, key: 'k', values: {} }]);
  });

  it('clearing one state keeps the others of the key', () => {
    const c = cache();
    c.valueState('op2-process', 'k', 2, count).update(1);
    c.valueState('op2-process', 'k', 2, label).update('x');
    c.valueState('op2-process', 'k', 2, count).clear();
    expect(Object.keys(c.dirtyRows()[0]!.values)).toEqual(['label']);
  });

  it('markClean forgets the dirty set, not the values', () => {
    const c = cache();
    c.valueState('op2-process', 'a', 0, count).update(5);
    c.markClean();
    expect(c.dirtyCount).toBe(0);
    expect(c.dirtyRows()).toEqual([]);
    expect(c.valueState('op2-process', 'a', 0, count).value()).toBe(5);
  });

  it('loads rows; ids without a row become empty entries; unknown state names are ignored', () => {
    const c = cache();
    const ids = [
      { operatorId: 'op2-process', keyGroup: 1, key: 'x' },
      { operatorId: 'op2-process', keyGroup: 1, key: 'y' },
    ];
    expect(c.missing(ids)).toEqual(ids);
    c.load(ids, [{ operatorId: 'op2-process', keyGroup: 1, key: 'x', values: { count: enc(4), gone: enc('?') } }]);
    expect(c.missing(ids)).toEqual([]);
    expect(c.valueState('op2-process', 'x', 1, count).value()).toBe(4);
    expect(c.valueState('op2-process', 'y', 1, count).value()).toBe(0);
    expect(c.size).toBe(2);
  });

  it('missing() deduplicates and skips what is loaded', () => {
    const c = cache();
    c.valueState('op2-process', 'have', 0, count).update(1);
    const id = (key: string, op = 'op2-process') => ({ operatorId: op, keyGroup: 0, key });
    expect(c.missing([id('have'), id('new'), id('new'), id('new', 'op5-reduce')])).toEqual([id('new'), id('new', 'op5-reduce')]);
  });

  it('refuses to serialize a state it has no descriptor for', () => {
    const c = new KeyedStateCache();
    c.register('op1', []);
    c.valueState('op1', 'k', 0, count).update(1);
    expect(() => c.dirtyRows()).toThrow(/state "count" of op1 has no descriptor/);
  });

  it('dirtyRows come in one order whatever the order of writes (deltas are byte-identical)', () => {
    const write = fc.record({
      op: fc.constantFrom('op2-process', 'op5-reduce'),
      key: fc.string({ maxLength: 6 }),
      value: fc.integer(),
      clear: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(write, { maxLength: 40 }), fc.integer(), (writes, seed) => {
        const apply = (ws: typeof writes) => {
          const c = cache();
          for (const w of ws) {
            const d = w.op === 'op2-process' ? count : (valueState('reduce') as typeof count);
            const s = c.valueState(w.op, w.key, w.key.length, d);
            if (w.clear) s.clear();
            else s.update(w.value);
          }
          return c.dirtyRows();
        };
        const rows = apply(writes);
        // the last write of each (op, key) wins; replaying the writes of each key in the same
        // per-key order but interleaving keys differently gives the same rows
        const byKey = new Map<string, typeof writes>();
        for (const w of writes) byKey.set(`${w.op}\u0000${w.key}`, [...(byKey.get(`${w.op}\u0000${w.key}`) ?? []), w]);
        const groups = [...byKey.values()];
        const rnd = fc.sample(fc.shuffledSubarray(groups, { minLength: groups.length, maxLength: groups.length }), { seed, numRuns: 1 })[0]!;
        const rows2 = apply(rnd.flat());
        expect(rows2).toEqual(rows);
        expect([...encodeDelta(rows2)]).toEqual([...encodeDelta(rows)]);
        const order = rows.map((r: StateRow) => [r.operatorId, r.key] as const);
        const sorted = [...order].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
        expect(order).toEqual(sorted);
      }),
    );
  });

  it('evictClean never evicts dirty keys, and stops at the limit', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ maxLength: 5 }), { maxLength: 60 }),
        fc.array(fc.boolean(), { minLength: 60, maxLength: 60 }),
        fc.nat({ max: 70 }),
        (keys, dirtyMask, limit) => {
          const c = cache();
          const ids = keys.map((key, i) => ({ operatorId: i % 2 ? 'op5-reduce' : 'op2-process', keyGroup: 0, key }));
          const reduce = valueState<number>('reduce');
          c.load(ids, []);
          c.markClean();
          const dirty = ids.filter((_, i) => dirtyMask[i]);
          for (const id of dirty) c.valueState(id.operatorId, id.key, 0, id.operatorId === 'op2-process' ? count : reduce).update(1);
          const rowsBefore = c.dirtyRows();
          const sizeBefore = c.size;
          const evicted = c.evictClean(limit);
          expect(c.size).toBe(sizeBefore - evicted);
          expect(c.size).toBe(sizeBefore <= limit ? sizeBefore : Math.max(limit, dirty.length));
          for (const id of dirty) expect(c.has(id.operatorId, id.key)).toBe(true);
          expect(c.dirtyRows()).toEqual(rowsBefore);
        },
      ),
    );
  });
  it('dirtyRows and markClean agree with a model of the dirty set across checkpoints, evictions and handles kept past eviction', () => {
    type Step =
      | { kind: 'write'; op: number; key: string; value: number; clear: boolean }
      | { kind: 'checkpoint' }
      | { kind: 'evict'; limit: number }
      | { kind: 'stale'; op: number; key: string; value: number };
    const step: fc.Arbitrary<Step> = fc.oneof(
      { weight: 6, arbitrary: fc.record({ kind: fc.constant('write' as const), op: fc.nat({ max: 1 }), key: fc.string({ maxLength: 3 }), value: fc.integer(), clear: fc.boolean() }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('checkpoint' as const) }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('evict' as const), limit: fc.nat({ max: 8 }) }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('stale' as const), op: fc.nat({ max: 1 }), key: fc.string({ maxLength: 3 }), value: fc.integer() }) },
    );
    const ops = ['op2-process', 'op5-reduce'] as const;
    const reduce = valueState<number>('reduce');
    const descOf = (op: number) => (op === 0 ? count : reduce);
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const c = cache();
        // the model: each cached key's value (undefined = cleared or never set) and the dirty keys
        const values = ops.map(() => new Map<string, number | undefined>());
        const dirty = ops.map(() => new Set<string>());
        const expected = (): StateRow[] =>
          ops
            .flatMap((op, i) =>
              [...dirty[i]!].map((key) => {
                const v = values[i]!.get(key);
                const name = i === 0 ? 'count' : 'reduce';
                return { operatorId: op, keyGroup: key.length, key, values: v === undefined ? {} : { [name]: enc(v) } };
              }),
            )
            .sort(compareRows);
        for (const s of steps) {
          if (s.kind === 'write') {
            const h = c.valueState(ops[s.op], s.key, s.key.length, descOf(s.op));
            if (s.clear) h.clear();
            else h.update(s.value);
            values[s.op]!.set(s.key, s.clear ? undefined : s.value);
            dirty[s.op]!.add(s.key);
          } else if (s.kind === 'checkpoint') {
            expect(c.dirtyRows()).toEqual(expected());
            expect(c.dirtyCount).toBe(dirty[0]!.size + dirty[1]!.size);
            c.markClean();
            for (const d of dirty) d.clear();
            expect(c.dirtyRows()).toEqual([]);
          } else if (s.kind === 'evict') {
            c.evictClean(s.limit);
            ops.forEach((op, i) => {
              for (const key of [...values[i]!.keys()]) if (!c.has(op, key)) values[i]!.delete(key);
            });
          } else {
            // a handle taken, its (clean) entry evicted, a write through the old handle, then the key written anew
            const d = descOf(s.op);
            const old = c.valueState(ops[s.op], s.key, s.key.length, d);
            if (dirty[s.op]!.has(s.key)) continue;
            c.evictClean(0);
            ops.forEach((op, i) => {
              for (const key of [...values[i]!.keys()]) if (!c.has(op, key)) values[i]!.delete(key);
            });
            old.update(s.value + 1);
            c.valueState(ops[s.op], s.key, s.key.length, d).update(s.value);
            values[s.op]!.set(s.key, s.value);
            dirty[s.op]!.add(s.key);
          }
        }
        expect(c.dirtyRows()).toEqual(expected());
      }),
      { numRuns: 300 },
    );
  });
  it('dirtyRows keeps key order when checkpoints write overlapping keys (the last order is reused: only new keys are sorted, then merged)', () => {
    // few keys, so that most checkpoints write keys the last one wrote, in a different order; an eviction in between
    const key = fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'Z', '\u00e9', '\ud83d\ude00'), maxLength: 2 });
    const checkpoint = fc.record({ keys: fc.array(key, { maxLength: 12 }), evict: fc.boolean() });
    fc.assert(
      fc.property(fc.array(checkpoint, { minLength: 2, maxLength: 8 }), (checkpoints) => {
        const c = cache();
        let n = 0;
        for (const cp of checkpoints) {
          for (const k of cp.keys) c.valueState('op2-process', k, 0, count).update(++n);
          const keys = c.dirtyRows().map((r) => r.key);
          expect(keys).toEqual([...new Set(cp.keys)].sort());
          c.markClean();
          if (cp.evict) c.evictClean(2);
        }
      }),
      { numRuns: 300 },
    );
  });
  it('eviction and a spill of dirty keys let go of the entries kept for the next checkpoint\'s key order (memory they free stays free)', () => {
    const c = cache();
    for (const k of ['a', 'b', 'c']) c.valueState('op2-process', k, 0, count).update(1);
    c.dirtyRows();
    c.markClean();
    expect(c.orderedEntries).toBe(3);
    expect(c.evictClean(0)).toBe(3);
    expect(c.orderedEntries).toBe(0);
    for (const k of ['d', 'e']) c.valueState('op2-process', k, 0, count).update(1);
    c.dirtyRows();
    expect(c.orderedEntries).toBe(2);
    expect(c.takeDirty(2)).toHaveLength(2);
    expect(c.orderedEntries).toBe(0);
  });

  it('keeps in its key order every entry serialized so far and leaves out those a load replaced (no key twice, none kept past its entry)', () => {
    const c = cache();
    const id = { operatorId: 'op2-process', keyGroup: 0, key: 'a' };
    for (const k of ['a', 'b', 'c']) c.valueState('op2-process', k, 0, count).update(1);
    c.dirtyRows();
    c.markClean();
    // a checkpoint writing some of the keys keeps the others in the order for the next one
    c.valueState('op2-process', 'c', 0, count).update(2);
    expect(c.dirtyRows().map((r) => r.key)).toEqual(['c']);
    c.markClean();
    expect(c.orderedEntries).toBe(3);
    c.load([id], [{ ...id, values: { count: enc(5) } }]);
    for (const k of ['a', 'b']) c.valueState('op2-process', k, 0, count).update(3);
    expect(c.dirtyRows().map((r) => [r.key, new TextDecoder().decode(r.values.count)])).toEqual([['a', '3'], ['b', '3']]);
    c.markClean();
    expect(c.orderedEntries).toBe(3);
    c.valueState('op2-process', 'a', 0, count).update(4);
    expect(c.dirtyRows().map((r) => r.key)).toEqual(['a']);
  });

  it('a checkpoint writing few of many kept keys sorts them alone and keeps only them: its cost is bounded by its dirty keys, not the state', () => {
    const c = cache();
    for (let i = 0; i < 50; i++) c.valueState('op2-process', `k${String(i).padStart(2, '0')}`, 0, count).update(1);
    c.dirtyRows();
    c.markClean();
    expect(c.orderedEntries).toBe(50);
    for (const k of ['k40', 'k03', 'k17']) c.valueState('op2-process', k, 0, count).update(2);
    expect(c.dirtyRows().map((r) => r.key)).toEqual(['k03', 'k17', 'k40']);
    c.markClean();
    expect(c.orderedEntries).toBe(3);
    // the next checkpoint's new keys merge into the restarted order
    for (const k of ['k45', 'k03', 'k01']) c.valueState('op2-process', k, 0, count).update(3);
    expect(c.dirtyRows().map((r) => r.key)).toEqual(['k01', 'k03', 'k45']);
  });

  it('marks the entries it lets go of as dropped: evicted, spilled, or replaced by a load (a timer keeping one looks the key up again)', () => {
    const c = cache();
    const evicted = c.current('op2-process', 'a', 0);
    const spilled = c.current('op2-process', 'b', 0);
    c.valueState('op2-process', 'b', 0, count).update(1);
    expect(c.evictClean(0)).toBe(1);
    expect(evicted.dropped).toBe(true);
    expect(spilled.dropped).toBe(false);
    expect(c.takeDirty(1)).toHaveLength(1);
    expect(spilled.dropped).toBe(true);
    const kept = c.current('op2-process', 'c', 0);
    c.load([{ operatorId: 'op2-process', keyGroup: 0, key: 'c' }], []);
    expect(kept.dropped).toBe(true);
    expect(c.current('op2-process', 'c', 0).dropped).toBe(false);
  });

  it('a key loaded again over its cached entry is serialized from the new entry, also when a handle of the old one writes it', () => {
    // dirtyRows takes a listed entry as it is unless it left the cache: an entry replaced by `load` left it too
    const c = cache();
    const old = c.valueState('op2-process', 'a', 0, count);
    c.valueState('op2-process', 'b', 0, count).update(1);
    const id = { operatorId: 'op2-process', keyGroup: 0, key: 'a' };
    c.load([id], [{ ...id, values: { count: enc(5) } }]);
    old.update(9);
    expect(c.valueState('op2-process', 'a', 0, count).value()).toBe(5);
    c.valueState('op2-process', 'b', 0, count).update(2);
    expect(c.dirtyRows().map((r) => [r.key, new TextDecoder().decode(r.values.count)])).toEqual([['a', '5'], ['b', '2']]);
  });

  it('puts back what an engine operator changed in place when the record is undone, last change first; a committed record keeps it', () => {
    const c = new KeyedStateCache();
    const acc = [1000, 2000, 1];
    // outside a record nothing is noted
    c.changedInPlace(acc, 2, 0);
    c.beginRecord();
    c.changedInPlace(acc, 2, acc[2]);
    acc[2] = 2;
    c.changedInPlace(acc, 2, acc[2]);
    acc[2] = 3;
    c.rollbackRecord();
    expect(acc).toEqual([1000, 2000, 1]);
    c.beginRecord();
    c.changedInPlace(acc, 2, acc[2]);
    acc[2] = 4;
    c.commitRecord();
    c.beginRecord();
    c.rollbackRecord();
    expect(acc).toEqual([1000, 2000, 4]);
  });

  it('a record undone after earlier committed records of its key gets back what it found, dirty flag too (each first access saves over the last record\'s saves)', () => {
    const c = cache();
    const box = valueState<{ n: number }>('box');
    c.register('op6-process', [box, label]);
    const at = () => c.valueState('op6-process', 'a', 0, box);
    c.beginRecord();
    at().update({ n: 1 });
    c.valueState('op6-process', 'a', 0, label).update('one');
    c.commitRecord();
    c.dirtyRows();
    c.markClean();
    // record 2 changes the value in place (saved as bytes) and makes the key dirty again
    c.beginRecord();
    const v = at().value()!;
    v.n = 2;
    at().update(v);
    c.commitRecord();
    c.beginRecord();
    at().value()!.n = 3;
    c.valueState('op6-process', 'a', 0, label).update('three');
    c.rollbackRecord();
    expect(at().value()).toEqual({ n: 2 });
    expect(c.valueState('op6-process', 'a', 0, label).value()).toBe('one');
    expect(c.dirtyRows().map((r) => r.key)).toEqual(['a']);
  });
});
