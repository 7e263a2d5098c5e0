/**
 * A crash at every write of every coordinator task, on the emulated stack (dynalite, kinesis-mock,
 * s3rver over the real wire). Each task's writes must be one atomic step or an idempotent sequence
 * that any later task can finish: whatever write a task dies before or after, the next tasks the
 * workflow runs (a new execution starts with allocate; an inject failure is caught by abort) must
 * (1) deliver every barrier number that is no longer open to every source shard — a channel that
 * skips a barrier number stalls every later alignment —, (2) complete a checkpoint again soon, and
 * (3) never complete one whose ack set is short.
 *
 * The workflow is played here task by task (the real Coordinator's tasks; acks written as instances
 * write them), so every crash point is reached deterministically.
 */
import { GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-kinesis';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { provisionJob } from '../../local/provision.js';
import { createAwsClients, type AwsClients } from '../../shared/adapters/aws/clients.js';
import { DynamoControlStore } from '../../shared/adapters/aws/dynamo-control-store.js';
import { listAllShards } from '../../shared/adapters/aws/kinesis.js';
import { decodeSourceControl } from '../../shared/codec/envelope.js';
import { awsCoordinator } from '../../shared/adapters/aws/coordinator-ports.js';
import type { CoordinatorTaskInput } from '../../shared/coordinator/protocol.js';
import { CHECKPOINT_IN_FLIGHT } from '../../shared/coordinator/protocol.js';
import { planJob } from '../../shared/plan/planner.js';
import { resourceNames } from '../../shared/plan/resources.js';
import { instanceIdOf } from '../../shared/runtime/stage-instance.js';
import { crashCoordinatorWrites, inCoordinatorTask, type CoordinatorWritePoint } from '../../local/chaos/faults.js';
import { chaosJob } from '../chaos/job.js';

type Outcome = 'completed' | 'aborted' | 'crashed' | 'busy';
type Armed = { task: string; write: number; when: 'before' | 'after'; fired: boolean };

describe('coordinator: a crash at every write of every task', () => {
  let emulators: LocalEmulators;
  let clients: AwsClients;

  beforeAll(async () => {
    emulators = await startEmulators();
    clients = createAwsClients({ region: emulators.region, credentials: emulators.credentials, endpoints: emulators.endpoints, maxAttempts: 3 });
  }, 120_000);

  afterAll(async () => {
    await emulators?.stop();
  });

  it('every later task finishes what a crashed one left: barriers never skipped, checkpoints complete again (idempotent task sequences)', async () => {
    const plan = planJob(chaosJob({ variant: 'two-stage', sourceShards: 2, innerShards: 2 }));
    const names = resourceNames(plan, 'crash-points');
    await provisionJob(plan, names, clients);
    let armed: Armed | undefined;
    const reached = new Map<string, number>();
    crashCoordinatorWrites(clients, (w: CoordinatorWritePoint) => {
      reached.set(w.task, Math.max(reached.get(w.task) ?? 0, w.write));
      if (!armed || armed.fired || armed.task !== w.task || armed.write !== w.write) return undefined;
      armed.fired = true;
      return armed.when;
    });
    let clock = Date.parse('2026-01-01T00:00:00Z');
    const coordinator = awsCoordinator(plan, names, clients, [], () => new Date(clock));
    const run = inCoordinatorTask((input: CoordinatorTaskInput) => coordinator.run(input));
    const control = new DynamoControlStore(clients, names.controlTable, names.bucket);
    const members: string[] = [];
    for (const stage of plan.stages) for (const s of await listAllShards(clients, names.streamOf(stage))) members.push(instanceIdOf(stage.id, s.shardId));
    const source = plan.stages.find((s) => s.input.kind === 'source')!;
    const sourceStream = names.streamOf(source);
    const sourceShards = (await listAllShards(clients, sourceStream)).map((s) => s.shardId);
    const barriersIn = new Map<string, Set<number>>(sourceShards.map((s) => [s, new Set<number>()]));
    const iterators = new Map<string, string>();

    /** One pass of the workflow: allocate → inject (caught: abort) → acks → commit, or → abort past the timeout. */
    const round = async (outcome: 'complete' | 'abort'): Promise<Outcome> => {
      let n: number;
      try {
        n = ((await run({ action: 'allocate' })) as { checkpointId: number }).checkpointId;
      } catch (err) {
        if ((err as Error).name === CHECKPOINT_IN_FLIGHT) {
          clock += plan.checkpoint.timeoutMs + 1; // the state machine's retries wait; time passes
          return 'busy';
        }
        return 'crashed'; // the execution fails; a new one starts with allocate
      }
      const abort = async (): Promise<Outcome> => {
        try {
          await run({ action: 'abort', checkpointId: n, reason: 'test' });
          return 'aborted';
        } catch {
          return 'crashed';
        }
      };
      try {
        await run({ action: 'inject', checkpointId: n });
      } catch {
        return abort();
      }
      if (outcome === 'abort') {
        await control.ack(n, members[0]!);
        clock += plan.checkpoint.timeoutMs + 1;
        return abort();
      }
      for (const id of members) await control.ack(n, id);
      try {
        await run({ action: 'commit', checkpointId: n });
        return 'completed';
      } catch {
        return 'crashed'; // the execution dies: nobody retries this commit
      }
    };

    const readBarriers = async () => {
      for (const shard of sourceShards) {
        let it =
          iterators.get(shard) ??
          (await clients.kinesis.send(new GetShardIteratorCommand({ StreamName: sourceStream, ShardId: shard, ShardIteratorType: 'TRIM_HORIZON' }))).ShardIterator!;
        for (;;) {
          const r = await clients.kinesis.send(new GetRecordsCommand({ ShardIterator: it }));
          it = r.NextShardIterator!;
          for (const rec of r.Records ?? []) {
            const c = decodeSourceControl(rec.Data!);
            if (c?.kind === 'barrier') barriersIn.get(shard)!.add(c.checkpointId);
          }
          if (!r.Records?.length) break;
        }
        iterators.set(shard, it);
      }
    };

    const check = async (label: string) => {
      const state = (await clients.doc.send(new GetCommand({ TableName: names.controlTable, Key: { pk: 'coordinator', sk: 'state' }, ConsistentRead: true }))).Item ?? {};
      const last = (state.last as number | undefined) ?? 0;
      const open = new Set([...((state.open as Set<number> | undefined) ?? [])].map(Number));
      await readBarriers();
      for (let m = 1; m <= last; m++) {
        if (open.has(m)) continue;
        for (const shard of sourceShards) expect(barriersIn.get(shard)!.has(m), `${label}: checkpoint ${m} is closed, but its barrier never reached source shard ${shard}`).toBe(true);
      }
      for (const c of await coordinator.list()) {
        if (c.status === 'COMPLETED') expect(c.complete ?? c.acks >= c.expected, `${label}: checkpoint ${c.checkpointId} COMPLETED with ${c.acks} of ${c.expected} acks`).toBe(true);
      }
      if (typeof state.stopping === 'number') expect(open.has(state.stopping), `${label}: a stop held for checkpoint ${state.stopping}, which is no longer open`).toBe(true);
    };

    // a clean start
    expect(await round('complete')).toBe('completed');
    const points: string[] = [];
    for (const [task, outcome] of [
      ['allocate', 'complete'],
      ['inject', 'complete'],
      ['commit', 'complete'],
      ['abort', 'abort'],
    ] as const) {
      for (let write = 1; ; write++) {
        let anyFired = false;
        for (const when of ['before', 'after'] as const) {
          const label = `crash ${when} ${task} write #${write}`;
          armed = { task, write, when, fired: false };
          for (let i = 0; i < 3 && !armed.fired; i++) await round(outcome);
          if (!armed.fired) continue;
          anyFired = true;
          points.push(label);
          await check(label);
          // the following tasks finish what the crash left, and checkpoints complete again
          let completed = false;
          for (let i = 0; i < 6 && !completed; i++) {
            completed = (await round('complete')) === 'completed';
            await check(`${label}, then round ${i + 1}`);
          }
          expect(completed, `${label}: no checkpoint completed in the 6 rounds after it`).toBe(true);
        }
        armed = undefined;
        if (!anyFired) break;
      }
    }
    console.log(`coordinator crash points reached: ${points.length} (${[...reached].map(([t, w]) => `${t}: ${w} writes`).join(', ')})`);
    for (const task of ['allocate', 'inject', 'commit', 'abort']) expect(points.some((p) => p.includes(` ${task} write #`)), `no crash point in ${task}`).toBe(true);
  }, 300_000);

  // A source stream resharded outside the job (an on-demand stream does it by itself): its new
  // shards' instances ack checkpoints that expected the old ones. With completion by the size of the
  // ack set, as many acks as expected complete the checkpoint before an inner instance snapshotted.
  it('completion is by the identities expected at allocate, not by the size of the ack set (ack identities)', async () => {
    const plan = planJob(chaosJob({ variant: 'two-stage', sourceShards: 2, innerShards: 2 }));
    const names = resourceNames(plan, 'ack-identity');
    await provisionJob(plan, names, clients);
    const coordinator = awsCoordinator(plan, names, clients);
    const control = new DynamoControlStore(clients, names.controlTable, names.bucket);
    const { checkpointId: n } = await coordinator.allocate();
    const record = (await coordinator.get(n))!;
    expect(record.missing).toHaveLength(4);
    // four acks, one of an expected source instance and three of shards nobody expected
    const strangers = ['s0:shardId-000000000007', 's0:shardId-000000000008', 's0:shardId-000000000009'];
    const answers = [];
    for (const id of [record.missing![0]!, ...strangers]) answers.push(await control.ack(n, id));
    expect(answers.map((a) => a.completedBy)).toEqual([false, false, false, false]);
    expect((await coordinator.get(n))!.complete).toBe(false);
    const rest = record.missing!.slice(1);
    const last = [];
    for (const id of rest) last.push((await control.ack(n, id)).completedBy);
    expect(last).toEqual([false, false, true]);
    expect((await coordinator.get(n))!.complete).toBe(true);
  }, 120_000);
});
