/**
 * Broadcast state: operator state of which every instance keeps an identical copy, because every
 * instance applies the same broadcast records in the same order (the broadcast channel carries them
 * to every shard). It is small by nature (rules, configuration) and travels whole in each snapshot.
 */
import { packedValueProblem } from '../util/encodable-values.js';
import type { MapState, MapStateDescriptor } from '../api/state.js';
import type { ReadOnlyBroadcastState } from '../api/types.js';
import { UsageError } from '../util/errors.js';
import { UndoLog } from './undo-log.js';

type Entries = Array<[string | number, unknown]>;

export class BroadcastStateStore {
  private readonly ops = new Map<string, Map<string, Map<string | number, unknown>>>();
  /** while a record is applied: each map it changed, with its entries before the first change */
  private readonly undo = new UndoLog<Map<string | number, unknown>, Entries>(
    (m) => [...m.entries()],
    (m, entries) => {
      m.clear();
      for (const [k, v] of entries) m.set(k, v);
    },
  );

  /** Starts a record: maps it changes keep their entries from before. */
  beginRecord(): void {
    this.undo.begin();
  }

  commitRecord(): void {
    this.undo.commit();
  }

  /** The record failed: the maps it changed get their entries back. */
  rollbackRecord(): void {
    this.undo.rollback();
  }

  private change<K, V>(m: Map<K, V>): Map<K, V> {
    this.undo.touch(m as unknown as Map<string | number, unknown>);
    return m;
  }

  private map(operatorId: string, name: string): Map<string | number, unknown> {
    let op = this.ops.get(operatorId);
    if (!op) this.ops.set(operatorId, (op = new Map()));
    let m = op.get(name);
    if (!m) op.set(name, (m = new Map()));
    return m;
  }

  writable<K extends string | number, V>(operatorId: string, d: MapStateDescriptor<K, V>): MapState<K, V> {
    const m = this.map(operatorId, d.name) as Map<K, V>;
    return {
      get: (k) => m.get(k),
      put: (k, v) => {
        // a value the snapshot cannot carry back fails the record that puts it, not every checkpoint
        const why = packedValueProblem(v);
        if (why !== undefined) throw new UsageError(operatorId, `broadcast state "${d.name}"`, `cannot hold the value of key ${JSON.stringify(k)}: ${why}`);
        this.change(m).set(k, v);
      },
      remove: (k) => void this.change(m).delete(k),
      contains: (k) => m.has(k),
      entries: () => [...m.entries()],
      keys: () => [...m.keys()],
      values: () => [...m.values()],
      isEmpty: () => m.size === 0,
      clear: () => this.change(m).clear(),
    };
  }

  readOnly<K extends string | number, V>(operatorId: string, d: MapStateDescriptor<K, V>): ReadOnlyBroadcastState<K, V> {
    const m = this.map(operatorId, d.name) as Map<K, V>;
    return { get: (k) => m.get(k), contains: (k) => m.has(k), entries: () => [...m.entries()] };
  }

  toJSON(): Array<[string, string, Entries]> {
    const out: Array<[string, string, Entries]> = [];
    for (const [op, states] of this.ops) for (const [name, m] of states) out.push([op, name, [...m.entries()]]);
    return out;
  }

  load(rows: ReadonlyArray<[string, string, Entries]>): void {
    for (const [op, name, entries] of rows) {
      const m = this.map(op, name);
      m.clear();
      for (const [k, v] of entries) m.set(k, v);
    }
  }
}
