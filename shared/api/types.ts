/**
 * Types user functions see. A context is valid only during the call that received it; functions
 * must be pure given (record, state, context): replay after a failure re-runs them and must get the
 * same outputs, which is what makes recovery local and output exactly-once.
 */

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

export interface ValueState<T> {
  value(): T | undefined;
  update(value: T): void;
  clear(): void;
}

export interface KeyedContext<K extends Key> extends RecordContext {
  readonly key: K;
  /** the handle of a declared state, scoped to the current key */
  getState<T>(descriptor: import('./state.js').ValueStateDescriptor<T>): ValueState<T>;
}

export interface KeyedProcessFunction<K extends Key, I, O> {
  /** every state the function uses, declared up front so the planner and `describe` know them */
  readonly state?: readonly import('./state.js').StateDescriptor<unknown>[];
  processElement(value: I, ctx: KeyedContext<K>, out: Collector<O>): void;
}
