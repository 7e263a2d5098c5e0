/** The user API. Jobs import only from here; it never imports the runtime or AWS. */
export { job, Job, DataStream, KeyedStream } from './job.js';
export type { JobOptions, CheckpointOptions, KinesisSourceOptions } from './job.js';
export { dynamoUpsertSink, collectSink } from './sinks.js';
export type { DynamoUpsertSinkOptions } from './sinks.js';
export { valueState } from './state.js';
export type { StateDescriptor, ValueStateDescriptor } from './state.js';
export { jsonSerializer, textSerializer, bytesSerializer } from './serializers.js';
export type {
  Collector,
  Key,
  KeyedContext,
  KeyedProcessFunction,
  RecordContext,
  Serializer,
  ValueState,
} from './types.js';
