import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStateTable } from '../adapters/memory/memory-ports.js';
import { PackedStateStore } from './packed-state.js';
import type { StateRow, StateStore } from './ports.js';
import { blobName, SPILLED, SpillingStateStore, type BlobStore } from './spilling-state-store.js';

class Blobs implements BlobStore {
  readonly objects = new Map<string, Uint8Array>();
  async put(key: string, bytes: Uint8Array): Promise<void> {
    this.objects.set(key, bytes.slice());
  }
  async get(key: string): Promise<Uint8Array> {
    const b = this.objects.get(key);
    if (!b) throw new Error(`no blob ${key}`);
    return b.slice();
  }
}

const size = (r: StateRow) => Object.entries(r.values).reduce((n, [k, v]) => n + k.length + v.length, r.key.length);

const rowsArb = fc.uniqueArray(
  fc.record({
    operatorId: fc.constantFrom('op1', 'op2'),
    keyGroup: fc.nat({ max: 7 }),
    key: fc.string({ maxLength: 8 }),
    values: fc.dictionary(fc.constantFrom('a', 'count', 'list'), fc.uint8Array({ maxLength: 40 }), { noNullPrototype: true }),
  }),
  { selector: (r) => `${r.operatorId}\u0000${r.key}`, maxLength: 30 },
);

describe('SpillingStateStore', () => {
  it('spills exactly the rows over the threshold, hands the others through as they are, and reads every row back whole', async () => {
    await fc.assert(
      fc.asyncProperty(rowsArb, fc.nat({ max: 60 }), async (rows, threshold) => {
        const applied: StateRow[][] = [];
        const inner: StateStore = new PackedStateStore(new MemoryStateTable());
        const recording: StateStore = {
          getRows: (ids) => inner.getRows(ids),
          applyRows: (n, f, rs) => {
            applied.push([...rs]);
            return inner.applyRows(n, f, rs);
          },
        };
        const blobs = new Blobs();
        const store = new SpillingStateStore(recording, blobs, threshold);
        await store.applyRows(3, 1, rows);
        // the general rule, row by row: over the threshold → a reference to its blob, else the row itself
        expect(applied).toHaveLength(1);
        expect(applied[0]!).toHaveLength(rows.length);
        rows.forEach((r, i) => {
          const got = applied[0]![i]!;
          if (size(r) > threshold) {
            expect(Object.keys(got.values)).toEqual([SPILLED]);
            expect(new TextDecoder().decode(got.values[SPILLED])).toBe(blobName(r, 3));
          } else expect(got).toBe(r);
        });
        expect(store.spilled).toBe(rows.filter((r) => size(r) > threshold).length);
        const back = await store.getRows(rows.map(({ operatorId, keyGroup, key }) => ({ operatorId, keyGroup, key })));
        const norm = (rs: readonly StateRow[]) =>
          rs
            .filter((r) => Object.keys(r.values).length)
            .map((r) => ({ operatorId: r.operatorId, key: r.key, values: Object.fromEntries(Object.entries(r.values).map(([k, v]) => [k, [...v]]).sort()) }))
            .sort((a, b) => (a.operatorId + a.key < b.operatorId + b.key ? -1 : 1));
        expect(norm(back)).toEqual(norm(rows));
      }),
      { numRuns: 200 },
    );
  });
});
