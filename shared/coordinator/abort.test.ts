/**
 * Abort: the record says why and when, barrier n still reaches every source shard (a channel that
 * skips a barrier number stalls every later alignment), and n leaves the open set last.
 */
import { describe, expect, it } from 'vitest';
import { coordinatorOnTwins, T0 } from './on-twins.test-support.js';

describe('abort', () => {
  it('records the reason as JSON, when it ended and how long it was open', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    s.clock.now = T0 + 750;
    expect(await s.coord.abort(1, { why: 'operator' })).toEqual({ checkpointId: 1 });
    expect(await s.coord.get(1)).toMatchObject({ status: 'ABORTED', reason: '{"why":"operator"}', endedAt: new Date(T0 + 750).toISOString(), durationMs: 750 });
    expect((await s.store.readState()).open).toEqual([]);
  });

  it('says "aborted" when given no reason, and keeps at most 1000 characters of a long one', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.coord.abort(1);
    expect((await s.coord.get(1))!.reason).toBe('"aborted"');
    await s.coord.allocate();
    await s.coord.abort(2, 'x'.repeat(2000));
    expect((await s.coord.get(2))!.reason).toBe(`"${'x'.repeat(999)}`);
  });

  it('delivers barrier n to every open source shard, injected before or not, and only then closes n', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    const closeOpen = s.store.closeOpen.bind(s.store);
    let barriersAtClose: unknown;
    s.store.closeOpen = async (n) => {
      barriersAtClose = s.barriers();
      return closeOpen(n);
    };
    await s.coord.abort(1, 'never injected');
    expect(barriersAtClose).toEqual([[1], [1]]);
    expect(s.m.control.announcedBarriers.map((a) => a.barrier.checkpointId)).toEqual([1]);
    expect((await s.store.readState()).open).toEqual([]);
  });

  it('an abort after the commit changes nothing the commit wrote: the checkpoint and its savepoint stay completed', async () => {
    const s = coordinatorOnTwins();
    await s.coord.requestSavepoint({ id: 'sp' });
    await s.coord.allocate();
    await s.ackAll(1);
    await s.coord.commit(1);
    await s.coord.abort(1, 'late');
    expect(await s.coord.get(1)).toMatchObject({ status: 'COMPLETED' });
    expect((await s.coord.get(1))!.reason).toBeUndefined();
    expect(await s.coord.getSavepoint('sp')).toMatchObject({ status: 'COMPLETED', checkpointId: 1 });
  });

  it('an abort still succeeds when the stall check cannot read the records, and says it could not tell', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    s.store.listCheckpoints = async () => {
      throw new Error('throttled');
    };
    expect(await s.coord.abort(1, 'test')).toEqual({ checkpointId: 1 });
    expect((await s.coord.get(1))!.status).toBe('ABORTED');
    expect(s.logs).toContainEqual(expect.objectContaining({ level: 'WARN', message: 'could not tell whether the job is stalled', checkpointId: 1, error: 'Error: throttled' }));
  });

  it('an ordinary checkpoint, allocated and aborted, leaves the savepoints alone', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.coord.abort(1, 'test');
    expect(await s.coord.listSavepoints()).toEqual([]);
  });
});

