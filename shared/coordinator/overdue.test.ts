/**
 * Overdue and settle: what the workflow is told when a progress window passed with n still open,
 * and what settle does with each checkpoint in flight (the rule itself is in timeouts.ts).
 */
import { describe, expect, it } from 'vitest';
import { coordinatorOnTwins, T0, TIMEOUT } from './on-twins.test-support.js';

describe('overdue', () => {
  it('tells the workflow to stop waiting for a checkpoint that does not exist or already ended', async () => {
    const s = coordinatorOnTwins();
    expect(await s.coord.overdue(1)).toEqual({ checkpointId: 1, extend: false });
    await s.coord.allocate();
    await s.ackAll(1);
    await s.coord.commit(1);
    expect(await s.coord.overdue(1)).toEqual({ checkpointId: 1, extend: false });
    await s.coord.allocate();
    await s.coord.abort(2, 'test');
    expect(await s.coord.overdue(2)).toEqual({ checkpointId: 2, extend: false });
  });

  it('a complete checkpoint past every window is waited for again (its commit comes next), not aborted', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.ackAll(1);
    s.clock.now = T0 + 20 * TIMEOUT;
    expect(await s.coord.overdue(1)).toEqual({ checkpointId: 1, extend: true });
    expect((await s.coord.get(1))!.status).toBe('IN_FLIGHT');
  });

  it('waits again while acks arrive; aborts, logs and delivers the barrier once a window passed without one', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    const [a] = (await s.coord.get(1))!.missing!;
    s.clock.now = T0 + TIMEOUT - 1;
    expect(await s.coord.overdue(1)).toEqual({ checkpointId: 1, extend: true });
    await s.m.control.ack(1, a!);
    s.clock.now = T0 + TIMEOUT;
    expect(await s.coord.overdue(1)).toEqual({ checkpointId: 1, extend: true });
    s.clock.now = T0 + 2 * TIMEOUT;
    const reason = 'no acknowledgement for 1000 ms since the last one (window 1000 ms) with 1 of 5 acks';
    expect(await s.coord.overdue(1)).toEqual({ checkpointId: 1, extend: false, reason });
    expect(await s.coord.get(1)).toMatchObject({ status: 'ABORTED', reason: JSON.stringify(reason) });
    expect(s.logs).toContainEqual(expect.objectContaining({ level: 'WARN', message: 'checkpoint aborted', checkpointId: 1, reason }));
    expect(s.barriers()).toEqual([[1], [1]]);
    expect((await s.store.readState()).open).toEqual([]);
  });
});

describe('settle', () => {
  it('aborts an open checkpoint without a record (its allocate died between its writes) and delivers its barrier', async () => {
    const s = coordinatorOnTwins({ maxConcurrent: 2 });
    await s.coord.allocate();
    expect(await s.store.openNext(2, 1, 2, false)).toBe(true);
    expect(await s.coord.settle()).toEqual({ open: 1, oldest: 1 });
    expect(await s.coord.get(2)).toMatchObject({ status: 'ABORTED' });
    expect(s.barriers()).toEqual([[2], [2]]);
    expect((await s.store.readState()).open).toEqual([1]);
  });

  it('keeps the checkpoints still inside their window, oldest first', async () => {
    const s = coordinatorOnTwins({ maxConcurrent: 2 });
    await s.coord.allocate();
    s.clock.now = T0 + TIMEOUT / 2;
    await s.coord.allocate();
    expect(await s.coord.settle()).toEqual({ open: 2, oldest: 1 });
    // 1 is past its window, 2 is not
    s.clock.now = T0 + TIMEOUT;
    expect(await s.coord.settle()).toEqual({ open: 1, oldest: 2 });
    expect(await s.coord.get(1)).toMatchObject({ status: 'ABORTED', reason: expect.stringContaining('no acknowledgement for 1000 ms since it started') });
  });
});
