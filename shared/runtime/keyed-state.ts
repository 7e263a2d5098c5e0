/**
 * The keyed-state cache of one instance: deserialized values per (operator, key), with a dirty
 * set. Rows are loaded from the state store before a batch runs (prefetch), so user functions can
 * read and write state synchronously; at a checkpoint only the dirty keys are written, which makes
 * every checkpoint incremental.
 *
 * State with a TTL keeps the processing time of its last write (or read) beside the value; an
 * expired value reads as absent and is cleared when its key is touched — no scan over all keys.
 */
import { decodePayload, encodePayload } from '../codec/payload.js';
import type {
  AggregatingState,
  AggregatingStateDescriptor,
  ListState,
  ListStateDescriptor,
  MapState,
  MapStateDescriptor,
  ReducingState,
  ReducingStateDescriptor,
  StateDescriptor,
  ValueState,
  ValueStateDescriptor,
} from '../api/state.js';
import type { StateRow, StateRowId } from './ports.js';

interface KeyEntry {
  readonly keyGroup: number;
  /** state name → value; a missing name means cleared/never set */
  readonly values: Map<string, unknown>;
  /** state name → processing time of the last TTL-relevant access */
  readonly touched: Map<string, number>;
}

export class KeyedStateCache {
  private readonly ops = new Map<string, Map<string, KeyEntry>>();
  private readonly dirty = new Map<string, Set<string>>();
  private readonly descriptors = new Map<string, Map<string, StateDescriptor<unknown>>>();
  /** processing time used for TTL; set by the instance */
  now: () => number = () => 0;

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
      const touched = new Map<string, number>();
      if (row && descs) {
        for (const [name, bytes] of Object.entries(row.values)) {
          const d = descs.get(name);
          if (!d) continue;
          if (d.ttl) {
            const [t, inner] = decodePayload<[number, Uint8Array]>(bytes);
            touched.set(name, t);
            values.set(name, fromStored(d, d.serializer.decode(new Uint8Array(inner))));
          } else values.set(name, fromStored(d, d.serializer.decode(bytes)));
        }
      }
      this.opMap(id.operatorId).set(id.key, { keyGroup: id.keyGroup, values, touched });
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
      e = { keyGroup, values: new Map(), touched: new Map() };
      m.set(key, e);
    }
    return e;
  }

  private markDirty(operatorId: string, key: string): void {
    let d = this.dirty.get(operatorId);
    if (!d) this.dirty.set(operatorId, (d = new Set()));
    d.add(key);
  }

  /** Raw access used by every handle: applies TTL on read and records writes. */
  private cell<T>(operatorId: string, key: string, keyGroup: number, d: StateDescriptor<unknown>) {
    const e = this.entry(operatorId, key, keyGroup);
    const ttl = d.ttl;
    return {
      get: (): T | undefined => {
        if (!e.values.has(d.name)) return undefined;
        if (ttl) {
          const t = e.touched.get(d.name) ?? 0;
          if (this.now() - t >= ttl.ttlMs) {
            e.values.delete(d.name);
            e.touched.delete(d.name);
            this.markDirty(operatorId, key);
            return undefined;
          }
          if (ttl.update === 'on-read-and-write') {
            e.touched.set(d.name, this.now());
            this.markDirty(operatorId, key);
          }
        }
        return e.values.get(d.name) as T;
      },
      set: (v: T): void => {
        e.values.set(d.name, v);
        if (ttl) e.touched.set(d.name, this.now());
        this.markDirty(operatorId, key);
      },
      clear: (): void => {
        e.values.delete(d.name);
        e.touched.delete(d.name);
        this.markDirty(operatorId, key);
      },
    };
  }

  valueState<T>(operatorId: string, key: string, keyGroup: number, d: ValueStateDescriptor<T>): ValueState<T> {
    const c = this.cell<T>(operatorId, key, keyGroup, d as StateDescriptor<unknown>);
    return { value: () => c.get() ?? d.defaultValue, update: (v) => c.set(v), clear: c.clear };
  }

  listState<T>(operatorId: string, key: string, keyGroup: number, d: ListStateDescriptor<T>): ListState<T> {
    const c = this.cell<T[]>(operatorId, key, keyGroup, d as StateDescriptor<unknown>);
    return {
      get: () => [...(c.get() ?? [])],
      add: (v) => c.set([...(c.get() ?? []), v]),
      addAll: (vs) => c.set([...(c.get() ?? []), ...vs]),
      update: (vs) => c.set([...vs]),
      clear: c.clear,
    };
  }

  mapState<K extends string | number, V>(operatorId: string, key: string, keyGroup: number, d: MapStateDescriptor<K, V>): MapState<K, V> {
    const c = this.cell<Map<K, V>>(operatorId, key, keyGroup, d as StateDescriptor<unknown>);
    const read = () => c.get() ?? new Map<K, V>();
    const write = (m: Map<K, V>) => (m.size ? c.set(m) : c.clear());
    return {
      get: (k) => read().get(k),
      put: (k, v) => write(new Map(read()).set(k, v)),
      remove: (k) => {
        const m = new Map(read());
        m.delete(k);
        write(m);
      },
      contains: (k) => read().has(k),
      entries: () => [...read().entries()],
      keys: () => [...read().keys()],
      values: () => [...read().values()],
      isEmpty: () => read().size === 0,
      clear: c.clear,
    };
  }

  reducingState<T>(operatorId: string, key: string, keyGroup: number, d: ReducingStateDescriptor<T>): ReducingState<T> {
    const c = this.cell<T>(operatorId, key, keyGroup, d as StateDescriptor<unknown>);
    return {
      get: () => c.get(),
      add: (v) => {
        const cur = c.get();
        c.set(cur === undefined ? v : d.reduce(cur, v));
      },
      clear: c.clear,
    };
  }

  aggregatingState<I, A, O>(operatorId: string, key: string, keyGroup: number, d: AggregatingStateDescriptor<I, A, O>): AggregatingState<I, O> {
    const c = this.cell<A>(operatorId, key, keyGroup, d as StateDescriptor<unknown>);
    return {
      get: () => {
        const acc = c.get();
        return acc === undefined ? undefined : d.aggregate.getResult(acc);
      },
      add: (v) => c.set(d.aggregate.add(v, c.get() ?? d.aggregate.createAccumulator())),
      clear: c.clear,
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
          const bytes = d.serializer.encode(toStored(d, v));
          values[name] = d.ttl ? encodePayload([e.touched.get(name) ?? 0, bytes]) : bytes;
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

/** Map state lives as a Map in memory and as an array of pairs in storage. */
function toStored(d: StateDescriptor<unknown>, v: unknown): unknown {
  return d.kind === 'map' ? [...(v as Map<unknown, unknown>).entries()] : v;
}
function fromStored(d: StateDescriptor<unknown>, v: unknown): unknown {
  return d.kind === 'map' ? new Map(v as Array<[unknown, unknown]>) : v;
}
