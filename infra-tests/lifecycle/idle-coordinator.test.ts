/**
 * The idle coordinator on the emulated stack: with no input since the last checkpoint it parks
 * its Allocate token (no coordinator task runs, so no state transition), and the first input a
 * source stage sees wakes it (the edge hook of the deployed stage function, shared/coordinator/wake.ts),
 * after which the input is checkpointed and its results reach the sink.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import job from '../../examples/clickstream/job.js';
import { sleep } from '../../shared/adapters/aws/clients.js';
import { LocalJobRunner } from '../../local/runner.js';
import { parked, until } from './idle-wake.js';

const event = (i: number) => new TextEncoder().encode(JSON.stringify({ userId: `u${i % 3}`, url: `/product/${i}`, ts: 1_793_534_400_000 + i }));

describe('idle coordinator on the emulated stack', () => {
  let runner: LocalJobRunner | undefined;
  const tasks: string[] = [];

  beforeAll(async () => {
    runner = await LocalJobRunner.start(job, {
      checkpointIntervalMs: 200,
      idleCoordinator: true,
      recycleProbability: 0,
      seed: 3,
      wrapCoordinator: (run) => async (input) => {
        tasks.push(input.action);
        return run(input);
      },
    });
  }, 120_000);

  afterAll(async () => {
    await runner?.stop();
  });

  const isParked = () => parked(runner!);

  const waitFor = (cond: () => Promise<boolean>, what: string) => until(cond, what, tasks);

  it('parks after a checkpoint with no input, runs no coordinator task while parked, and the first input wakes it', async () => {
    await waitFor(isParked, 'the coordinator parks with no input');
    const completed = (await runner!.coordinator.list()).filter((c) => c.status === 'COMPLETED').length;
    const metricBefore = runner!.telemetry.get('CheckpointCompleted');
    expect(metricBefore).toBeGreaterThan(0);
    const before = tasks.length;
    // ten pauses' worth: an unparked coordinator would have run ~30 tasks by now
    await sleep(2_000);
    expect(tasks.length).toBe(before);
    expect((await runner!.coordinator.list()).filter((c) => c.status === 'COMPLETED')).toHaveLength(completed);

    const since = new Date();
    await runner!.produce('clicks', [0, 1, 2, 3, 4, 5].map(event));
    await runner!.awaitCheckpoints(1, since, 90_000);
    const rows = await runner!.readUpsertSink<{ pk: string; clicks: number }>('clicks-per-user-page');
    expect(rows.reduce((a, r) => a + r.clicks, 0)).toBe(6);
    // and once that input is checkpointed, it parks again
    await waitFor(isParked, 'the coordinator parks again');
    // the tasks ran through the coordinator function's own factory: its metric is counted locally too
    expect(runner!.telemetry.get('CheckpointCompleted')).toBeGreaterThan(metricBefore);
  }, 200_000);
});
