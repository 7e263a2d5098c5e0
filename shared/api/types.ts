/**
 * Types user functions see. A context is valid only during the call that received it; functions
 * must be pure given (record, state, context): replay after a failure re-runs them and must get the
 * same outputs, which is what makes recovery local and output exactly-once. Time comes only from
 * the record (event time) and from the coordinator's ticks (processing time), never from the clock.
 */
import { UsageError } from '../util/errors.js';
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
} from './state.js';

/** Keys must be turned into a stable string: strings and numbers are, as themselves. */
export type Key = string | number;

export interface Collector<T> {
  collect(value: T): void;
}

/** A value that can cross a process boundary as bytes. */
export interface Serializer<T> {
  readonly id: string;
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
}

/** Names a side output; `stream.sideOutput(tag)` reads it. */
export class OutputTag<T> {
  /** phantom field that carries T */
  declare readonly __type?: T;
  constructor(readonly id: string) {
    if (!id) throw new UsageError('OutputTag', 'id', 'must be a non-empty string');
  }
}

/** What every user function can read about the record being processed. */
export interface RecordContext {
  /** event time of the record (ms since epoch), if the source assigns one */
  readonly timestamp: number | undefined;
  /** processing time as last announced by the coordinator's in-band tick (never the wall clock) */
  currentProcessingTime(): number;
  /** the operator's current event-time watermark */
  currentWatermark(): number;
  /** a random number in [0, 1) seeded from the record's id, so replay draws the same numbers */
  random(): number;
}

export interface TimerService {
  currentWatermark(): number;
  currentProcessingTime(): number;
  /** calls `onTimer` once the watermark passes `timestamp` */
  registerEventTimeTimer(timestamp: number): void;
  deleteEventTimeTimer(timestamp: number): void;
  /** calls `onTimer` once processing time (from the coordinator's ticks) reaches `timestamp` */
  registerProcessingTimeTimer(timestamp: number): void;
  deleteProcessingTimeTimer(timestamp: number): void;
}

/** Keyed state handles, scoped to the current key. */
export interface KeyedStateAccess {
  getState<T>(descriptor: ValueStateDescriptor<T>): ValueState<T>;
  getListState<T>(descriptor: ListStateDescriptor<T>): ListState<T>;
  getMapState<K extends string | number, V>(descriptor: MapStateDescriptor<K, V>): MapState<K, V>;
  getReducingState<T>(descriptor: ReducingStateDescriptor<T>): ReducingState<T>;
  getAggregatingState<I, A, O>(descriptor: AggregatingStateDescriptor<I, A, O>): AggregatingState<I, O>;
}

export interface KeyedContext<K extends Key> extends RecordContext, KeyedStateAccess {
  readonly key: K;
  readonly timerService: TimerService;
  /** emits to a side output */
  output<T>(tag: OutputTag<T>, value: T): void;
}

export interface OnTimerContext<K extends Key> extends KeyedContext<K> {
  readonly timeDomain: 'event-time' | 'processing-time';
}

/** Read access to broadcast state (from the keyed side of a broadcast connection). */
export interface ReadOnlyBroadcastState<K extends string | number, V> {
  get(key: K): V | undefined;
  contains(key: K): boolean;
  entries(): Array<[K, V]>;
}

export interface KeyedCoProcessFunction<K extends Key, I1, I2, O> {
  readonly state?: readonly StateDescriptor<unknown>[];
  processElement1(value: I1, ctx: KeyedContext<K>, out: Collector<O>): void;
  processElement2(value: I2, ctx: KeyedContext<K>, out: Collector<O>): void;
  onTimer?(timestamp: number, ctx: OnTimerContext<K>, out: Collector<O>): void;
}

export interface KeyedBroadcastContext<K extends Key> extends KeyedContext<K> {
  getBroadcastState<BK extends string | number, V>(descriptor: MapStateDescriptor<BK, V>): ReadOnlyBroadcastState<BK, V>;
}

export interface BroadcastContext extends RecordContext {
  /** the broadcast state, writable here: every instance applies the same broadcast records, so copies stay identical */
  getBroadcastState<BK extends string | number, V>(descriptor: MapStateDescriptor<BK, V>): MapState<BK, V>;
}

export interface KeyedBroadcastProcessFunction<K extends Key, I, B, O> {
  readonly state?: readonly StateDescriptor<unknown>[];
  processElement(value: I, ctx: KeyedBroadcastContext<K>, out: Collector<O>): void;
  processBroadcastElement(value: B, ctx: BroadcastContext, out: Collector<O>): void;
  onTimer?(timestamp: number, ctx: OnTimerContext<K>, out: Collector<O>): void;
}

export interface ProcessContext extends RecordContext {
  /** the instance's own list state (see operatorListState / unionListState) */
  getOperatorListState<T>(descriptor: import('./state.js').OperatorListStateDescriptor<T>): import('./state.js').ListState<T>;
  output<T>(tag: OutputTag<T>, value: T): void;
}

/** A function on a stream that is not keyed: state per instance (operator state), no timers. */
export interface ProcessFunction<I, O> {
  readonly state?: readonly import('./state.js').OperatorListStateDescriptor<unknown>[];
  processElement(value: I, ctx: ProcessContext, out: Collector<O>): void;
}

export interface KeyedProcessFunction<K extends Key, I, O> {
  /** every state the function uses, declared up front so the planner and `describe` know them */
  readonly state?: readonly StateDescriptor<unknown>[];
  processElement(value: I, ctx: KeyedContext<K>, out: Collector<O>): void;
  onTimer?(timestamp: number, ctx: OnTimerContext<K>, out: Collector<O>): void;
}
