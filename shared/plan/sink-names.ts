/**
 * Where the outputs of transactional sinks live: the staging area of every staged sink (S3 objects
 * written by the instances before their snapshots are durable), the published prefix of a file
 * sink, and the output stream of a Kinesis sink. Derived from the plan and the resource names, as
 * every other physical name is, so the CDK construct, the functions and the local runner agree.
 */
import type { PlanSink } from './plan.js';
import type { ResourceNames } from './resources.js';
import { sanitizeName } from './resources.js';

/** Staged outputs of every sink live under this prefix of the job's bucket. */
export const STAGING_ROOT = 'sinks/_staged/';

/** Staging prefix of one sink: `sinks/_staged/<sink>/`. */
export function stagingPrefix(sinkName: string): string {
  return `${STAGING_ROOT}${sanitizeName(sinkName)}/`;
}

/** Published prefix of a file sink, without a trailing slash. */
export function fileSinkPrefix(sink: PlanSink): string {
  return sink.prefix ?? `sinks/${sanitizeName(sink.name)}`;
}

/** Output stream of a Kinesis sink. */
export function kinesisSinkStream(names: ResourceNames, sink: PlanSink): string {
  return sink.streamName ?? `${names.prefix}-out-${sanitizeName(sink.name)}`;
}

/** Shard count of an output stream the job creates. */
export const KINESIS_SINK_SHARDS = 1;
