/**
 * A source with a backlog still checkpoints: its barriers go out at its read position, not behind the
 * backlog. The source stream holds 400 records before the job starts and the source stage is slow,
 * so draining the backlog takes many checkpoint intervals. The first checkpoint must complete while
 * most of the backlog is still unread (with barriers at the tail it completes only once everything
 * before the tail is read), and at the end the outputs still equal the oracle's.
 */
import type { KinesisStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { LocalJobRunner } from '../../local/runner.js';
import type { CheckpointRecord } from '../../shared/coordinator/coordinator.js';
import { inputRecord } from '../chaos/harness.js';
import { chaosJob, OUTPUTS_SINK, SOURCE_NAME } from '../chaos/job.js';
import { expectedFrom } from '../chaos/oracle.js';
import { judgeSinks } from '../chaos/run.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const RECORDS = 400;

describe('barriers at the source read position', () => {
  let emulators: LocalEmulators;
  let runner: LocalJobRunner;
  const input = Array.from({ length: RECORDS }, (_, i) => inputRecord({ id: `c7-${String(i).padStart(5, '0')}`, key: `k${i % 7}`, value: 1 + (i % 9) }, `pk-${i % 31}`));
  let first: CheckpointRecord | undefined;
  let publishedAtFirst = 0;

  beforeAll(async () => {
    emulators = await startEmulators();
    runner = await LocalJobRunner.start(chaosJob({ variant: 'two-stage', checkpointTimeoutMs: 5_000 }), {
      emulators,
      prefix: 'backlog',
      environments: 2,
      recycleProbability: 0,
      batchSize: 20,
      checkpointIntervalMs: 300,
      // the source is slow: 20 batches of 20, each at least 150 ms
      wrapHandler: (handler, ctx) =>
        ctx.stage.id === 's0'
          ? async (event: KinesisStreamEvent, ...rest: unknown[]) => {
              await sleep(150);
              return (handler as (e: KinesisStreamEvent, ...r: unknown[]) => ReturnType<typeof handler>)(event, ...rest);
            }
          : handler,
      beforeStart: async (r) => {
        await r.produce(
          SOURCE_NAME,
          input.map((x) => x.payload),
          { partitionKey: (_v, i) => input[i]!.produced.partitionKey },
        );
      },
    });
    // the first checkpoint to complete (awaitCheckpoints would wait for one that covers the backlog)
    for (let i = 0; i < 1200 && !first; i++) {
      first = (await runner.coordinator.list()).find((c) => c.status === 'COMPLETED');
      if (!first) await sleep(100);
    }
    // the workflow allocates the next checkpoint only once the commit of this one has published
    while (!(await runner.coordinator.list()).some((c) => c.checkpointId > first!.checkpointId)) await sleep(50);
    publishedAtFirst = runner.collected.published(OUTPUTS_SINK).length;
    console.log(`first checkpoint ${first?.checkpointId} took ${first?.durationMs} ms; published at its commit: ${publishedAtFirst} of ${RECORDS}`);
    await runner.awaitCheckpoints(1, new Date(), 180_000);
    // every record read: two more checkpoints cover all of them
    for (let i = 0; i < 600 && runner.collected.published(OUTPUTS_SINK).length < RECORDS; i++) await sleep(250);
  }, 400_000);

  afterAll(async () => {
    await runner?.stop();
    await emulators?.stop();
  });

  it('completes a checkpoint long before the backlog is read', () => {
    expect(first?.status).toBe('COMPLETED');
    // with barriers at the tail, the first commit publishes the whole backlog
    expect(publishedAtFirst).toBeLessThan(RECORDS / 2);
  });

  it('still produces exactly the outputs the oracle computes', async () => {
    const verdict = await judgeSinks(runner, expectedFrom(input.map((x) => x.produced)));
    expect(verdict.problems).toEqual([]);
    expect(verdict.lost + verdict.duplicated + verdict.mismatched).toBe(0);
  });
});
