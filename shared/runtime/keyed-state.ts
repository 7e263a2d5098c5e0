/**
 * The keyed-state cache of one instance: deserialized values per (operator, key), with a dirty
 * set. Rows are loaded from the state store before a batch runs (prefetch), so user functions can
 * read and write state synchronously; at a checkpoint only the dirty keys are written, which makes
 * every checkpoint incremental.
 */
import type { StateDescriptor, ValueStateDescriptor } from '../api/state.js';
import type { ValueState } from '../api/types.js';
import type { StateRow, StateRowId } from './ports.js';

interface KeyEntry {
  readonly keyGroup: number;
  /** state name → value; a missing name means cleared/never set */
  readonly values: Map<string, unknown>;
}

export class KeyedStateCache {
  private readonly ops = new Map<string, Map<string, KeyEntry>>();
  private readonly dirty = new Map<string, Set<string>>();
  private readonly descriptors = new Map<string, Map<string, StateDescriptor<unknown>>>();

  /** Declares an operator's state descriptors (needed to (de)serialize its rows). */
  register(operatorId: string, descriptors: readonly StateDescriptor<unknown>[]): void {
    this.descriptors.set(operatorId, new Map(descriptors.map((d) => [d.name, d])));
    if (!this.ops.has(operatorId)) this.ops.set(operatorId, new Map());
  }

  has(operatorId: string, key: string): boolean {
    return this.ops.get(operatorId)?.has(key) ?? false;
  }

  /** The ids among `wanted` that are not loaded yet. */
  missing(wanted: Iterable<StateRowId>): StateRowId[] {
    const out: StateRowId[] = [];
    const seen = new Set<string>();
    for (const id of wanted) {
      const tag = `${id.operatorId}\u0000${id.key}`;
      if (seen.has(tag) || this.has(id.operatorId, id.key)) continue;
      seen.add(tag);
      out.push(id);
    }
    return out;
  }

  /** Loads rows read from the store; ids that had no row become empty entries. */
  load(ids: readonly StateRowId[], rows: readonly StateRow[]): void {
    const byId = new Map(rows.map((r) => [`${r.operatorId}\u0000${r.key}`, r]));
    for (const id of ids) {
      const row = byId.get(`${id.operatorId}\u0000${id.key}`);
      const descs = this.descriptors.get(id.operatorId);
      const values = new Map<string, unknown>();
      if (row && descs) {
        for (const [name, bytes] of Object.entries(row.values)) {
          const d = descs.get(name);
          if (d) values.set(name, d.serializer.decode(bytes));
        }
      }
      this.opMap(id.operatorId).set(id.key, { keyGroup: id.keyGroup, values });
    }
  }

  private opMap(operatorId: string): Map<string, KeyEntry> {
    let m = this.ops.get(operatorId);
    if (!m) this.ops.set(operatorId, (m = new Map()));
    return m;
  }

  private entry(operatorId: string, key: string, keyGroup: number): KeyEntry {
    const m = this.opMap(operatorId);
    let e = m.get(key);
    if (!e) {
      // not prefetched: only possible for a key with no state (prefetch loads every key of a batch)
      e = { keyGroup, values: new Map() };
      m.set(key, e);
    }
    return e;
  }

  private markDirty(operatorId: string, key: string): void {
    let d = this.dirty.get(operatorId);
    if (!d) this.dirty.set(operatorId, (d = new Set()));
    d.add(key);
  }

  /** A ValueState handle bound to one operator and key. */
  valueState<T>(operatorId: string, key: string, keyGroup: number, d: ValueStateDescriptor<T>): ValueState<T> {
    const e = this.entry(operatorId, key, keyGroup);
    return {
      value: () => (e.values.has(d.name) ? (e.values.get(d.name) as T) : d.defaultValue),
      update: (v: T) => {
        e.values.set(d.name, v);
        this.markDirty(operatorId, key);
      },
      clear: () => {
        e.values.delete(d.name);
        this.markDirty(operatorId, key);
      },
    };
  }

  get dirtyCount(): number {
    let n = 0;
    for (const s of this.dirty.values()) n += s.size;
    return n;
  }

  /** Serializes the dirty keys into rows (an empty `values` clears the row). */
  dirtyRows(): StateRow[] {
    const rows: StateRow[] = [];
    for (const [operatorId, keys] of this.dirty) {
      const descs = this.descriptors.get(operatorId);
      const m = this.ops.get(operatorId)!;
      for (const key of keys) {
        const e = m.get(key)!;
        const values: Record<string, Uint8Array> = {};
        for (const [name, v] of e.values) {
          const d = descs?.get(name);
          if (!d) throw new Error(`state "${name}" of ${operatorId} has no descriptor`);
          values[name] = d.serializer.encode(v);
        }
        rows.push({ operatorId, keyGroup: e.keyGroup, key, values });
      }
    }
    // a stable order: deltas of the same checkpoint are byte-identical whoever makes them
    rows.sort((a, b) => (a.operatorId < b.operatorId ? -1 : a.operatorId > b.operatorId ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return rows;
  }

  markClean(): void {
    this.dirty.clear();
  }

  /** Number of cached keys, for eviction decisions and metrics. */
  get size(): number {
    let n = 0;
    for (const m of this.ops.values()) n += m.size;
    return n;
  }

  /** Drops clean entries until at most `limit` remain (dirty ones stay: they are not durable yet). */
  evictClean(limit: number): number {
    let evicted = 0;
    const size = this.size;
    for (const [op, m] of this.ops) {
      const d = this.dirty.get(op);
      for (const key of m.keys()) {
        if (size - evicted <= limit) return evicted;
        if (d?.has(key)) continue;
        m.delete(key);
        evicted++;
      }
    }
    return evicted;
  }
}
