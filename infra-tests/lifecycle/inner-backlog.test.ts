/**
 * A stage slower per record than its input does not build a backlog the barriers wait behind: each
 * source shard forwards at most `maxInFlightRecords` records beyond its barrier of the last checkpoint
 * that crossed the pipeline (shared/runtime/source-window.ts). The source stream holds 300 records
 * before the job starts; the source is fast, the keyed stage after it waits 15 ms per record. The
 * test counts, at every source invocation's end, the records the source has taken minus those the
 * keyed stage has consumed or is consuming: the records queued in the inner stream in front of the
 * keyed stage's read position. That count stays within the window of both source shards (without
 * the window it reaches most of the backlog), and the outputs equal the oracle's. The coordinator
 * may park while idle, as a deployed one does: held input must not let it sleep.
 */
import type { KinesisStreamBatchResponse, KinesisStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { LocalJobRunner } from '../../local/runner.js';
import { decodeSourceControl } from '../../shared/codec/envelope.js';
import { inputRecord } from '../chaos/harness.js';
import { chaosJob, OUTPUTS_SINK, SOURCE_NAME } from '../chaos/job.js';
import { expectedFrom } from '../chaos/oracle.js';
import { judgeSinks } from '../chaos/run.js';
import { dataRecords } from '../soak/barrier-travel.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const RECORDS = 300;
const WINDOW = 25;
const SOURCE_SHARDS = 2;
const PER_RECORD_MS = 15;

type Handler = (e: KinesisStreamEvent, ...r: unknown[]) => Promise<KinesisStreamBatchResponse | void>;

/** Data records of a source batch the handler took: those before the first one it reported failed. */
function takenData(event: KinesisStreamEvent, out: KinesisStreamBatchResponse | void): number {
  const failed = out?.batchItemFailures?.[0]?.itemIdentifier;
  let n = 0;
  for (const r of event.Records) {
    if (r.kinesis.sequenceNumber === failed) break;
    if (!decodeSourceControl(Buffer.from(r.kinesis.data, 'base64'))) n++;
  }
  return n;
}

describe('a stage slower per record than its input', () => {
  let emulators: LocalEmulators;
  let runner: LocalJobRunner;
  const input = Array.from({ length: RECORDS }, (_, i) => inputRecord({ id: `ib-${String(i).padStart(5, '0')}`, key: `k${i % 11}`, value: 1 + (i % 7) }, `pk-${i % 37}`));
  const count = { taken: 0, consumed: 0, consuming: 0, maxQueued: 0, held: 0 };

  beforeAll(async () => {
    emulators = await startEmulators();
    runner = await LocalJobRunner.start(chaosJob({ variant: 'two-stage', sourceShards: SOURCE_SHARDS, checkpointTimeoutMs: 5_000, maxInFlightRecords: WINDOW }), {
      emulators,
      prefix: 'innerbacklog',
      // one environment a stage: no takeovers, so each source instance's count is exact
      environments: 1,
      recycleProbability: 0,
      batchSize: 20,
      checkpointIntervalMs: 300,
      idleCoordinator: true,
      wrapHandler: (handler, ctx) =>
        ctx.stage.id === 's0'
          ? async (event: KinesisStreamEvent, ...rest: unknown[]) => {
              const out = await (handler as Handler)(event, ...rest);
              count.taken += takenData(event, out);
              if (out?.batchItemFailures?.length) count.held++;
              count.maxQueued = Math.max(count.maxQueued, count.taken - count.consumed - count.consuming);
              return out;
            }
          : async (event: KinesisStreamEvent, ...rest: unknown[]) => {
              const n = dataRecords(event);
              count.consuming += n;
              try {
                await sleep(PER_RECORD_MS * n);
                const out = await (handler as Handler)(event, ...rest);
                count.consumed += n;
                return out;
              } finally {
                count.consuming -= n;
              }
            },
      beforeStart: async (r) => {
        await r.produce(
          SOURCE_NAME,
          input.map((x) => x.payload),
          { partitionKey: (_v, i) => input[i]!.produced.partitionKey },
        );
      },
    });
    // a condition, with a generous bound: every output published
    for (let i = 0; i < 2400 && runner.collected.published(OUTPUTS_SINK).length < RECORDS; i++) await sleep(100);
    console.log(`inner backlog: at most ${count.maxQueued} records queued in front of the keyed stage (window ${WINDOW} × ${SOURCE_SHARDS} shards); ${count.held} source batches held back`);
  }, 300_000);

  afterAll(async () => {
    await runner?.stop();
    await emulators?.stop();
  });

  it('queues at most the window of each source shard in front of the slow stage', () => {
    expect(count.maxQueued).toBeLessThanOrEqual(WINDOW * SOURCE_SHARDS);
    expect(count.held).toBeGreaterThan(0);
    // the metric counts the records handed back, at least one per held batch
    expect(runner.telemetry.get('SourceRecordsHeld')).toBeGreaterThanOrEqual(count.held);
  });

  it('still produces exactly the outputs the oracle computes', async () => {
    const verdict = await judgeSinks(runner, expectedFrom(input.map((x) => x.produced)));
    expect(verdict.problems).toEqual([]);
    expect(verdict.lost + verdict.duplicated + verdict.mismatched).toBe(0);
  });
});
