import { describe, expect, it } from 'vitest';
import { MemoryControlStore } from '../adapters/memory/memory-ports.js';
import { MemoryStateStore } from '../adapters/memory/memory-state.js';
import { encodeDelta } from '../codec/snapshot.js';
import { itemSize } from '../../bench/dynamo-size.js';
import { chainEntry, chainOf, materializeEvery, PendingRows, readSnapshot } from './changelog.js';
import { mulberry32 } from './random.js';
import { compareRows } from './keyed-state.js';
import type { DeltaRef, SnapshotPointer, StateRow, StateStore } from './ports.js';

const utf8 = new TextEncoder();
const row = (key: string, v?: string): StateRow => ({ operatorId: 'op', keyGroup: 1, key, values: v === undefined ? {} : { s: utf8.encode(v) } });
const value = (r: StateRow | undefined) => (r?.values.s ? new TextDecoder().decode(r.values.s) : undefined);
const id = (key: string) => ({ operatorId: 'op', keyGroup: 1, key });

/** Snapshot n of instance `i:s` the way StageInstance takes it: delta, then the pointer (naming the chain), then the rows. */
async function snapshot(control: MemoryControlStore, pending: PendingRows, n: number, rows: StateRow[], force = false): Promise<void> {
  const bytes = encodeDelta(rows);
  const delta = await control.writeDelta('i:s', n, bytes);
  const pointer: SnapshotPointer = { checkpointId: n, replayPoint: { from: 'start' }, delta, meta: {} };
  await pending.publish(control, 'i:s', 1, pointer, { rows, bytes: bytes.length }, force);
}

describe('changelog state', () => {
  it('answers reads of keys snapshotted but not applied from memory, with the checkpoint that wrote them', async () => {
    const table = new MemoryStateStore();
    const control = new MemoryControlStore();
    await control.takeOver('i:s', 0);
    await table.applyRows(1, 1, [row('a', 'a1'), row('b', 'b1'), row('c', 'c1')]);
    const pending = new PendingRows(table, 3);
    await snapshot(control, pending, 2, [row('a', 'a2'), row('b')]);
    // the table still holds checkpoint 1; a key evicted from the cache must not be read back from it
    expect(table.asOf(2).map((r) => [r.key, value(r)])).toEqual([['a', 'a1'], ['b', 'b1'], ['c', 'c1']]);
    const got = await pending.getRows([id('a'), id('b'), id('c'), id('d')]);
    expect(got.filter((r) => value(r) !== undefined).map((r) => [r.key, value(r), r.checkpointId])).toEqual([['a', 'a2', 2], ['c', 'c1', 1]]);
    // the third snapshot is due: the union is applied as checkpoint 4, and nothing stays pending
    await snapshot(control, pending, 3, [row('c', 'c3')]);
    await snapshot(control, pending, 4, [row('a', 'a4')]);
    expect(table.asOf(4).map((r) => [r.key, value(r)])).toEqual([['a', 'a4'], ['c', 'c3']]);
    expect(pending.size).toBe(0);
  });

  it('names the chain in the pointer and folds it on restore (later wins, a cleared key stays cleared)', async () => {
    const table = new MemoryStateStore();
    const control = new MemoryControlStore();
    await control.takeOver('i:s', 0);
    const pending = new PendingRows(table, 5);
    await snapshot(control, pending, 1, [row('a', 'a1'), row('b', 'b1')]);
    await snapshot(control, pending, 2, [row('b')]);
    await snapshot(control, pending, 3, [row('a', 'a3'), row('c', 'c3')]);
    const pointer = (await control.readLease('i:s')).snapshot!;
    expect(pointer.meta).toMatchObject({ base: 0, chain: [expect.stringMatching(/^i\d+:/), expect.stringMatching(/^i\d+:/)] });
    expect(table.asOf(3)).toEqual([]);
    // a new owner: one application of the folded rows as checkpoint 3, then an empty chain
    const next = new PendingRows(table, 5);
    await next.restore(control, pointer, 2);
    expect(table.asOf(3).map((r) => [r.key, value(r)])).toEqual([['a', 'a3'], ['c', 'c3']]);
    expect((await readSnapshot(control, pointer)).rows.map((r) => [r.key, value(r)])).toEqual([['a', 'a3'], ['b', undefined], ['c', 'c3']]);
    await snapshot(control, next, 4, [row('d', 'd4')]);
    expect((await control.readLease('i:s')).snapshot!.meta).not.toHaveProperty('chain');
  });

  it('applies at once when forced (a savepoint, a reshard, the end of the input are about to read the table)', async () => {
    const table = new MemoryStateStore();
    const control = new MemoryControlStore();
    await control.takeOver('i:s', 0);
    const pending = new PendingRows(table, 6);
    await snapshot(control, pending, 1, [row('a', 'a1')]);
    await snapshot(control, pending, 2, [row('b', 'b2')], true);
    expect(table.asOf(2).map((r) => r.key)).toEqual(['a', 'b']);
  });

  it('applies once the pending rows pass the byte bound, however soon', async () => {
    const table = new MemoryStateStore();
    const control = new MemoryControlStore();
    await control.takeOver('i:s', 0);
    const pending = new PendingRows(table, 6, 60);
    await snapshot(control, pending, 1, [row('a', 'a1')]);
    expect(table.asOf(1)).toEqual([]);
    await snapshot(control, pending, 2, [row('b'.repeat(40), 'b2')]);
    expect(table.asOf(2).map((r) => r.key)).toEqual(['a', 'b'.repeat(40)]);
  });

  it('reads and applies what a map of every snapshot\'s rows (later wins) holds, for random snapshots', async () => {
    // the rows are kept per snapshot and merged when applied: checked against the plain fold, with
    // snapshots in and out of order, a key twice in one snapshot, cleared keys and two operators
    for (let seed = 1; seed <= 20; seed++) {
      const rnd = mulberry32(seed);
      const pick = (n: number) => Math.floor(rnd() * n);
      const table = new MemoryStateStore();
      const control = new MemoryControlStore();
      await control.takeOver('i:s', 0);
      const every = 1 + pick(5);
      // merged snapshots reach the table each key once, in compareRows order (a single snapshot's
      // rows, with every = 1, go as they came)
      const strict: StateStore = {
        getRows: (ids) => table.getRows(ids),
        applyRows: (n, f, rows) => {
          if (every > 1) for (let i = 1; i < rows.length; i++) expect(compareRows(rows[i - 1]!, rows[i]!)).toBe(-1);
          return table.applyRows(n, f, rows);
        },
      };
      const pending = new PendingRows(strict, every);
      const oracle = new Map<string, { op: string; key: string; v: string | undefined; n: number }>();
      const applied = new Map<string, string>();
      let since = 0;
      for (let n = 1; n <= 12; n++) {
        const rows: StateRow[] = [];
        for (let i = pick(8); i > 0; i--) {
          const op = pick(3) ? 'op' : 'op0';
          const key = `k${pick(12)}`;
          const v = pick(5) ? `${key}@${n}.${i}` : undefined;
          rows.push({ operatorId: op, keyGroup: 1, key, values: v === undefined ? {} : { s: utf8.encode(v) } });
        }
        if (pick(2)) rows.sort((a, b) => (a.operatorId + a.key < b.operatorId + b.key ? -1 : 1));
        for (const r of rows) oracle.set(`${r.operatorId}/${r.key}`, { op: r.operatorId, key: r.key, v: value(r), n });
        await snapshot(control, pending, n, rows);
        if (++since === every) {
          since = 0;
          for (const [k, o] of oracle) {
            if (o.v === undefined) applied.delete(k);
            else applied.set(k, o.v);
          }
          oracle.clear();
        }
        const inTable = new Map(table.asOf(n).map((r) => [`${r.operatorId}/${r.key}`, value(r)!]));
        expect(inTable).toEqual(applied);
        const ids = Array.from({ length: 12 }, (_, i) => [{ operatorId: 'op', keyGroup: 1, key: `k${i}` }, { operatorId: 'op0', keyGroup: 1, key: `k${i}` }]).flat();
        const got = new Map((await pending.getRows(ids)).map((r) => [`${r.operatorId}/${r.key}`, [value(r), r.checkpointId]]));
        for (const id of ids) {
          const k = `${id.operatorId}/${id.key}`;
          const o = oracle.get(k);
          if (o) expect(got.get(k)).toEqual([o.v, o.n]);
          else if (applied.has(k)) expect(got.get(k)?.[0]).toBe(applied.get(k));
          else expect(got.get(k)?.[0]).toBeUndefined();
        }
        expect(pending.size).toBe(oracle.size);
      }
    }
  });

  it('names each chain delta in a few bytes and reads it back as it was, for random refs and pointers', () => {
    // the entries are relative to the pointer's own delta: any ref, in either store, with or without a shared prefix
    for (let seed = 1; seed <= 200; seed++) {
      const rnd = mulberry32(seed);
      const pick = (n: number) => Math.floor(rnd() * n);
      const key = () => ['delta#', 'deltas/', 'd', ''][pick(4)]! + 'x:y|'.slice(0, pick(5)) + String(pick(1000)).padStart(pick(13), '0') + ['', '.bin', ':', 'i1:'][pick(4)]!;
      const ref = (): DeltaRef => ({ store: pick(2) ? 'inline' : 's3', key: key() });
      const own = ref();
      const chain = Array.from({ length: 1 + pick(16) }, ref);
      const pointer: SnapshotPointer = { checkpointId: 20, replayPoint: { from: 'start' }, delta: own, meta: { base: 3, chain: chain.map((r) => chainEntry(r, own)) } };
      expect(chainOf(pointer).chain).toEqual(chain);
    }
    // pointers written before the entries were strings name their deltas as objects
    const old = { checkpointId: 5, replayPoint: { from: 'start' }, delta: { store: 'inline', key: 'delta#i:s|000000000005' }, meta: { base: 2, chain: [{ store: 's3', key: 'deltas/i/s/000000000003.bin' }, { store: 'inline', key: 'delta#i:s|000000000004' }] } } as SnapshotPointer;
    expect(chainOf(old).chain).toEqual([{ store: 's3', key: 'deltas/i/s/000000000003.bin' }, { store: 'inline', key: 'delta#i:s|000000000004' }]);
    expect(() => chainOf({ ...old, meta: { base: 2, chain: ['x:1'] } } as SnapshotPointer)).toThrow(/malformed chain entry/);
  });

  it('keeps the lease item within one write unit with the longest chain, so each batch\'s position write costs one unit', () => {
    // the deltas named as DynamoDBControlStore names them, for a long instance id; every lease attribute it writes
    const instance = 'enrich-and-count-by-region:shardId-000000000017';
    const inline = (n: number): DeltaRef => ({ store: 'inline', key: `delta#${instance}|${String(n).padStart(12, '0')}` });
    const s3 = (n: number): DeltaRef => ({ store: 's3', key: `deltas/${instance.replace(':', '/')}/${String(n).padStart(12, '0')}.bin` });
    for (const at of [inline, s3]) {
      const n = 1_000_017;
      const chain = Array.from({ length: 16 }, (_, i) => (i % 3 ? at : i % 2 ? s3 : inline)(n - 16 + i));
      const replayPoint = { from: 'at', sequenceNumber: '49659012345678901234567890123456789012345678901234567891' } as const;
      const pointer: SnapshotPointer = { checkpointId: n, replayPoint, delta: at(n), meta: { watermark: 1_764_000_000_000, base: n - 17, chain: chain.map((r) => chainEntry(r, at(n))) } };
      const lease = {
        pk: `lease#${instance}`, sk: 'lease', fence: 12, takenAt: '2026-12-03T15:00:00.000Z', wt: '6f1c2a9e-3b7d-4c1e-9a55-0d2f8e7b1c44',
        lastPosition: '49659012345678901234567890123456789012345678901234567890', firstPosition: '49659012345678901234567890123456789012345678901234567890',
        snapshot: JSON.stringify(pointer), snapshotAt: '2026-12-03T15:00:00.000Z',
      };
      expect(itemSize(lease)).toBeLessThanOrEqual(1024);
      expect(chainOf(JSON.parse(lease.snapshot) as SnapshotPointer).chain).toEqual(chain);
    }
  });

  it('materializes about every two minutes by default, as the plan says otherwise', () => {
    expect(materializeEvery({ intervalMs: 10_000, minPauseMs: 0 })).toBe(12);
    expect(materializeEvery({ intervalMs: 60_000, minPauseMs: 0 })).toBe(2);
    expect(materializeEvery({ intervalMs: 120_000, minPauseMs: 0 })).toBe(1);
    expect(materializeEvery({ intervalMs: 1_000, minPauseMs: 0 })).toBe(16);
    expect(materializeEvery({ intervalMs: 10_000, minPauseMs: 0, materializeEvery: 1 })).toBe(1);
  });
});
