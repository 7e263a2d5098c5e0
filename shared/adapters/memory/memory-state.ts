/**
 * The state table twin: items by (pk, sk) with DynamoDB's conditions and item size limit
 * (`MemoryStateTable`, a `PackedTable`), and the state store over it — the same packed-state logic
 * as the DynamoDB store — keeping the history of every row change for the tests' oracles.
 */
import type { StateRow, StateRowId, StateStore } from '../../runtime/ports.js';
import { groupRows, PackedStateStore, type PackedStateStoreOptions, type PackedTable, type StoredItem } from '../../runtime/packed-state.js';
import { awsError, serviceCall, type MemoryFaults } from './memory-faults.js';

// ------------------------------------------------------------------------------------------ DynamoDB item sizes
const DYNAMO_ITEM_LIMIT = 400 * 1024;

/** Approximate DynamoDB item size: attribute names plus values (binary/strings by length, numbers ~ 8 bytes). */
export function itemSize(item: unknown): number {
  if (item === null || item === undefined) return 1;
  if (item instanceof Uint8Array) return item.length;
  if (typeof item === 'string') return Buffer.byteLength(item, 'utf8');
  if (typeof item === 'number' || typeof item === 'boolean' || typeof item === 'bigint') return 8;
  if (item instanceof Set) return [...item].reduce((a: number, v) => a + itemSize(v), 3);
  if (Array.isArray(item)) return item.reduce((a: number, v) => a + itemSize(v) + 1, 3);
  if (typeof item === 'object') {
    let n = 3;
    for (const [k, v] of Object.entries(item as Record<string, unknown>)) n += Buffer.byteLength(k, 'utf8') + itemSize(v);
    return n;
  }
  return 8;
}

export function checkItemSize(what: string, item: unknown): void {
  const size = itemSize(item);
  if (size > DYNAMO_ITEM_LIMIT) throw awsError('ValidationException', `${what}: Item size has exceeded the maximum allowed size (${size} bytes)`);
}

export const bytesEqual = (a: Uint8Array, b: Uint8Array) => a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.length), Buffer.from(b.buffer, b.byteOffset, b.length)) === 0;

// ------------------------------------------------------------------------------------------ state table and store

const rowKey = (operatorId: string, keyGroup: number, key: string) => `${operatorId}#${keyGroup}\u0000${key}`;

export interface StateRowWrite {
  readonly checkpointId: number;
  readonly fence: number;
  readonly row: StateRow;
}

/** One item write of the state table, before and after (undefined: absent), for metering. */
export interface StateItemWrite {
  readonly pk: string;
  readonly before: StoredItem | undefined;
  readonly after: StoredItem | undefined;
}

const copyRow = (r: StateRow): StateRow => ({
  operatorId: r.operatorId,
  keyGroup: r.keyGroup,
  key: r.key,
  values: Object.fromEntries(Object.entries(r.values).map(([k, v]) => [k, new Uint8Array(v)])),
});

function sameValues(a: Record<string, Uint8Array>, b: Record<string, Uint8Array>): boolean {
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && bytesEqual(a[k]!, b[k]!));
}

const copyItem = (i: StoredItem): StoredItem => structuredClone(i);

/**
 * The state table as DynamoDB holds it: items by (pk, sk), PutItem conditioned on the version
 * attribute `r` (or on absence), DeleteItem, strongly consistent Query by pk and BatchGetItem; 400 KB per item. Each
 * put runs the `state.applyRow` hook first (a crash there is a crash between two item writes).
 */
export class MemoryStateTable implements PackedTable {
  readonly groups = new Map<string, Map<string, StoredItem>>();
  puts = 0;
  conditionFailures = 0;
  /** the put call that last wrote each item (pk, NUL, sk) */
  private readonly writtenBy = new Map<string, symbol>();
  /** called after every item write (metering) */
  onWrite?: (w: StateItemWrite) => void;
  /** called on every read: a Query of `pk`, or (pk undefined) one BatchGetItem of these items */
  onRead?: (pk: string | undefined, items: readonly StoredItem[]) => void;

  constructor(
    private readonly faults: MemoryFaults = {},
    private readonly afterPut?: (pk: string, before: ReadonlyMap<string, StoredItem>, written: StoredItem) => void,
  ) {}

  async query(pk: string): Promise<StoredItem[]> {
    const items = [...(this.groups.get(pk)?.values() ?? [])].map(copyItem);
    this.onRead?.(pk, items);
    return items;
  }

  async getItems(keys: ReadonlyArray<{ pk: string; sk: string }>): Promise<Array<{ pk: string; item: StoredItem }>> {
    const out: Array<{ pk: string; item: StoredItem }> = [];
    for (const k of keys) {
      const item = this.groups.get(k.pk)?.get(k.sk);
      if (item) out.push({ pk: k.pk, item: copyItem(item) });
    }
    this.onRead?.(undefined, out.map((o) => ({ ...o.item, pk: o.pk }) as StoredItem));
    return out.reverse(); // BatchGetItem promises no order
  }

  async put(pk: string, item: StoredItem, expected: number | undefined): Promise<boolean> {
    const token = Symbol('put');
    return serviceCall(this.faults, 'state.applyRow', { size: 1 }, () => {
      let g = this.groups.get(pk);
      const cur = g?.get(item.sk);
      this.puts++;
      if (expected === undefined ? cur !== undefined : cur?.r !== expected) {
        this.conditionFailures++;
        // a failed condition on this call's own earlier write (its response lost) is a success, as in the adapter
        return this.writtenBy.get(`${pk}\u0000${item.sk}`) === token;
      }
      checkItemSize(`state item ${pk}/${JSON.stringify(item.sk)}`, { pk, ...item });
      if (!g) this.groups.set(pk, (g = new Map()));
      const before = new Map(g);
      g.set(item.sk, copyItem(item));
      this.writtenBy.set(`${pk}\u0000${item.sk}`, token);
      this.onWrite?.({ pk, before: cur, after: item });
      this.afterPut?.(pk, before, item);
      return true;
    });
  }

  async delete(pk: string, sk: string, expected?: number): Promise<void> {
    const g = this.groups.get(pk);
    const cur = g?.get(sk);
    if (!cur || (expected !== undefined && cur.r !== expected)) return;
    g!.delete(sk);
    this.writtenBy.delete(`${pk}\u0000${sk}`);
    this.onWrite?.({ pk, before: cur, after: undefined });
  }
}

/**
 * Keyed state: the same packed layout and conditions as the DynamoDB store (`runtime/packed-state.ts`
 * over a `MemoryStateTable`); like it, it does not look at the fence. Besides, it keeps the history
 * of every row change as readers see it, for the tests' oracles.
 */
export class MemoryStateStore implements StateStore {
  readonly table: MemoryStateTable;
  private readonly packed: PackedStateStore;
  /** every row change readers can see, in order (a cleared row has empty values) */
  readonly history: StateRowWrite[] = [];
  /** row writes dropped because a later checkpoint had written their item */
  rejectedWrites = 0;
  /** the same row of the same checkpoint written twice with other values: must stay 0 */
  conflicts = 0;
  private readonly firstWrite = new Map<string, Record<string, Uint8Array>>();
  private fence = 0;

  constructor(
    private readonly faults: MemoryFaults = {},
    options: PackedStateStoreOptions = {},
  ) {
    this.table = new MemoryStateTable(faults, (pk, before, written) => this.record(pk, before, written.c ?? 0));
    this.packed = new PackedStateStore(this.table, options);
  }

  async getRows(ids: readonly StateRowId[]): Promise<StateRow[]> {
    return serviceCall(this.faults, 'state.getRows', { size: ids.length }, async () => (await this.packed.getRows(ids)).map((r) => ({ ...copyRow(r), checkpointId: r.checkpointId! })).reverse());
  }

  async readGroup(operatorId: string, keyGroup: number): Promise<StateRow[]> {
    return this.packed.readGroup(operatorId, keyGroup);
  }

  async applyRows(checkpointId: number, fence: number, rows: readonly StateRow[]): Promise<void> {
    await serviceCall(this.faults, 'state.applyRows', { checkpointId, size: rows.length }, async () => {
      this.fence = fence;
      const r = await this.packed.apply(checkpointId, rows);
      this.rejectedWrites += r.rejected.length;
    });
  }

  /** what an item write changed, as readers see the group */
  private record(pk: string, before: ReadonlyMap<string, StoredItem>, written: number): void {
    const old = groupRows(pk, [...before.values()]);
    const now = groupRows(pk, [...(this.table.groups.get(pk)?.values() ?? [])]);
    const cut = pk.lastIndexOf('#');
    const operatorId = pk.slice(0, cut);
    const keyGroup = Number(pk.slice(cut + 1));
    const changes: Array<[string, Record<string, Uint8Array>, number]> = [];
    for (const [key, r] of now) {
      const o = old.get(key);
      if (!o || !sameValues(o.values, r.values)) changes.push([key, r.values, r.checkpointId]);
    }
    for (const [key] of old) if (!now.has(key)) changes.push([key, {}, written]);
    for (const [key, values, checkpointId] of changes) {
      const row = copyRow({ operatorId, keyGroup, key, values });
      const tag = `${checkpointId}\u0000${rowKey(operatorId, keyGroup, key)}`;
      const first = this.firstWrite.get(tag);
      if (first && !sameValues(first, row.values)) this.conflicts++;
      if (!first) this.firstWrite.set(tag, row.values);
      this.history.push({ checkpointId, fence: this.fence, row });
    }
  }

  /** Current rows (newest values), with the checkpoint that last wrote each row's item. */
  rows(): Array<{ checkpointId: number; row: StateRow }> {
    const out: Array<{ checkpointId: number; row: StateRow }> = [];
    for (const [pk, g] of this.table.groups) {
      const cut = pk.lastIndexOf('#');
      for (const [key, r] of groupRows(pk, [...g.values()])) {
        out.push({ checkpointId: r.checkpointId, row: copyRow({ operatorId: pk.slice(0, cut), keyGroup: Number(pk.slice(cut + 1)), key, values: r.values }) });
      }
    }
    return out;
  }

  /**
   * Rows as of checkpoint n: for each row, the last change with the highest checkpoint ≤ n (rows
   * whose values are empty are cleared and left out).
   */
  asOf(n: number): StateRow[] {
    const best = new Map<string, StateRowWrite>();
    for (const w of this.history) {
      if (w.checkpointId > n) continue;
      const k = rowKey(w.row.operatorId, w.row.keyGroup, w.row.key);
      const cur = best.get(k);
      if (!cur || w.checkpointId >= cur.checkpointId) best.set(k, w);
    }
    return [...best.values()].filter((w) => Object.keys(w.row.values).length > 0).map((w) => copyRow(w.row));
  }
}
