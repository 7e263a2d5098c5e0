/** Builds the runtime's ports from AWS SDK clients. */
import type { Plan } from '../../plan/plan.js';
import type { ResourceNames } from '../../plan/resources.js';
import type { CollectSinkStore, RuntimePorts, Telemetry } from '../../runtime/ports.js';
import { UsageError } from '../../util/errors.js';
import type { AwsClients } from './clients.js';
import { DynamoControlStore } from './dynamo-control-store.js';
import { DynamoStateStore } from './dynamo-state-store.js';
import { SpillingStateStore } from '../../runtime/spilling-state-store.js';
import { S3BlobStore } from './s3-blob-store.js';
import { DynamoUpsertSinkWriter } from './dynamo-upsert-sink.js';
import { KinesisShardDirectory, KinesisShardReader, KinesisStreamWriter } from './kinesis.js';
import { S3DeadLetterStore } from './s3-dead-letters.js';
import { S3SpillStore } from './s3-spill-store.js';
import { SfnTaskNotifier } from './sfn-notifier.js';
import { DynamoSourceBarrierStore } from './source-barriers.js';
import { S3StagingStore, StagedSinkRouter } from './staged-sinks.js';

const noCollect: CollectSinkStore = {
  async stage(sink) {
    throw new UsageError(`collect sink "${sink}"`, 'deployment', 'only works where the job runs in one process (tests, local runner)');
  },
};

/**
 * `collectSink` is the staged-output port of every transactional sink: outputs of `s3-file` and
 * `kinesis` sinks are staged as S3 objects (published by the coordinator's commit), outputs of
 * `collect` sinks go to `options.collectSink` (the in-process CollectRegistry of tests and the
 * local runner).
 */
export function createAwsPorts(
  plan: Plan,
  names: ResourceNames,
  clients: AwsClients,
  telemetry: Telemetry,
  options: { bucket?: string; collectSink?: CollectSinkStore } = {},
): RuntimePorts {
  const bucket = options.bucket ?? names.bucket;
  return {
    control: new DynamoControlStore(clients, names.controlTable, bucket),
    // keys whose state outgrows a DynamoDB item spill to S3
    state: new SpillingStateStore(new DynamoStateStore(clients, names.stateTable), new S3BlobStore(clients, bucket)),
    shards: new KinesisShardDirectory(clients),
    writer: new KinesisStreamWriter(clients, telemetry),
    reader: new KinesisShardReader(clients),
    deadLetters: new S3DeadLetterStore(clients, bucket),
    notifier: new SfnTaskNotifier(clients),
    upsertSink: new DynamoUpsertSinkWriter(clients),
    collectSink: new StagedSinkRouter(plan, new S3StagingStore(clients, bucket), options.collectSink ?? noCollect),
    telemetry,
    // dirty keys beyond StageRunnerOptions.maxDirtyKeys wait here for the next snapshot
    spill: new S3SpillStore(clients, bucket),
    // sources put barriers at their read position, not behind their backlog
    sourceBarriers: new DynamoSourceBarrierStore(clients, names.controlTable),
  };
}
