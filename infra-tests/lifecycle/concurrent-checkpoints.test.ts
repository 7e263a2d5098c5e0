/**
 * Two checkpoints in flight at once (`checkpoint.maxConcurrent: 2`): the keyed stage is slowed down
 * so that aligning a checkpoint takes longer than the interval, and the coordinator starts the next
 * one meanwhile. Checkpoints overlap, never more than two are open, each commits in order, and the
 * windows and running counts still equal those computed from the input without the engine.
 */
import type { KinesisStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { LocalJobRunner } from '../../local/runner.js';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoUpsertSinkWriter } from '../../shared/adapters/aws/dynamo-upsert-sink.js';
import { provisionJob } from '../../local/provision.js';
import { type CheckpointRecord } from '../../shared/coordinator/coordinator.js';
import { awsCoordinator } from '../../shared/adapters/aws/coordinator-ports.js';
import { planJob } from '../../shared/plan/planner.js';
import { resourceNames } from '../../shared/plan/resources.js';
import { windowJob, type Ev, type UserCount, type WindowCount } from './jobs.js';
import { makeEvents, totalsOracle, windowOracle } from './oracles.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The largest number of checkpoints whose [start, end] intervals overlap at one instant. */
function mostOpen(cks: readonly CheckpointRecord[]): number {
  const edges = cks.flatMap((c) => [
    [Date.parse(c.startedAt), 1],
    [Date.parse(c.endedAt ?? c.startedAt), -1],
  ]) as Array<[number, number]>;
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (open += d));
  return most;
}

describe('two checkpoints in flight at once', () => {
  let emulators: LocalEmulators;
  let runner: LocalJobRunner;
  const events: Ev[] = [];
  let checkpoints: CheckpointRecord[] = [];
  let windows: WindowCount[] = [];
  let totals: UserCount[] = [];

  beforeAll(async () => {
    emulators = await startEmulators();
    runner = await LocalJobRunner.start(windowJob(2, true, { maxConcurrent: 2 }), {
      emulators,
      environments: 2,
      prefix: 'concurrent',
      checkpointIntervalMs: 300,
      recycleProbability: 0.1,
      seed: 9,
      batchSize: 10,
      // the windowed stage is slow: aligning a checkpoint there outlasts the interval
      wrapHandler: (handler, ctx) =>
        ctx.stage.id === 's1'
          ? async (event: KinesisStreamEvent, ...rest: unknown[]) => {
              await sleep(250);
              return (handler as (e: KinesisStreamEvent, ...r: unknown[]) => ReturnType<typeof handler>)(event, ...rest);
            }
          : handler,
    });
    let ts = 0;
    for (let round = 0; round < 6; round++) {
      const batch = makeEvents(40, 6, ts, 40, 20 + round);
      ts += 40 * 40;
      events.push(...batch);
      await runner.produce('events', batch);
      await sleep(400);
    }
    await runner.endInput('events');
    await runner.awaitCheckpoints(2, new Date(), 180_000);
    checkpoints = await runner.coordinator.list();
    windows = runner.collected.published<WindowCount>('windows');
    totals = await runner.readUpsertSink<UserCount>('totals');
  }, 400_000);

  afterAll(async () => {
    await runner?.stop();
    await emulators?.stop();
  });

  it('runs checkpoints side by side, never more than two open, and completes them in order', () => {
    const done = checkpoints.filter((c) => c.status !== 'IN_FLIGHT');
    const msg = JSON.stringify(done.map((c) => [c.checkpointId, c.status, c.startedAt, c.endedAt]));
    expect(mostOpen(done), msg).toBe(2);
    const completed = done.filter((c) => c.status === 'COMPLETED');
    // how many complete depends on the machine's speed; two are what an overlap takes
    expect(completed.length, msg).toBeGreaterThanOrEqual(2);
    const ends = completed.map((c) => Date.parse(c.endedAt!));
    expect(ends, msg).toEqual([...ends].sort((a, b) => a - b));
  });

  it('publishes exactly the windows of the input (computed without the engine), each once', () => {
    expect(windows.map((w) => `${w.user}|${w.start}|${w.count}`).sort()).toEqual(windowOracle(events));
  });

  it('keeps every running count', () => {
    expect(new Map(totals.map((t) => [t.user, t.count]))).toEqual(totalsOracle(events));
  });

  it('the DynamoDB upsert sink keeps a child shard\'s write of a key against its parent\'s late one', async () => {
    const sink = runner.plan.sinks.find((s) => s.name === 'totals')!;
    const table = runner.names.sinkTable(sink);
    const writer = new DynamoUpsertSinkWriter(runner.clients);
    const put = (seq: number, count: number, producer: string, generation?: number) =>
      writer.write(table, 'pk', [{ key: 'zz', item: { user: 'zz', count }, producer, epoch: 99, seq, ...(generation ? { generation } : {}) }]);
    const read = async () => (await runner.clients.doc.send(new GetCommand({ TableName: table, Key: { pk: 'zz' }, ConsistentRead: true }))).Item!;
    await put(7, 16, 'parent');
    await put(2, 19, 'child', 1);
    await put(9, 17, 'parent'); // a zombie of the parent: refused
    expect(await read()).toMatchObject({ count: 19, _sluice_gen: 1, _sluice_producer: 'child' });
    await put(0, 20, 'other'); // same epoch, lower generation: refused too
    expect((await read()).count).toBe(19);
  });

  it('takes over a control table whose one open checkpoint an earlier version recorded as inFlight', async () => {
    const plan = planJob(windowJob(2, true));
    const names = resourceNames(plan, 'legacy-state');
    await provisionJob(plan, names, runner.clients);
    const doc = runner.clients.doc;
    const stale = new Date(Date.now() - 10 * plan.checkpoint.timeoutMs).toISOString();
    await doc.send(new PutCommand({ TableName: names.controlTable, Item: { pk: 'coordinator', sk: 'state', last: 3, inFlight: 3 } }));
    await doc.send(
      new PutCommand({
        TableName: names.controlTable,
        Item: { pk: 'checkpoint', sk: String(3).padStart(12, '0'), status: 'IN_FLIGHT', expected: 6, topology: [2, 2, 2], startedAt: stale, savepoint: false },
      }),
    );
    const c = awsCoordinator(plan, names, runner.clients);
    // the old checkpoint is past its timeout: aborted (its barrier delivered again), and the next one starts
    expect(await c.allocate()).toEqual({ checkpointId: 4 });
    expect((await c.get(3))?.status).toBe('ABORTED');
    const state = (await doc.send(new GetCommand({ TableName: names.controlTable, Key: { pk: 'coordinator', sk: 'state' }, ConsistentRead: true }))).Item!;
    expect(state.inFlight).toBeUndefined();
    expect([...(state.open as Set<number>)]).toEqual([4]);
  });
});
