/**
 * State descriptors: a name, a kind and a serializer (of the whole value: a list, a map...). User
 * code declares descriptors; the runtime's state backend interprets them and hands out handles. The
 * user API never sees a backend.
 */
import type { PlanStateDecl } from '../plan/plan.js';
import { jsonSerializer, type Serializer } from './serializers.js';
import { UsageError } from '../util/errors.js';
import { isWellFormed } from '../util/well-formed.js';

/** Time-to-live of state values, measured in processing time (the coordinator's ticks). */
export interface StateTtl {
  readonly ttlMs: number;
  /** which accesses restart the clock; @default 'on-create-and-write' */
  readonly update?: 'on-create-and-write' | 'on-read-and-write';
}

export interface StateDescriptor<T> {
  readonly name: string;
  readonly kind: PlanStateDecl['kind'];
  readonly serializer: Serializer<T>;
  readonly ttl?: StateTtl;
}

export interface ValueStateDescriptor<T> extends StateDescriptor<T> {
  readonly kind: 'value';
  /** returned by `value()` when the key has no value yet */
  readonly defaultValue?: T;
}
export interface ListStateDescriptor<T> extends StateDescriptor<T[]> {
  readonly kind: 'list';
}
export interface MapStateDescriptor<K extends string | number, V> extends StateDescriptor<Array<[K, V]>> {
  readonly kind: 'map';
}
export interface ReducingStateDescriptor<T> extends StateDescriptor<T> {
  readonly kind: 'reducing';
  readonly reduce: (a: T, b: T) => T;
}
export interface AggregateFunction<I, A, O> {
  createAccumulator(): A;
  add(value: I, accumulator: A): A;
  getResult(accumulator: A): O;
  /**
   * The accumulator of both inputs together. Like `add`, it may change an accumulator it is given and
   * return it: a window gives its functions copies of the accumulators it keeps. Needed by session
   * windows, which merge; a sliding window whose size is a whole number of slides uses it too, to
   * keep one accumulator per slide (pane) and merge a window's panes when it fires (without it, each
   * record is added to every window it belongs to).
   */
  merge?(a: A, b: A): A;
}
export interface AggregatingStateDescriptor<I, A, O> extends StateDescriptor<A> {
  readonly kind: 'aggregating';
  readonly aggregate: AggregateFunction<I, A, O>;
}

export interface ValueState<T> {
  value(): T | undefined;
  update(value: T): void;
  clear(): void;
}
export interface ListState<T> {
  get(): readonly T[];
  add(value: T): void;
  addAll(values: Iterable<T>): void;
  update(values: Iterable<T>): void;
  clear(): void;
}
export interface MapState<K extends string | number, V> {
  get(key: K): V | undefined;
  put(key: K, value: V): void;
  remove(key: K): void;
  contains(key: K): boolean;
  entries(): Array<[K, V]>;
  keys(): K[];
  values(): V[];
  isEmpty(): boolean;
  clear(): void;
}
export interface ReducingState<T> {
  get(): T | undefined;
  add(value: T): void;
  clear(): void;
}
export interface AggregatingState<I, O> {
  get(): O | undefined;
  add(value: I): void;
  clear(): void;
}

interface CommonOptions<T> {
  serializer?: Serializer<T>;
  ttl?: StateTtl;
}

const common = <T>(o: CommonOptions<T>) => ({
  serializer: o.serializer ?? jsonSerializer<T>(),
  ...(o.ttl ? { ttl: o.ttl } : {}),
});

export function valueState<T>(name: string, options: CommonOptions<T> & { defaultValue?: T } = {}): ValueStateDescriptor<T> {
  return { name, kind: 'value', ...common(options), ...(options.defaultValue !== undefined ? { defaultValue: options.defaultValue } : {}) };
}
export function listState<T>(name: string, options: CommonOptions<T[]> = {}): ListStateDescriptor<T> {
  return { name, kind: 'list', ...common(options) };
}
export function mapState<K extends string | number, V>(name: string, options: CommonOptions<Array<[K, V]>> = {}): MapStateDescriptor<K, V> {
  return { name, kind: 'map', ...common(options) };
}
export function reducingState<T>(name: string, reduce: (a: T, b: T) => T, options: CommonOptions<T> = {}): ReducingStateDescriptor<T> {
  return { name, kind: 'reducing', reduce, ...common(options) };
}
/** Non-keyed list state of an operator instance; split evenly over the instances after a rescale. */
export interface OperatorListStateDescriptor<T> {
  readonly name: string;
  readonly kind: 'operator-list';
  readonly mode: 'split' | 'union';
  /** phantom field that carries T */
  readonly __type?: T;
}
export function operatorListState<T>(name: string): OperatorListStateDescriptor<T> {
  return { name, kind: 'operator-list', mode: 'split' };
}
/** Non-keyed list state of which every instance gets the union of all instances' items after a rescale. */
export function unionListState<T>(name: string): OperatorListStateDescriptor<T> {
  return { name, kind: 'operator-list', mode: 'union' };
}

export function aggregatingState<I, A, O>(
  name: string,
  aggregate: AggregateFunction<I, A, O>,
  options: CommonOptions<A> = {},
): AggregatingStateDescriptor<I, A, O> {
  return { name, kind: 'aggregating', aggregate, ...common(options) };
}

const KINDS: ReadonlySet<string> = new Set(['value', 'list', 'map', 'reducing', 'aggregating', 'operator-list']);

/**
 * Why a state name cannot be used, or undefined. A name is a field of every state row of its
 * operator: it must be a string that survives UTF-8 (no half of a surrogate pair), without control
 * characters (U+0000 starts the engine's own fields), not `__proto__` (a row's fields are an object),
 * and short (it is stored with every key).
 */
export function stateNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string') return `must be a string, got ${typeof name}`;
  if (name.length === 0) return 'must not be empty';
  if (name.length > 255) return `must be at most 255 characters, got ${name.length}`;
  if (name === '__proto__') return 'must not be "__proto__"';
  if (!isWellFormed(name)) return 'must not hold half of a surrogate pair: UTF-8 cannot carry it';
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return `must not hold control characters (U+${c.toString(16).padStart(4, '0')} at ${i})`;
  }
  return undefined;
}

/**
 * Refuses an operator's state declarations that would fail later (at a checkpoint, on restore):
 * a UsageError naming the operator and the field (`state[i].name`, `.kind`, `.serializer`).
 */
export function checkStateDeclarations(operator: string, state: ReadonlyArray<{ readonly name: string; readonly kind: string; readonly serializer?: unknown }>): void {
  const seen = new Map<string, number>();
  state.forEach((d, i) => {
    if (typeof d !== 'object' || d === null) throw new UsageError(operator, `state[${i}]`, `must be a state descriptor, got ${d === null ? 'null' : typeof d}`);
    const problem = stateNameProblem(d.name);
    if (problem) throw new UsageError(operator, `state[${i}].name`, `${problem} (got ${JSON.stringify(d.name)})`);
    const first = seen.get(d.name);
    if (first !== undefined) throw new UsageError(operator, `state[${i}].name`, `"${d.name}" is declared twice (also state[${first}])`);
    seen.set(d.name, i);
    if (!KINDS.has(d.kind)) throw new UsageError(operator, `state[${i}].kind`, `must be one of ${[...KINDS].join(', ')}, got ${String(d.kind)}`);
    if (d.kind === 'operator-list') return;
    const s = d.serializer as Partial<Serializer<unknown>> | null | undefined;
    if (typeof s !== 'object' || s === null || typeof s.encode !== 'function' || typeof s.decode !== 'function' || typeof s.id !== 'string') {
      throw new UsageError(operator, `state[${i}].serializer`, 'must be a serializer (an id, encode and decode)');
    }
  });
}
