/**
 * A savepoint request is two writes (the savepoint's record, then the request allocate reads). On
 * the emulated stack, a crash before or after each of them — and before the clean-up write when
 * another request is waiting — leaves nothing a retry with the same id cannot finish: the retry
 * succeeds and the next checkpoint becomes that savepoint (savepoint request as an idempotent
 * sequence).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { provisionJob } from '../../local/provision.js';
import { createAwsClients, type AwsClients } from '../../shared/adapters/aws/clients.js';
import { awsCoordinator } from '../../shared/adapters/aws/coordinator-ports.js';
import type { CoordinatorTaskInput } from '../../shared/coordinator/protocol.js';
import { planJob } from '../../shared/plan/planner.js';
import { resourceNames } from '../../shared/plan/resources.js';
import { crashCoordinatorWrites, inCoordinatorTask, type CoordinatorWritePoint } from '../../local/chaos/faults.js';
import { chaosJob } from '../chaos/job.js';

describe('savepoint request: a crash at each write', () => {
  let emulators: LocalEmulators;
  let clients: AwsClients;

  beforeAll(async () => {
    emulators = await startEmulators();
    clients = createAwsClients({ region: emulators.region, credentials: emulators.credentials, endpoints: emulators.endpoints, maxAttempts: 3 });
  }, 120_000);

  afterAll(async () => {
    await emulators?.stop();
  });

  it('a retry with the same id finishes what a crashed request left, and the next checkpoint takes it (savepoint request as an idempotent sequence)', async () => {
    const plan = planJob(chaosJob({ variant: 'two-stage', sourceShards: 1, innerShards: 1 }));
    const names = resourceNames(plan, 'sp-request');
    await provisionJob(plan, names, clients);
    let armed: { write: number; when: 'before' | 'after'; fired: boolean } | undefined;
    crashCoordinatorWrites(clients, (w: CoordinatorWritePoint) => {
      if (w.task !== 'savepoint' || !armed || armed.fired || armed.write !== w.write) return undefined;
      armed.fired = true;
      return armed.when;
    });
    let clock = Date.parse('2026-01-01T00:00:00Z');
    const coordinator = awsCoordinator(plan, names, clients, [], () => new Date((clock += 1_000)));
    const run = inCoordinatorTask((input: CoordinatorTaskInput) => coordinator.run(input));
    const request = (id: string) => run({ action: 'savepoint', savepointId: id });

    /** the next checkpoint takes the request: its savepoint is IN_PROGRESS on it; then it is aborted */
    const takes = async (id: string) => {
      const { checkpointId } = (await run({ action: 'allocate' })) as { checkpointId: number };
      expect((await coordinator.get(checkpointId))?.savepointId, `checkpoint ${checkpointId} is savepoint ${id}`).toBe(id);
      expect(await coordinator.getSavepoint(id)).toMatchObject({ status: 'IN_PROGRESS', checkpointId });
      await run({ action: 'abort', checkpointId, reason: 'test' });
      clock += plan.checkpoint.timeoutMs + 1;
    };

    for (const write of [1, 2]) {
      for (const when of ['before', 'after'] as const) {
        const id = `sp-w${write}-${when}`;
        armed = { write, when, fired: false };
        await expect(request(id), `crash ${when} write #${write}`).rejects.toThrow(/coordinator savepoint/);
        expect(armed.fired).toBe(true);
        armed = undefined;
        await expect(request(id), `retry after a crash ${when} write #${write}`).resolves.toMatchObject({ id, status: 'REQUESTED' });
        await takes(id);
      }
    }

    // another request waits: the refused one dies before deleting its record; once the other was
    // taken, a retry of the refused one finishes it
    await request('sp-first');
    armed = { write: 3, when: 'before', fired: false };
    await expect(request('sp-second')).rejects.toThrow(/coordinator savepoint/);
    expect(armed.fired).toBe(true);
    armed = undefined;
    await expect(request('sp-second')).rejects.toMatchObject({ code: 'SAVEPOINT_PENDING' });
    await takes('sp-first');
    await expect(request('sp-second')).resolves.toMatchObject({ id: 'sp-second', status: 'REQUESTED' });
    await takes('sp-second');

    // an id a checkpoint took already is not requested again
    await expect(request('sp-first')).rejects.toMatchObject({ code: 'SAVEPOINT_EXISTS' });
  }, 240_000);
});
