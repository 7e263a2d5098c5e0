/**
 * Allocate: which checkpoint opens next, when none may, and what it does first about the open ones
 * an ended execution left (commit a complete one, abort a stuck one, inject a silent one again).
 */
import { describe, expect, it } from 'vitest';
import { CheckpointInFlightError } from './protocol.js';
import { coordinatorOnTwins, T0, TIMEOUT } from './on-twins.test-support.js';

describe('allocate', () => {
  it('numbers checkpoints one after another, never reusing an aborted number, and refuses one while the window is full', async () => {
    const s = coordinatorOnTwins();
    expect(await s.coord.allocate()).toEqual({ checkpointId: 1 });
    const refused = await s.coord.allocate().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(CheckpointInFlightError);
    expect(refused).toMatchObject({ code: 'CHECKPOINT_IN_FLIGHT', retryable: true, message: 'checkpoint 1 is still in flight' });
    await s.coord.abort(1, 'test');
    expect(await s.coord.allocate()).toEqual({ checkpointId: 2 });
    expect(await s.coord.get(2)).toMatchObject({ status: 'IN_FLIGHT', savepoint: false, startedAt: new Date(T0).toISOString(), topology: [2, 3], expected: 5 });
    expect((await s.store.readState()).open).toEqual([2]);
  });

  it('with several in flight, commits a complete one only once every older one is committed (commits go in order)', async () => {
    const s = coordinatorOnTwins({ maxConcurrent: 2, commitTargets: [{ publish: async (n) => (published.push(n), 0) }] });
    const published: number[] = [];
    await s.coord.allocate();
    await s.coord.allocate();
    await s.ackAll(2);
    // 2 is complete but 1 is not: neither commits, and the window stays full
    await expect(s.coord.allocate()).rejects.toBeInstanceOf(CheckpointInFlightError);
    expect((await s.coord.get(2))!.status).toBe('IN_FLIGHT');
    expect(published).toEqual([]);
    await s.ackAll(1);
    expect(await s.coord.allocate()).toEqual({ checkpointId: 3 });
    expect(published).toEqual([1, 2]);
    expect((await s.coord.list()).map((c) => c.status)).toEqual(['COMPLETED', 'COMPLETED', 'IN_FLIGHT']);
  });

  it('commits an open checkpoint whose acks were all in when its execution ended, and says so', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.ackAll(1);
    expect(await s.coord.allocate()).toEqual({ checkpointId: 2 });
    expect((await s.coord.get(1))!.status).toBe('COMPLETED');
    expect(s.logs).toContainEqual(expect.objectContaining({ level: 'WARN', message: 'committing a checkpoint whose acks were all in when its coordinator execution ended', checkpointId: 1 }));
  });

  it('injects a checkpoint with no ack again once timeoutMs passed since it started, not before', async () => {
    const s = coordinatorOnTwins();
    // after an abort the window is 2 × timeoutMs: the silent checkpoint is not aborted at timeoutMs
    await s.coord.abort((await s.coord.allocate()).checkpointId, 'test');
    const start = s.clock.now;
    const { checkpointId: n } = await s.coord.allocate();
    expect(s.barriers()).toEqual([[1], [1]]);
    s.clock.now = start + TIMEOUT - 1;
    await expect(s.coord.allocate()).rejects.toBeInstanceOf(CheckpointInFlightError);
    expect(s.barriers()).toEqual([[1], [1]]);
    s.clock.now = start + TIMEOUT;
    await expect(s.coord.allocate()).rejects.toBeInstanceOf(CheckpointInFlightError);
    expect(s.barriers()).toEqual([
      [1, n],
      [1, n],
    ]);
    expect(s.m.control.announcedBarriers.map((a) => a.barrier.checkpointId)).toContain(n);
    expect((await s.coord.get(n))!.status).toBe('IN_FLIGHT');
  });

  it('does not inject again a checkpoint that got an ack (its barrier is out)', async () => {
    const s = coordinatorOnTwins();
    await s.coord.abort((await s.coord.allocate()).checkpointId, 'test');
    const start = s.clock.now;
    const { checkpointId: n } = await s.coord.allocate();
    await s.coord.inject(n);
    s.clock.now = start + TIMEOUT / 2;
    await s.m.control.ack(n, (await s.coord.get(n))!.missing![0]!);
    s.clock.now = start + 1.2 * TIMEOUT;
    await expect(s.coord.allocate()).rejects.toBeInstanceOf(CheckpointInFlightError);
    expect(s.barriers()).toEqual([
      [1, n],
      [1, n],
    ]);
  });

  it('an allocate whose checkpoint another task aborted between its two writes fails, and the next one opens the number after', async () => {
    const s = coordinatorOnTwins();
    const openNext = s.store.openNext.bind(s.store);
    s.store.openNext = async (n, last, max, stop) => {
      const opened = await openNext(n, last, max, stop);
      // another task finds n open with no record and aborts it
      if (opened) await s.coord.abort(n, 'no record');
      return opened;
    };
    const failed = await s.coord.allocate().catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(CheckpointInFlightError);
    expect((failed as Error).message).toBe('checkpoint 1 was aborted before its allocate wrote its record');
    s.store.openNext = openNext;
    expect(await s.coord.get(1)).toMatchObject({ status: 'ABORTED' });
    expect(s.barriers()).toEqual([[1], [1]]);
    expect(await s.coord.allocate()).toEqual({ checkpointId: 2 });
  });

  it('two allocates racing open the next checkpoint once: the loser is told it is in flight', async () => {
    const s = coordinatorOnTwins();
    const openNext = s.store.openNext.bind(s.store);
    let winner: Promise<unknown> | undefined;
    s.store.openNext = async (n, last, max, stop) => {
      // the other execution opens n first
      s.store.openNext = openNext;
      winner = s.coord.allocate();
      await winner;
      return openNext(n, last, max, stop);
    };
    const loser = await s.coord.allocate().catch((e: unknown) => e);
    expect(await winner).toEqual({ checkpointId: 1 });
    expect(loser).toBeInstanceOf(CheckpointInFlightError);
    expect((await s.store.readState()).open).toEqual([1]);
    expect((await s.coord.list()).map((c) => c.checkpointId)).toEqual([1]);
  });

  it('says which checkpoint a task left half done it finishes, and how it found it', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.ackAll(1);
    await s.store.finishCheckpoint(1, { status: 'COMPLETED', endedAt: new Date(T0).toISOString(), durationMs: 0 });
    await s.store.openNext(2, 1, 2, false);
    expect(await s.coord.allocate()).toEqual({ checkpointId: 3 });
    const finishing = s.logs.filter((l) => l.message === 'finishing a checkpoint a coordinator task left half done');
    expect(finishing).toEqual([expect.objectContaining({ level: 'WARN', checkpointId: 1, status: 'COMPLETED' }), expect.objectContaining({ level: 'WARN', checkpointId: 2, status: 'no record' })]);
  });

  it('an inner stream resharded between checkpoints is not reported as a source resharded outside the job', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.ackAll(1);
    await s.coord.commit(1);
    s.m.kinesis.reshard(s.inner, 4);
    await s.coord.allocate();
    expect((await s.coord.get(2))!.topology).toEqual([2, 4]);
    expect(s.telemetry.get('SourceResharded')).toBe(0);
  });
});

