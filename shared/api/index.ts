/**
 * `sluice`: the job API. A job is a graph of sources, transformations, keyed state, windows and
 * sinks, recorded by the builder returned by {@link job}; one planner turns it into stages. Jobs
 * import only from here; it never imports the runtime or AWS.
 *
 * @module sluice
 */
export {
  job,
  Job,
  DataStream,
  KeyedStream,
  WindowedStream,
  WatermarkStrategies,
  ConnectedKeyedStreams,
  BroadcastStream,
  BroadcastConnectedStream,
  IntervalJoined,
  JoinBuilder,
} from './job.js';
export type { JoinContext } from './job.js';
export type { JobOptions, CheckpointOptions, KinesisSourceOptions } from './job.js';
export { dynamoUpsertSink, collectSink, s3FileSink, kinesisSink } from './sinks.js';
export type { DynamoUpsertSinkOptions, S3FileSinkOptions, KinesisSinkOptions } from './sinks.js';
export { valueState, listState, mapState, reducingState, aggregatingState, operatorListState, unionListState } from './state.js';
export type {
  AggregateFunction,
  AggregatingState,
  AggregatingStateDescriptor,
  ListState,
  ListStateDescriptor,
  MapState,
  MapStateDescriptor,
  OperatorListStateDescriptor,
  ReducingState,
  ReducingStateDescriptor,
  StateDescriptor,
  StateTtl,
  ValueState,
  ValueStateDescriptor,
} from './state.js';
export { TumblingEventTimeWindows, SlidingEventTimeWindows, EventTimeSessionWindows } from './windows.js';
export type { TimeWindow, WindowAssigner, WindowOptions, WindowResult, ProcessWindowFunction } from './windows.js';
export type { WatermarkStrategy } from './graph.js';
export { jsonSerializer, textSerializer, bytesSerializer } from './serializers.js';
export { OutputTag } from './types.js';
export type {
  BroadcastContext,
  Collector,
  Key,
  KeyedBroadcastContext,
  KeyedBroadcastProcessFunction,
  KeyedCoProcessFunction,
  KeyedContext,
  KeyedProcessFunction,
  OnTimerContext,
  ProcessContext,
  ProcessFunction,
  ReadOnlyBroadcastState,
  RecordContext,
  Serializer,
  TimerService,
} from './types.js';
