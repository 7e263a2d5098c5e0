/**
 * The bounded reader function: feeds a job's source stream from objects under an S3 prefix, as the
 * tasks of a Step Functions workflow that fans out over the objects:
 *
 *   list (→ { objects: [{ key }] })  →  Map over objects, MaxConcurrency N: read (one object each)
 *   →  end (the end-of-input record into every shard of the source stream)
 *
 * One invocation per object keeps each within Lambda's time limit whatever the input's size. Readers
 * run in parallel, so records of different objects interleave in the shards: the source needs a
 * watermark delay covering that disorder, or HOLD_UNTIL_END (SQL tables with connector 's3' hold by
 * default). The job module is bundled beside it, like the stage and coordinator functions.
 */
import { PowertoolsTelemetry } from './telemetry.js';
import type { Context } from 'aws-lambda';
import { BoundedReader, endInput, type BoundedFormat } from '../shared/bounded/bounded-reader.js';
import { kinesisSourceWriter, s3ObjectStore } from '../shared/adapters/aws/bounded-input.js';
import { createAwsClients } from '../shared/adapters/aws/clients.js';
import type { Job } from '../shared/api/job.js';
import { planJob } from '../shared/plan/planner.js';
import { ENV, resourceNames } from '../shared/plan/resources.js';
import { optionalEnv, requireEnv } from '../shared/util/config.js';
import { UsageError } from '../shared/util/errors.js';

export type BoundedReaderTask =
  | { readonly action: 'list'; readonly source: string; readonly bucket?: string; readonly prefix: string }
  | {
      readonly action: 'read';
      readonly source: string;
      readonly bucket?: string;
      readonly key: string;
      readonly format?: BoundedFormat;
      readonly csvColumns?: readonly string[] | true;
      readonly csvHeader?: boolean;
    }
  | { readonly action: 'end'; readonly source: string };

export function boundedReaderHandler(job: Job) {
  const plan = planJob(job);
  const names = resourceNames(plan, requireEnv(ENV.prefix));
  const defaultBucket = optionalEnv(ENV.bucket) ?? names.bucket;
  const clients = createAwsClients();
  const telemetry = new PowertoolsTelemetry(plan.job, 'bounded-reader', { metricsPeriodMs: 0 });
  const tracing = telemetry.traceClients(clients, ['kinesis', 's3']);
  const store = s3ObjectStore(clients.s3);
  const writer = kinesisSourceWriter(clients.kinesis);
  const reader = new BoundedReader(store, writer);
  const streamOf = (name: string) => {
    const src = plan.sources.find((s) => s.name === name);
    if (!src) throw new UsageError(`job "${plan.job}"`, `source "${name}"`, `does not exist (sources: ${plan.sources.map((s) => s.name).join(', ')})`);
    return names.sourceStream(src);
  };
  const run = async (task: BoundedReaderTask): Promise<unknown> => {
    const stream = streamOf(task.source);
    switch (task.action) {
      case 'list': {
        const objects = await store.list(task.bucket ?? defaultBucket, task.prefix);
        return { objects: objects.map((o) => ({ key: o.key, size: o.size })) };
      }
      case 'read':
        return reader.readObject({ ...task, bucket: task.bucket ?? defaultBucket, stream });
      case 'end':
        await endInput(writer, stream);
        return { ended: stream };
    }
  };
  return async (task: BoundedReaderTask, context?: Context): Promise<unknown> => {
    if (context) telemetry.logger.addContext(context);
    try {
      await tracing;
      const out = await run(task);
      telemetry.log('info', `bounded reader ${task.action}`, { source: task.source, ...(task.action === 'read' ? { key: task.key } : {}) });
      return out;
    } finally {
      telemetry.flush();
    }
  };
}
