/**
 * The stage function: a Kinesis event source mapping invokes it with AWS's own KinesisStreamEvent
 * and it answers with the partial-batch-response shape. Which stage it runs comes from
 * SLUICE_STAGE; the job module is bundled beside it.
 */
import type { Context, KinesisStreamBatchResponse, KinesisStreamEvent } from 'aws-lambda';
import { createAwsClients } from '../shared/adapters/aws/clients.js';
import { awsCoordinatorWake } from '../shared/adapters/aws/coordinator-ports.js';
import { createAwsPorts } from '../shared/adapters/aws/ports.js';
import { LOOP_ENV } from '../shared/coordinator/loop.js';
import type { Job } from '../shared/api/job.js';
import { planJob, stageById } from '../shared/plan/planner.js';
import { ENV, resourceNames } from '../shared/plan/resources.js';
import type { StoredRecord } from '../shared/runtime/ports.js';
import { createStageRunner, type BatchOutcome, type StageRunner } from '../shared/runtime/stage-runner.js';
import { optionalEnv, requireEnv } from '../shared/util/config.js';
import { SluiceError } from '../shared/util/errors.js';
import { PowertoolsTelemetry } from './telemetry.js';

export type OperatorHandler = (event: KinesisStreamEvent, context?: Context) => Promise<KinesisStreamBatchResponse>;

export function operatorHandler(job: Job): OperatorHandler {
  // everything here runs once per execution environment (cold start)
  const plan = planJob(job);
  const stage = stageById(plan, requireEnv(ENV.stage));
  const names = resourceNames(plan, requireEnv(ENV.prefix));
  const telemetry = new PowertoolsTelemetry(plan.job, stage.id);
  const bucket = optionalEnv(ENV.bucket);
  const clients = createAwsClients();
  const tracing = telemetry.traceClients(clients);
  const ports = createAwsPorts(plan, names, clients, telemetry, bucket ? { bucket } : {});
  const runner = createStageRunner({ job, plan, stage, names, ports });
  // a source stage wakes a coordinator parked while no input arrived (shared/coordinator/wake.ts)
  const waker = stage.input.kind === 'source' && optionalEnv(LOOP_ENV.idle) === '1' ? awsCoordinatorWake(names, clients) : undefined;
  // best effort: a missed wake-up is caught by the parked task's own re-check
  const wake: BatchWake | undefined = waker
    ? (instanceId, cue) => waker.afterBatch(instanceId, cue).catch((err: unknown) => telemetry.log('warn', 'could not wake the coordinator', { error: String(err) }))
    : undefined;
  return async (event, context) => {
    if (context) telemetry.logger.addContext(context);
    try {
      await tracing;
      return await handleKinesisBatch(runner, event, wake);
    } finally {
      telemetry.flush();
    }
  };
}

/**
 * An ESM batch as the engine takes it: the shard it comes from and its records, decoded. Every
 * record's data is decoded into one buffer for the batch (a view each, one after the other: a
 * source decodes their text at once, `batchTexts`), not a Buffer per record; the shard check
 * compares against one prefix string, not one concatenated per record (which its comparison
 * flattened: a string allocated per record).
 */
export function kinesisBatch(event: KinesisStreamEvent): { shardId: string; records: StoredRecord[] } | undefined {
  const events = event.Records;
  const n = events.length;
  if (!n) return undefined;
  const first = events[0]!;
  // an eventID is `shardId:sequenceNumber`
  const shardId = first.eventID.slice(0, first.eventID.indexOf(':'));
  const prefix = shardId + ':';
  // at most 3 bytes per 4 base64 characters (Buffer.from's own bound)
  let bound = 0;
  for (let i = 0; i < n; i++) bound += (events[i]!.kinesis.data.length * 3) >>> 2;
  // zeroed, not allocUnsafe: a view's `.buffer` shows the whole batch's memory
  const ab = new ArrayBuffer(bound);
  const bytes = Buffer.from(ab);
  // where each record's data ends
  const ends = new Int32Array(n);
  let at = 0;
  for (let i = 0; i < n; i++) {
    const id = events[i]!.eventID;
    // a slice compared, not startsWith: 40–70 ns less per record here
    if (id.length < prefix.length || id.slice(0, prefix.length) !== prefix) throw new SluiceError(`batch mixes shards ${shardId} and ${id}`, 'BATCH_INVALID');
    at += bytes.write(events[i]!.kinesis.data, at, 'base64');
    ends[i] = at;
  }
  const records: StoredRecord[] = new Array<StoredRecord>(n);
  for (let i = 0, start = 0; i < n; start = ends[i++]!) {
    const k = events[i]!.kinesis;
    records[i] = {
      sequenceNumber: k.sequenceNumber,
      data: new Uint8Array(ab, start, ends[i]! - start),
      partitionKey: k.partitionKey,
      approximateArrivalTimestamp: Math.round(k.approximateArrivalTimestamp * 1000),
    };
  }
  return { shardId, records };
}

/**
 * Runs one ESM batch on a stage's engine; throws (so the ESM retries the batch) on any failure. A
 * source whose window is full takes only part of the batch: the first record it did not take is
 * reported as failed, and the mapping (ReportBatchItemFailures) hands the batch over again from there.
 */
/** A source stage's wake-up of a parked coordinator after a batch that calls for one (`BatchOutcome.wake`, coordinator/wake.ts). */
export type BatchWake = (instanceId: string, cue: NonNullable<BatchOutcome['wake']>) => Promise<unknown>;

export async function handleKinesisBatch(runner: StageRunner, event: KinesisStreamEvent, wake?: BatchWake): Promise<KinesisStreamBatchResponse> {
  const batch = kinesisBatch(event);
  const out = batch ? await runner.run(batch.shardId, batch.records) : undefined;
  if (wake && out?.wake) await wake(out.instanceId, out.wake);
  return { batchItemFailures: out?.heldFrom !== undefined ? [{ itemIdentifier: out.heldFrom }] : [] };
}
