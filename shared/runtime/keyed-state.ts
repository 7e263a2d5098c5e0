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
import { keyGroupOf } from '../plan/key-groups.js';
import { fromStored, type OperatorSlots, RecordUndo, toStored, UndoableEntry } from './keyed-record-undo.js';
import { ABSENT, AggregatingHandle, Cell, cellGet, cellSet, type KeyEntry, ListHandle, MapHandle, ReducingHandle, slotGet, slotSet, touchedGet, touchedSet, ValueHandle } from './state-handles.js';
import type { StateRow, StateRowId } from './ports.js';

/** How many kept keys per dirty key a checkpoint walks before it sorts its dirty keys alone (`sortedDirty`). */
const KNOWN_PER_DIRTY = 4;

/** The key group of a key: `keyGroupOf`, under the name the engine's callers use. */
export const keyGroupOfKey = keyGroupOf;

export class KeyedStateCache {
  private readonly ops = new Map<string, Map<string, KeyEntry>>();
  /**
   * entries written since the last checkpoint, per operator (each listed once: its flag says so; a
   * key can still appear twice when a handle outlived its evicted entry, which `pass` dedupes)
   */
  private readonly dirty = new Map<string, KeyEntry[]>();
  private pass = 0;
  /**
   * each operator's entries serialized so far, in key order (dropped ones left out at the next
   * serialization): the next dirty set is mostly keys seen before, so only the keys new to it are
   * sorted (and merged in)
   */
  private readonly lastOrder = new Map<string, KeyEntry[]>();
  private readonly descriptors = new Map<string, Map<string, StateDescriptor<unknown>>>();
  private readonly slots = new Map<string, OperatorSlots>();
  /** processing time used for TTL; set by the instance */
  now: () => number = () => 0;
  // the last operator's map and the last entry looked up: a record's state calls hit them
  private lastOp: string | undefined;
  private lastOpMap: Map<string, KeyEntry> | undefined;
  private lastEntryOp: string | undefined;
  private lastEntryKey: string | undefined;
  private lastEntry: KeyEntry | undefined;
  private lastSlotOp: string | undefined;
  private lastSlotName: string | undefined;
  private lastSlot = -1;
  /** the record being applied and what it saved of the entries it touched (`beginRecord`) */
  private readonly undo = new RecordUndo();
  private lastSaveOp: string | undefined;
  private lastSaveSlots: OperatorSlots | undefined;

  /**
   * Declares an operator's state descriptors (needed to (de)serialize its rows), before its state is
   * used. `replacedWhole`: the engine's own operator writes new values, or notes what it changes in
   * place (`changedInPlace`), so an undo keeps a reference instead of the value's bytes.
   */
  register(operatorId: string, descriptors: readonly StateDescriptor<unknown>[], replacedWhole = false): void {
    const byName = new Map(descriptors.map((d) => [d.name, d]));
    this.descriptors.set(operatorId, byName);
    const list = [...byName.values()];
    // list and map handles replace their container on every write: only single values can be changed in place
    const copy = list.map((d) => !replacedWhole && (d.kind === 'value' || d.kind === 'reducing' || d.kind === 'aggregating'));
    this.slots.set(operatorId, { descriptors: list, byName: new Map(list.map((d, i) => [d.name, i])), copy });
    this.lastSaveOp = this.lastSaveSlots = undefined;
    this.lastSlotOp = this.lastSlotName = undefined;
    if (!this.ops.has(operatorId)) this.ops.set(operatorId, new Map());
  }

  /** @internal the slot of a state of an operator (−1: not declared) */
  slotOf(operatorId: string, name: string): number {
    if (name === this.lastSlotName && operatorId === this.lastSlotOp) return this.lastSlot;
    const i = this.slots.get(operatorId)?.byName.get(name) ?? -1;
    this.lastSlotOp = operatorId;
    this.lastSlotName = name;
    this.lastSlot = i;
    return i;
  }

  private newEntry(operatorId: string, keyGroup: number, key: string): UndoableEntry {
    return new UndoableEntry(keyGroup, this.slots.get(operatorId)?.descriptors.length ?? 0, key, operatorId);
  }

  has(operatorId: string, key: string): boolean {
    if (operatorId === this.lastOp) return this.lastOpMap!.has(key);
    return this.ops.get(operatorId)?.has(key) ?? false;
  }

  /** The loaded entry of (operator, key), if any: `prime` it before the record that uses it. */
  lookup(operatorId: string, key: string): KeyEntry | undefined {
    return (operatorId === this.lastOp ? this.lastOpMap! : this.ops.get(operatorId))?.get(key);
  }

  /**
   * The next state access of (operator, key) finds this entry without a lookup. `e` must be the
   * cache's entry of the key: from `lookup` in the same batch (entries are only replaced by `load`
   * of missing keys or dropped by `evictClean` and `takeDirty`, which all forget the primed entry),
   * or one kept longer that is not `dropped` (those three mark what they drop).
   */
  prime(operatorId: string, key: string, e: KeyEntry): void {
    this.lastEntryOp = operatorId;
    this.lastEntryKey = key;
    this.lastEntry = e;
  }

  /** The ids among `wanted` that are not loaded yet. */
  missing(wanted: Iterable<StateRowId>): StateRowId[] {
    const out: StateRowId[] = [];
    const seen = new Set<string>();
    for (const id of wanted) {
      if (this.has(id.operatorId, id.key)) continue;
      const tag = `${id.operatorId}\u0000${id.key}`;
      if (seen.has(tag)) continue;
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
      const e = this.newEntry(id.operatorId, id.keyGroup, id.key);
      if (row && descs) {
        for (const [name, bytes] of Object.entries(row.values)) {
          const d = descs.get(name);
          if (!d) continue;
          const i = this.slotOf(id.operatorId, name);
          if (d.ttl) {
            const [t, inner] = decodePayload<[number, Uint8Array]>(bytes);
            touchedSet(e, i, name, t);
            slotSet(e, i, name, fromStored(d, d.serializer.decode(new Uint8Array(inner))));
          } else slotSet(e, i, name, fromStored(d, d.serializer.decode(bytes)));
        }
      }
      const m = this.opMap(id.operatorId);
      const old = m.get(id.key);
      if (old !== undefined) old.dropped = true;
      m.set(id.key, e);
    }
    this.lastEntry = this.lastEntryKey = this.lastEntryOp = undefined;
  }

  private opMap(operatorId: string): Map<string, KeyEntry> {
    if (operatorId === this.lastOp) return this.lastOpMap!;
    let m = this.ops.get(operatorId);
    if (!m) this.ops.set(operatorId, (m = new Map()));
    this.lastOp = operatorId;
    this.lastOpMap = m;
    return m;
  }

  private entry(operatorId: string, key: string, keyGroup: number): KeyEntry {
    if (key === this.lastEntryKey && operatorId === this.lastEntryOp) {
      const last = this.lastEntry!;
      if (this.undo.record !== 0 && last.saved !== this.undo.record) this.save(operatorId, last);
      return last;
    }
    const e = this.findEntry(operatorId, key, keyGroup);
    if (this.undo.record !== 0 && e.saved !== this.undo.record) this.save(operatorId, e);
    return e;
  }

  private findEntry(operatorId: string, key: string, keyGroup: number): KeyEntry {
    const m = this.opMap(operatorId);
    let e = m.get(key);
    if (!e) {
      // not prefetched: only possible for a key with no state (prefetch loads every key of a batch)
      e = this.newEntry(operatorId, keyGroup, key);
      m.set(key, e);
    }
    this.lastEntryOp = operatorId;
    this.lastEntryKey = key;
    this.lastEntry = e;
    return e;
  }

  /** Starts a record: entries it touches are saved at their first access. */
  beginRecord(): void {
    this.undo.begin();
  }

  /** The record was applied whole: forget what it saved. */
  commitRecord(): void {
    this.undo.commit();
  }

  /**
   * An engine operator sets `a[i]` of a value it keeps (a window's accumulator in the key's list)
   * in place instead of writing a new value: an undone record puts `old` back. Call it before or
   * after the change, with the value it replaces; the state's `write` still follows (the key is dirty).
   */
  changedInPlace(a: unknown[], i: number, old: unknown): void {
    this.undo.changedInPlace(a, i, old);
  }

  /** The record failed: every entry it touched gets back its values, TTL times and dirty flag. */
  rollbackRecord(): void {
    this.undo.rollback(this.dirty);
  }

  // every entry is made by newEntry: an UndoableEntry
  private save(operatorId: string, e: KeyEntry): void {
    let slots = this.lastSaveSlots;
    if (operatorId !== this.lastSaveOp) {
      slots = this.lastSaveSlots = this.slots.get(operatorId);
      this.lastSaveOp = operatorId;
    }
    this.undo.save(e as UndoableEntry, slots);
  }

  private markDirty(operatorId: string, _key: string, e: KeyEntry): void {
    if (e.dirty) return;
    let d = this.dirty.get(operatorId);
    if (!d) this.dirty.set(operatorId, (d = []));
    d.push(e);
    e.dirty = true;
  }

  /**
   * The dirty entries of an operator, each once, in list order: the key's current entry decides (a
   * handle kept past its entry's eviction wrote to an entry the cache no longer holds). Marks them
   * with the pass it returns. An entry still in the cache is its key's current one: only dropped
   * entries are looked up.
   */
  private dirtyEntries(operatorId: string, list: readonly KeyEntry[]): KeyEntry[] {
    const m = this.ops.get(operatorId);
    const pass = ++this.pass;
    const out: KeyEntry[] = [];
    if (!m) return out;
    for (let i = 0; i < list.length; i++) {
      const x = list[i]!;
      const e = x.dropped ? m.get(x.key) : x;
      if (!e || e.pass === pass) continue;
      e.pass = pass;
      out.push(e);
    }
    return out;
  }

  /**
   * The dirty entries of an operator in key order (`compareRows`' order). The dirty entries of the
   * kept order (every entry serialized before) are picked out in that order; only the others, new
   * keys, are sorted and merged in, into both. A key dirty at one checkpoint and not the next keeps
   * its place: once an operator's keys have all been written, a checkpoint neither sorts nor merges.
   * The walk covers the whole kept order, so when that holds more than `KNOWN_PER_DIRTY` times the
   * dirty keys (a large state written sparsely) the dirty ones are sorted alone and the kept order
   * starts again from them: a checkpoint's cost stays bounded by its dirty keys, not the state's.
   */
  private sortedDirty(operatorId: string, list: readonly KeyEntry[]): KeyEntry[] {
    const dirty = this.dirtyEntries(operatorId, list);
    const pass = this.pass;
    const known = this.lastOrder.get(operatorId);
    if (known === undefined || known.length > KNOWN_PER_DIRTY * dirty.length) {
      dirty.sort(compareEntries);
      this.lastOrder.set(operatorId, dirty.slice());
      return dirty;
    }
    // a subsequence of a sorted list is sorted; the entries it holds are current (marked by this pass)
    const kept: KeyEntry[] = [];
    let dropped = 0;
    for (let i = 0; i < known.length; i++) {
      const e = known[i]!;
      if (e.dropped) dropped++;
      else if (e.pass === pass && e.placed !== pass) {
        e.placed = pass;
        kept.push(e);
      }
    }
    const live = dropped ? known.filter((e) => !e.dropped) : known;
    if (kept.length === dirty.length) {
      if (dropped) this.lastOrder.set(operatorId, live);
      return kept;
    }
    const added: KeyEntry[] = [];
    for (let i = 0; i < dirty.length; i++) if (dirty[i]!.placed !== pass) added.push(dirty[i]!);
    added.sort(compareEntries);
    this.lastOrder.set(operatorId, mergeByKey(live, added));
    return kept.length ? mergeByKey(kept, added) : added;
  }

  /** Raw access used by every handle: applies TTL on read and records writes. */
  private cell<T>(operatorId: string, key: string, keyGroup: number, d: StateDescriptor<unknown>): Cell<T> {
    return new Cell<T>(this, this.entry(operatorId, key, keyGroup), operatorId, key, d, this.slotOf(operatorId, d.name));
  }

  /** @internal used by Cell */
  touch(operatorId: string, key: string, e: KeyEntry): void {
    this.markDirty(operatorId, key, e);
  }

  /**
   * A state's value without a handle, for the engine's own operators (windows, reduce): TTL applies
   * as through a handle; `undefined` when absent (no default value).
   */
  read(operatorId: string, key: string, keyGroup: number, d: StateDescriptor<unknown>): unknown {
    return cellGet(this, this.entry(operatorId, key, keyGroup), operatorId, key, d, this.slotOf(operatorId, d.name));
  }

  /**
   * The entry the state calls of (operator, key) use now, for a timer to keep (`Timer.state`): its
   * firing `prime`s it while it is not `dropped`. Saved for an undo, as a read would.
   */
  current(operatorId: string, key: string, keyGroup: number): KeyEntry {
    return this.entry(operatorId, key, keyGroup);
  }

  /** Sets a value state as its handle's `update` does (`undefined` is a value, not a clear). */
  update(operatorId: string, key: string, keyGroup: number, d: StateDescriptor<unknown>, v: unknown): void {
    cellSet(this, this.entry(operatorId, key, keyGroup), operatorId, key, d, this.slotOf(operatorId, d.name), v);
  }

  /** Writes a state's value without a handle (`undefined` clears it). */
  write(operatorId: string, key: string, keyGroup: number, d: StateDescriptor<unknown>, v: unknown): void {
    cellSet(this, this.entry(operatorId, key, keyGroup), operatorId, key, d, this.slotOf(operatorId, d.name), v === undefined ? ABSENT : v);
  }

  valueState<T>(operatorId: string, key: string, keyGroup: number, d: ValueStateDescriptor<T>): ValueState<T> {
    return new ValueHandle<T>(this, this.entry(operatorId, key, keyGroup), operatorId, key, d, this.slotOf(operatorId, d.name));
  }

  listState<T>(operatorId: string, key: string, keyGroup: number, d: ListStateDescriptor<T>): ListState<T> {
    return new ListHandle<T>(this.cell<T[]>(operatorId, key, keyGroup, d as StateDescriptor<unknown>));
  }

  mapState<K extends string | number, V>(operatorId: string, key: string, keyGroup: number, d: MapStateDescriptor<K, V>): MapState<K, V> {
    return new MapHandle<K, V>(this.cell<Map<K, V>>(operatorId, key, keyGroup, d as StateDescriptor<unknown>));
  }

  reducingState<T>(operatorId: string, key: string, keyGroup: number, d: ReducingStateDescriptor<T>): ReducingState<T> {
    return new ReducingHandle<T>(this.cell<T>(operatorId, key, keyGroup, d as StateDescriptor<unknown>), d);
  }

  aggregatingState<I, A, O>(operatorId: string, key: string, keyGroup: number, d: AggregatingStateDescriptor<I, A, O>): AggregatingState<I, O> {
    return new AggregatingHandle<I, A, O>(this.cell<A>(operatorId, key, keyGroup, d as StateDescriptor<unknown>), d);
  }

  get dirtyCount(): number {
    let n = 0;
    for (const [operatorId, list] of this.dirty) n += this.dirtyEntries(operatorId, list).length;
    return n;
  }

  /** An upper bound of dirtyCount that costs nothing (a key can be listed twice). */
  get dirtyBound(): number {
    let n = 0;
    for (const keys of this.dirty.values()) n += keys.length;
    return n;
  }

  /** Serializes the dirty keys into rows (an empty `values` clears the row), in `compareRows` order. */
  dirtyRows(): StateRow[] {
    const rows: StateRow[] = [];
    const ops = [...this.dirty.keys()].sort();
    // operator, then key: compareRows' order, with the default sort (UTF-16 code units, as `<`) on plain strings
    for (const operatorId of ops) this.rowsOf(operatorId, this.sortedDirty(operatorId, this.dirty.get(operatorId)!), rows);
    return rows;
  }

  /**
   * Serializes up to `n` dirty keys, oldest first, and forgets them: a caller short of memory moves
   * them elsewhere until the next snapshot (and loads them back with adoptDirty when they are used).
   */
  takeDirty(n: number): StateRow[] {
    const rows: StateRow[] = [];
    // memory is short: the entries taken out must not stay held by the last order
    this.lastOrder.clear();
    for (const [operatorId, list] of this.dirty) {
      if (rows.length >= n) break;
      const entries = this.dirtyEntries(operatorId, list).slice(0, n - rows.length);
      this.rowsOf(operatorId, entries, rows);
      const m = this.ops.get(operatorId)!;
      const taken = new Set<string>();
      for (const e of entries) {
        taken.add(e.key);
        m.delete(e.key);
        e.dropped = true;
      }
      const rest = list.filter((e) => !taken.has(e.key));
      if (rest.length) this.dirty.set(operatorId, rest);
      else this.dirty.delete(operatorId);
    }
    this.lastEntry = this.lastEntryKey = this.lastEntryOp = undefined;
    return rows.sort(compareRows);
  }

  private rowsOf(operatorId: string, entries: readonly KeyEntry[], rows: StateRow[]): void {
    const descs = this.descriptors.get(operatorId);
    const slots = this.slots.get(operatorId)?.descriptors ?? [];
    const encode = (values: Record<string, Uint8Array>, d: StateDescriptor<unknown>, v: unknown, t: number | undefined) => {
      const bytes = d.serializer.encode(toStored(d, v));
      values[d.name] = d.ttl ? encodePayload([t ?? 0, bytes]) : bytes;
    };
    for (let k = 0; k < entries.length; k++) {
      const e = entries[k]!;
      const key = e.key;
      const values: Record<string, Uint8Array> = {};
      for (let i = 0; i < slots.length; i++) {
        const v = slotGet(e, i, slots[i]!.name);
        if (v !== ABSENT) encode(values, slots[i]!, v, touchedGet(e, i, slots[i]!.name));
      }
      if (e.extra) {
        for (const [name, v] of e.extra) {
          const d = descs?.get(name);
          if (!d) throw new Error(`state "${name}" of ${operatorId} has no descriptor`);
          encode(values, d, v, e.extraT?.get(name));
        }
      }
      rows.push({ operatorId, keyGroup: e.keyGroup, key, values });
    }
  }

  markClean(): void {
    for (const list of this.dirty.values()) for (const e of list) e.dirty = false;
    this.dirty.clear();
  }

  /**
   * Takes over rows that are not durable yet (a parent shard's instance hands the keys of a child's
   * key groups to the child): they stay dirty until the child's next snapshot writes them.
   */
  adoptDirty(rows: readonly StateRow[]): void {
    this.load(rows, rows);
    for (const r of rows) this.markDirty(r.operatorId, r.key, this.opMap(r.operatorId).get(r.key)!);
  }

  /** @internal entries the last order holds for the next checkpoint's sort */
  get orderedEntries(): number {
    let n = 0;
    for (const list of this.lastOrder.values()) n += list.length;
    return n;
  }

  /** Number of cached keys, for eviction decisions and metrics. */
  get size(): number {
    let n = 0;
    for (const m of this.ops.values()) n += m.size;
    return n;
  }

  /** Drops clean entries until at most `limit` remain (dirty ones stay: they are not durable yet). */
  evictClean(limit: number): number {
    this.lastEntry = this.lastEntryKey = this.lastEntryOp = undefined;
    let evicted = 0;
    const size = this.size;
    // the last order holds entries (and their values): kept, it would keep what eviction frees
    if (size > limit) this.lastOrder.clear();
    for (const [op, m] of this.ops) {
      const list = this.dirty.get(op);
      const d = list ? new Set(list.map((e) => e.key)) : undefined;
      for (const [key, e] of m) {
        if (size - evicted <= limit) return evicted;
        if (d?.has(key)) continue;
        m.delete(key);
        e.dropped = true;
        evicted++;
      }
    }
    return evicted;
  }
}

/** Entries of one operator by key, compared as `<` does (UTF-16 code units): `compareRows`' order. */
const compareEntries = (a: KeyEntry, b: KeyEntry): number => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

/** Two lists of entries in key order (no key in both) as one. */
function mergeByKey(a: readonly KeyEntry[], b: readonly KeyEntry[]): KeyEntry[] {
  const out: KeyEntry[] = new Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = a[i]!.key < b[j]!.key ? a[i++]! : b[j++]!;
  while (i < a.length) out[k++] = a[i++]!;
  while (j < b.length) out[k++] = b[j++]!;
  return out;
}

/** A stable order of rows: deltas of the same checkpoint are byte-identical whoever makes them. */
export function compareRows(a: StateRow, b: StateRow): number {
  // equal strings first: a key's rows from successive snapshots share its string (=== at once)
  return a.operatorId === b.operatorId ? (a.key === b.key ? 0 : a.key < b.key ? -1 : 1) : a.operatorId < b.operatorId ? -1 : 1;
}
