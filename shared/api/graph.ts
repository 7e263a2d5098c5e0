/**
 * The logical graph a job builder records: one node per user call. It holds the user's functions,
 * so it is not part of the (serialisable) plan; the planner reads it and the runtime looks functions
 * up in it by node id.
 */
import type { Partitioning, PlanSink, PlanSource } from '../plan/plan.js';
import type { MapStateDescriptor, OperatorListStateDescriptor, StateDescriptor } from './state.js';
import type { Key, KeyedBroadcastProcessFunction, KeyedCoProcessFunction, KeyedProcessFunction, ProcessFunction, RecordContext } from './types.js';
import type { WindowAssigner, WindowFunctionSpec } from './windows.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- the graph is heterogeneous by nature: each
   node's record types are checked by the typed builder that created it, not here. */
export type AnyFn = (...args: any[]) => any;

interface NodeBase {
  readonly id: string;
  name: string;
  readonly inputs: readonly LogicalNode[];
}

export interface SourceNode extends NodeBase {
  readonly kind: 'source';
  readonly spec: PlanSource;
  /** turns one decoded raw record into the user's type; throwing marks the record as poison */
  readonly parse?: (raw: unknown) => unknown;
  readonly timestamp?: (value: any) => number;
  readonly watermarks?: WatermarkStrategy;
}

/**
 * A source's event times stay within ±2^50 ms (about 35,700 years from 1970): the wire carries
 * ±(2^51 − 1) (MAX_WIRE_TIME), and what a job adds to an event time (a window's end, a timer's delay,
 * the out-of-orderness bound) stays below the final watermark, so it still fires at the end of input.
 */
export const MAX_EVENT_TIME = 2 ** 50;

/** How a source derives watermarks from the event times it sees. */
export interface WatermarkStrategy {
  /** records may arrive this much later (in event time) than the latest seen; 0 = monotonous */
  readonly maxOutOfOrdernessMs: number;
  /** a source shard without records for this long (in processing time) stops holding watermarks back */
  readonly idleTimeoutMs?: number;
}
export interface MapNode extends NodeBase {
  readonly kind: 'map';
  readonly fn: (value: any, ctx: RecordContext) => unknown;
}
export interface FilterNode extends NodeBase {
  readonly kind: 'filter';
  readonly fn: (value: any, ctx: RecordContext) => boolean;
}
export interface FlatMapNode extends NodeBase {
  readonly kind: 'flatMap';
  readonly fn: (value: any, ctx: RecordContext) => Iterable<unknown>;
}
export interface ExchangeNode extends NodeBase {
  readonly kind: 'exchange';
  readonly partitioning: Partitioning;
  readonly keySelector?: (value: any) => Key;
  readonly parallelism?: number;
  /** broadcast exchanges: the broadcast state the receiving operator keeps */
  readonly broadcastState?: readonly MapStateDescriptor<string | number, unknown>[];
}
/** Two keyed inputs (connect, joins) into one keyed operator. */
export interface CoProcessNode extends NodeBase {
  readonly kind: 'coProcess';
  readonly fn: KeyedCoProcessFunction<Key, any, any, any>;
  readonly state: readonly StateDescriptor<unknown>[];
}
/** A keyed input and a broadcast input (rules, configuration) into one operator. */
export interface BroadcastProcessNode extends NodeBase {
  readonly kind: 'broadcastProcess';
  readonly fn: KeyedBroadcastProcessFunction<Key, any, any, any>;
  readonly state: readonly StateDescriptor<unknown>[];
}
export interface ProcessNode extends NodeBase {
  readonly kind: 'process';
  readonly fn: KeyedProcessFunction<Key, any, any>;
  readonly state: readonly StateDescriptor<unknown>[];
}
export interface ReduceNode extends NodeBase {
  readonly kind: 'reduce';
  readonly fn: (acc: any, value: any) => unknown;
  readonly state: readonly StateDescriptor<unknown>[];
}
export interface WindowNode extends NodeBase {
  readonly kind: 'window';
  readonly assigner: WindowAssigner;
  readonly allowedLatenessMs: number;
  readonly lateTag?: string;
  readonly function: WindowFunctionSpec;
  /** maps (key, window, result) to the output; default: a WindowResult */
  readonly result?: (key: Key, window: { start: number; end: number }, value: unknown) => unknown;
  readonly state: readonly StateDescriptor<unknown>[];
}
/** A non-keyed process function with operator list state. */
export interface OperatorProcessNode extends NodeBase {
  readonly kind: 'operatorProcess';
  readonly fn: ProcessFunction<any, any>;
  readonly operatorState: readonly OperatorListStateDescriptor<unknown>[];
}
/** Reads a side output of its input operator. */
export interface SideOutputNode extends NodeBase {
  readonly kind: 'sideOutput';
  readonly tag: string;
}
/** Merges several streams of the same type. */
export interface UnionNode extends NodeBase {
  readonly kind: 'union';
}

export interface SinkNode extends NodeBase {
  readonly kind: 'sink';
  readonly spec: PlanSink;
  readonly sink: SinkDefinition<any>;
}

export type LogicalNode =
  | SourceNode
  | MapNode
  | FilterNode
  | FlatMapNode
  | ExchangeNode
  | ProcessNode
  | ReduceNode
  | WindowNode
  | CoProcessNode
  | BroadcastProcessNode
  | OperatorProcessNode
  | SideOutputNode
  | UnionNode
  | SinkNode;

/** What a sink factory returns; the runtime picks the writer by `spec.kind`. */
export interface SinkDefinition<T> {
  readonly spec: PlanSink;
  /** for upsert sinks: the row's key */
  readonly key?: (value: T) => string;
  /** for upsert sinks: the row's attributes besides the key (default: the value itself) */
  readonly item?: (value: T) => Record<string, unknown>;
  /** phantom field that carries T */
  readonly __type?: T;
}
