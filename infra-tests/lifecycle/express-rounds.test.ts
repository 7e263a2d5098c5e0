/**
 * Checkpoints in Express rounds (`expressCheckpoints`) on the emulated stack, with the shipping
 * coordinator loop: the Standard execution allocates and starts a round, the round waits for the
 * acks by reading the checkpoint record, commits, pauses and allocates the next checkpoint. Every
 * click is counted exactly once, also when a round cannot commit and hands the commit back to the
 * Standard execution; with no input the round ends and the Standard execution parks until a source
 * stage wakes it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import job from '../../examples/clickstream/job.js';
import { sleep } from '../../shared/adapters/aws/clients.js';
import { LocalJobRunner } from '../../local/runner.js';
import { parked, until } from './idle-wake.js';

const event = (i: number) => new TextEncoder().encode(JSON.stringify({ userId: `u${i % 3}`, url: `/product/${i % 4}`, ts: 1_793_534_400_000 + i }));

describe('checkpoints in Express rounds on the emulated stack', () => {
  let runner: LocalJobRunner | undefined;
  const tasks: string[] = [];
  /** commits of the Coordinator that fail on purpose: the round's two attempts at its first commit */
  let failCommits = 2;

  beforeAll(async () => {
    runner = await LocalJobRunner.start(job, {
      checkpointIntervalMs: 200,
      expressCheckpoints: true,
      idleCoordinator: true,
      recycleProbability: 0,
      seed: 5,
      wrapCoordinator: (run) => async (input) => {
        tasks.push(`${input.action}${'checkpointId' in input ? input.checkpointId : ''}`);
        if (input.action === 'commit' && failCommits > 0) {
          failCommits--;
          throw new Error('the sink is down for a moment');
        }
        return run(input);
      },
    });
  }, 120_000);

  afterAll(async () => {
    await runner?.stop();
  });

  const isParked = () => parked(runner!);

  const waitFor = (cond: () => Promise<boolean>, what: string) => until(cond, what, tasks);

  const clicks = async () => (await runner!.readUpsertSink<{ pk: string; clicks: number }>('clicks-per-user-page')).reduce((a, r) => a + r.clicks, 0);

  it('counts every click exactly once through rounds, a commit handed back to the Standard execution included, and parks when idle', async () => {
    // steady input until five checkpoints completed: each round finds input after every commit and allocates on
    let produced = 0;
    const completedCount = async () => (await runner!.coordinator.list()).filter((c) => c.status === 'COMPLETED').length;
    const deadline = Date.now() + 120_000;
    while ((await completedCount()) < 5) {
      if (Date.now() > deadline) throw new Error(`five checkpoints did not complete in 120 s; coordinator tasks: ${tasks.slice(-40).join(' ')}`);
      await runner!.produce('clicks', [event(produced), event(produced + 1)]);
      produced += 2;
      await sleep(100);
    }
    await waitFor(async () => (await clicks()) === produced, `all ${produced} clicks published`);
    // the first commit failed twice inside the round; the Standard execution committed it
    const firstCommit = tasks.find((t) => t.startsWith('commit'))!;
    expect(tasks.filter((t) => t === firstCommit).length, tasks.join(' ')).toBeGreaterThanOrEqual(3);
    expect(failCommits).toBe(0);
    // rounds allocate the checkpoints: far fewer billed transitions than three per checkpoint
    const completed = await completedCount();
    expect(runner!.coordinatorTransitions() / completed, tasks.join(' ')).toBeLessThan(2);

    await waitFor(isParked, 'the coordinator parks with no input');
    const before = tasks.length;
    await sleep(1_500);
    expect(tasks.length).toBe(before);

    const again = new Date();
    await runner!.produce('clicks', Array.from({ length: 20 }, (_, i) => event(produced + i)));
    await runner!.awaitCheckpoints(1, again, 90_000);
    await waitFor(async () => (await clicks()) === produced + 20, 'the second burst published');
    const ids = (await runner!.coordinator.list()).filter((c) => c.status === 'COMPLETED').map((c) => c.checkpointId);
    expect(new Set(ids).size).toBe(ids.length);
    await sleep(500);
    expect(await clicks()).toBe(produced + 20);
  }, 240_000);
});
