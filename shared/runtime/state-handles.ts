/**
 * What the keyed-state cache keeps per (operator, key) — a KeyEntry, its states in slots — and the
 * state handles user functions get over an entry: one cell per (operator, key, state) with TTL on
 * read and dirty tracking on write.
 */
import type {
  AggregatingState,
  AggregatingStateDescriptor,
  ListState,
  MapState,
  ReducingState,
  ReducingStateDescriptor,
  StateDescriptor,
  ValueState,
  ValueStateDescriptor,
} from '../api/state.js';
import { keyGroupOf } from '../plan/key-groups.js';
import { UsageError } from '../util/errors.js';

/** The cache a cell belongs to: its clock for TTL, and where a write marks the key dirty. */
export interface CellOwner {
  now(): number;
  touch(operatorId: string, key: string, e: KeyEntry): void;
}

/** Marks a state that is cleared or was never set. */
export const ABSENT: unique symbol = Symbol('absent');

/**
 * What the cache keeps per (operator, key); opaque outside this module. Values sit in slots, one
 * per state the operator declared (in declaration order): the first inline, so the common
 * one-state operator reaches its value without another object. States nobody declared (a
 * serialization error at the checkpoint) go to `extra`.
 */
export class KeyEntry {
  /** slot 0's value and the processing time of its last TTL-relevant access */
  v0: unknown = ABSENT;
  t0: number | undefined = undefined;
  /** slots 1… */
  more: unknown[] | undefined = undefined;
  moreT: Array<number | undefined> | undefined = undefined;
  extra: Map<string, unknown> | undefined = undefined;
  extraT: Map<string, number> | undefined = undefined;
  /** listed in `dirty` since the last checkpoint */
  dirty = false;
  /** the serialization pass that last wrote this entry (dedupes a dirty list without a Set) */
  pass = 0;
  /** the serialization pass that found this entry in the previous pass's key order */
  placed = 0;
  /** keyGroupOf(the entry's key), once asked for */
  private ownGroup = -1;
  /** the record (KeyedStateCache.record) that last saved this entry (what it saved is on the entry: keyed-record-undo.ts) */
  saved = 0;
  /**
   * no longer the cache's entry of its key (evicted, taken out, replaced): a reference kept past
   * a batch (a timer's) must look the key up again
   */
  dropped = false;
  constructor(
    readonly keyGroup: number,
    slots: number,
    /** the key, as the cache holds it: records of the key can use this string instead of their own copy */
    readonly key: string,
  ) {
    if (slots > 1) {
      this.more = new Array<unknown>(slots - 1).fill(ABSENT);
      this.moreT = new Array<number | undefined>(slots - 1).fill(undefined);
    }
  }

  /** The key group of this entry's key (computed once; `key` must be the entry's key). */
  groupOfKey(key: string, maxParallelism: number): number {
    return this.ownGroup >= 0 ? this.ownGroup : (this.ownGroup = keyGroupOf(key, maxParallelism));
  }
}

/** Slot `i` of an entry (−1 = not declared: by name in `extra`). */
export function slotGet(e: KeyEntry, i: number, name: string): unknown {
  if (i === 0) return e.v0;
  if (i > 0) return e.more![i - 1];
  return e.extra?.has(name) ? e.extra.get(name) : ABSENT;
}
export function slotSet(e: KeyEntry, i: number, name: string, v: unknown): void {
  if (i === 0) e.v0 = v;
  else if (i > 0) e.more![i - 1] = v;
  else if (v === ABSENT) e.extra?.delete(name);
  else (e.extra ??= new Map()).set(name, v);
}
export function touchedGet(e: KeyEntry, i: number, name: string): number | undefined {
  if (i === 0) return e.t0;
  if (i > 0) return e.moreT![i - 1];
  return e.extraT?.get(name);
}
export function touchedSet(e: KeyEntry, i: number, name: string, t: number | undefined): void {
  if (i === 0) e.t0 = t;
  else if (i > 0) e.moreT![i - 1] = t;
  else if (t === undefined) e.extraT?.delete(name);
  else (e.extraT ??= new Map()).set(name, t);
}

/** What a handle reads and writes its state through. */
export interface StateCell<T> {
  get(): T | undefined;
  /** writes a value (`undefined` too) */
  set(v: T): void;
  clear(): void;
}

/**
 * One (operator, key, state) cell: TTL on read, dirty tracking on write. Handles are small objects
 * with methods on their prototypes (no closures per access: user functions get a handle per record).
 */
export class Cell<T> implements StateCell<T> {
  constructor(
    private readonly cache: CellOwner,
    private readonly e: KeyEntry,
    private readonly operatorId: string,
    private readonly key: string,
    protected readonly d: StateDescriptor<unknown>,
    private readonly slot: number,
  ) {}

  get(): T | undefined {
    return cellGet(this.cache, this.e, this.operatorId, this.key, this.d, this.slot) as T | undefined;
  }

  set(v: T): void {
    cellSet(this.cache, this.e, this.operatorId, this.key, this.d, this.slot, v);
  }

  clear(): void {
    cellSet(this.cache, this.e, this.operatorId, this.key, this.d, this.slot, ABSENT);
  }
}

export function cellGet(cache: CellOwner, e: KeyEntry, operatorId: string, key: string, d: StateDescriptor<unknown>, slot: number): unknown {
  const name = d.name;
  const v = slotGet(e, slot, name);
  if (v === ABSENT) return undefined;
  const ttl = d.ttl;
  if (ttl) {
    const t = touchedGet(e, slot, name) ?? 0;
    if (cache.now() - t >= ttl.ttlMs) {
      slotSet(e, slot, name, ABSENT);
      touchedSet(e, slot, name, undefined);
      cache.touch(operatorId, key, e);
      return undefined;
    }
    if (ttl.update === 'on-read-and-write') {
      touchedSet(e, slot, name, cache.now());
      cache.touch(operatorId, key, e);
    }
  }
  return v;
}

/** Writes a value (ABSENT clears it) and marks the key dirty. */
export function cellSet(cache: CellOwner, e: KeyEntry, operatorId: string, key: string, d: StateDescriptor<unknown>, slot: number, v: unknown): void {
  if (v !== ABSENT && d.serializer.check !== undefined) checkEncodable(operatorId, d, v);
  slotSet(e, slot, d.name, v);
  touchedSet(e, slot, d.name, v === ABSENT || !d.ttl ? undefined : cache.now());
  cache.touch(operatorId, key, e);
}

/**
 * Refuses a value the state's serializer cannot carry, before anything changes: the record that
 * writes it fails (a dead letter, its earlier effects undone) instead of the checkpoint.
 */
function checkEncodable(operatorId: string, d: StateDescriptor<unknown>, v: unknown): void {
  // map state is stored (and encoded) as an array of pairs
  const why = d.serializer.check!(d.kind === 'map' && v instanceof Map ? [...v.entries()] : v);
  if (why !== undefined) throw new UsageError(operatorId, `state "${d.name}"`, `cannot hold this value (serializer ${d.serializer.id}): ${why}`);
}

/** The most used handle is its own cell (one object per `getState`). */
export class ValueHandle<T> extends Cell<T> implements ValueState<T> {
  constructor(cache: CellOwner, e: KeyEntry, operatorId: string, key: string, d: ValueStateDescriptor<T>, slot: number) {
    super(cache, e, operatorId, key, d as StateDescriptor<unknown>, slot);
  }
  value(): T | undefined {
    return this.get() ?? (this.d as ValueStateDescriptor<T>).defaultValue;
  }
  update(v: T): void {
    this.set(v);
  }
}

export class ListHandle<T> implements ListState<T> {
  constructor(private readonly c: StateCell<T[]>) {}
  get(): T[] {
    return [...(this.c.get() ?? [])];
  }
  add(v: T): void {
    this.c.set([...(this.c.get() ?? []), v]);
  }
  addAll(vs: Iterable<T>): void {
    this.c.set([...(this.c.get() ?? []), ...vs]);
  }
  update(vs: Iterable<T>): void {
    this.c.set([...vs]);
  }
  clear(): void {
    this.c.clear();
  }
}

export class MapHandle<K extends string | number, V> implements MapState<K, V> {
  constructor(private readonly c: StateCell<Map<K, V>>) {}
  private read(): Map<K, V> {
    return this.c.get() ?? new Map<K, V>();
  }
  private write(m: Map<K, V>): void {
    if (m.size) this.c.set(m);
    else this.c.clear();
  }
  get(k: K): V | undefined {
    return this.read().get(k);
  }
  put(k: K, v: V): void {
    this.write(new Map(this.read()).set(k, v));
  }
  remove(k: K): void {
    const m = new Map(this.read());
    m.delete(k);
    this.write(m);
  }
  contains(k: K): boolean {
    return this.read().has(k);
  }
  entries(): Array<[K, V]> {
    return [...this.read().entries()];
  }
  keys(): K[] {
    return [...this.read().keys()];
  }
  values(): V[] {
    return [...this.read().values()];
  }
  isEmpty(): boolean {
    return this.read().size === 0;
  }
  clear(): void {
    this.c.clear();
  }
}

export class ReducingHandle<T> implements ReducingState<T> {
  constructor(
    private readonly c: StateCell<T>,
    private readonly d: ReducingStateDescriptor<T>,
  ) {}
  get(): T | undefined {
    return this.c.get();
  }
  add(v: T): void {
    const cur = this.c.get();
    this.c.set(cur === undefined ? v : this.d.reduce(cur, v));
  }
  clear(): void {
    this.c.clear();
  }
}

export class AggregatingHandle<I, A, O> implements AggregatingState<I, O> {
  constructor(
    private readonly c: StateCell<A>,
    private readonly d: AggregatingStateDescriptor<I, A, O>,
  ) {}
  get(): O | undefined {
    const acc = this.c.get();
    return acc === undefined ? undefined : this.d.aggregate.getResult(acc);
  }
  add(v: I): void {
    this.c.set(this.d.aggregate.add(v, this.c.get() ?? this.d.aggregate.createAccumulator()));
  }
  clear(): void {
    this.c.clear();
  }
}
