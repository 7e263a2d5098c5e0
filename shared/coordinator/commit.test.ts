/**
 * Commit: marks n COMPLETED, publishes what transactional sinks staged below n while n is still
 * open, says the job finished only after that, collects garbage when due, and closes n last. A
 * retry after any of those writes does the rest again without changing what was written.
 */
import { describe, expect, it } from 'vitest';
import { coordinatorOnTwins, snapshotAndAck, T0 } from './on-twins.test-support.js';

describe('commit', () => {
  it('refuses a checkpoint that does not exist, or one that was aborted', async () => {
    const s = coordinatorOnTwins();
    await expect(s.coord.commit(1)).rejects.toMatchObject({ code: 'NO_CHECKPOINT', message: 'checkpoint 1 does not exist' });
    await s.coord.allocate();
    await s.coord.abort(1, 'test');
    await expect(s.coord.commit(1)).rejects.toMatchObject({ code: 'CHECKPOINT_ABORTED', message: 'checkpoint 1 was aborted and cannot commit' });
  });

  it('marks n COMPLETED with its duration, sums what every sink published, and publishes while n is still open and the job not yet finished', async () => {
    const seen: Array<{ target: string; n: number; status?: string; open: readonly number[]; finishedAt?: number }> = [];
    const observe = (target: string, count: number) => ({
      publish: async (n: number) => {
        const state = await s.store.readState();
        seen.push({ target, n, status: (await s.coord.get(n))?.status, open: state.open, ...(state.finishedAt !== undefined ? { finishedAt: state.finishedAt } : {}) });
        return count;
      },
    });
    const s = coordinatorOnTwins({ commitTargets: [observe('a', 2), observe('b', 3)] });
    await s.coord.allocate();
    for (const id of (await s.coord.get(1))!.missing!) await snapshotAndAck(s.m, 1, id, { finished: true });
    s.clock.now = T0 + 400;
    expect(await s.coord.commit(1)).toEqual({ checkpointId: 1, published: 5, deltasDeleted: 0 });
    expect(seen).toEqual([
      { target: 'a', n: 1, status: 'COMPLETED', open: [1] },
      { target: 'b', n: 1, status: 'COMPLETED', open: [1] },
    ]);
    expect(await s.coord.get(1)).toMatchObject({ status: 'COMPLETED', endedAt: new Date(T0 + 400).toISOString(), durationMs: 400 });
    expect((await s.coord.get(1))!.reason).toBeUndefined();
    expect(await s.store.readState()).toMatchObject({ open: [], finishedAt: 1 });
  });

  it('is idempotent: a late retry publishes again (sinks publish what is left) and changes nothing the first wrote', async () => {
    const published: number[] = [];
    const s = coordinatorOnTwins({ commitTargets: [{ publish: async (n) => (published.push(n), 1) }] });
    await s.coord.allocate();
    const ids = (await s.coord.get(1))!.missing!;
    for (const id of ids) await snapshotAndAck(s.m, 1, id, { bytes: 10, keys: 1 });
    s.clock.now = T0 + 100;
    await s.coord.commit(1);
    const first = (await s.coord.get(1))!;
    expect(first).toMatchObject({ durationMs: 100, bytes: 10 * ids.length, keys: ids.length });
    // the retry comes while checkpoint 2 runs, one instance's snapshot already at 2
    await s.coord.allocate();
    await snapshotAndAck(s.m, 2, ids[0]!, { bytes: 99, keys: 9 });
    s.clock.now = T0 + 900;
    expect(await s.coord.commit(1)).toEqual({ checkpointId: 1, published: 1, deltasDeleted: 0 });
    expect(published).toEqual([1, 1]);
    expect(await s.coord.get(1)).toEqual(first);
    expect((await s.store.readState()).open).toEqual([2]);
  });

  it('collects garbage when a savepoint commits, even between the periodic collections', async () => {
    const s = coordinatorOnTwins();
    const complete = async () => {
      const { checkpointId: n } = await s.coord.allocate();
      for (const id of (await s.coord.get(n))!.missing!) await snapshotAndAck(s.m, n, id);
      return s.coord.commit(n);
    };
    // retained: 3 (the default); checkpoints 1–4 in the same minute, none of them a sixth
    for (let i = 0; i < 4; i++) expect((await complete()).deltasDeleted).toBe(0);
    expect(s.m.control.deltaKeys()).toHaveLength(4 * 5);
    await s.coord.requestSavepoint({ id: 'sp' });
    // 1 and 2 fall out of the retained window
    expect((await complete()).deltasDeleted).toBe(2 * 5);
    expect(s.m.control.deltaKeys()).toHaveLength(3 * 5);
  });

  it('collects garbage at the periodic checkpoint', async () => {
    const s = coordinatorOnTwins();
    // the default pause is 10 s: every sixth checkpoint collects
    for (let n = 1; n <= 6; n++) {
      await s.coord.allocate();
      for (const id of (await s.coord.get(n))!.missing!) await snapshotAndAck(s.m, n, id);
      expect((await s.coord.commit(n)).deltasDeleted).toBe(n === 6 ? 3 * 5 : 0);
    }
  });

  it('records each instance\'s bytes and keys only when its snapshot states them as numbers', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    const [a, b, ...rest] = (await s.coord.get(1))!.missing!;
    await snapshotAndAck(s.m, 1, a!, { bytes: 10, keys: 2 });
    await snapshotAndAck(s.m, 1, b!, { bytes: '10', keys: null });
    for (const id of rest) await snapshotAndAck(s.m, 1, id);
    await s.coord.commit(1);
    const ck = (await s.coord.get(1))!;
    const replay = { replayPoint: { from: 'after', sequenceNumber: '1' }, delta: expect.objectContaining({ store: 'inline' }) };
    expect(ck.instances![a!]).toStrictEqual({ bytes: 10, keys: 2, ...replay });
    expect(ck.instances![b!]).toStrictEqual(replay);
    expect([ck.bytes, ck.keys]).toEqual([10, 2]);
  });

  it('a bounded job does not finish on snapshots of an older checkpoint that said finished', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    const ids = (await s.coord.get(1))!.missing!;
    for (const [i, id] of ids.entries()) await snapshotAndAck(s.m, 1, id, { finished: i > 0 });
    await s.coord.commit(1);
    await s.coord.allocate();
    // the finished ones ack 2 with nothing new to snapshot; the last one snapshots 2, finished
    for (const id of ids.slice(1)) await s.m.control.ack(2, id);
    await snapshotAndAck(s.m, 2, ids[0]!, { finished: true });
    await s.coord.commit(2);
    expect(await s.coord.jobStatus()).toEqual({});
  });

  it('a savepoint\'s commit that died after recording the instances: the retry still writes the savepoint; ordinary commits write none', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.ackAll(1);
    await s.coord.commit(1);
    expect(await s.coord.listSavepoints()).toEqual([]);
    await s.coord.requestSavepoint({ id: 'sp' });
    await s.coord.allocate();
    for (const id of (await s.coord.get(2))!.missing!) await snapshotAndAck(s.m, 2, id);
    await s.store.finishCheckpoint(2, { status: 'COMPLETED', endedAt: new Date(T0).toISOString(), durationMs: 0 });
    await s.store.recordInstances(2, {}, 0, 0);
    await s.coord.commit(2);
    expect(await s.coord.listSavepoints()).toEqual([expect.objectContaining({ id: 'sp', status: 'COMPLETED', checkpointId: 2 })]);
  });
});

describe('garbage collection at a commit', () => {
  const deltaCheckpoints = (s: ReturnType<typeof coordinatorOnTwins>) => [...new Set(s.m.control.deltaKeys().map((k) => Number(/(\d+)(\.bin)?$/.exec(k)![1])))].sort((a, b) => a - b);

  it('keeps the deltas of the last `retained` completed checkpoints, not counting aborted ones', async () => {
    const s = coordinatorOnTwins();
    for (let n = 1; n <= 5; n++) {
      await s.coord.allocate();
      if (n === 4) {
        await s.coord.abort(n, 'test');
        continue;
      }
      for (const id of (await s.coord.get(n))!.missing!) await snapshotAndAck(s.m, n, id);
      await s.coord.commit(n);
    }
    expect(deltaCheckpoints(s)).toEqual([1, 2, 3, 5]);
    expect(await s.coord.gc()).toEqual({ deleted: 5, kept: 15 });
    expect(deltaCheckpoints(s)).toEqual([2, 3, 5]);
  });

  it('keeps a delta written for the checkpoint in flight before its snapshot is published', async () => {
    const s = coordinatorOnTwins();
    for (let n = 1; n <= 4; n++) {
      await s.coord.allocate();
      for (const id of (await s.coord.get(n))!.missing!) await snapshotAndAck(s.m, n, id);
      await s.coord.commit(n);
    }
    await s.coord.allocate();
    const [id] = (await s.coord.get(5))!.missing!;
    await s.m.control.writeDelta(id!, 5, new Uint8Array(8));
    await s.coord.gc();
    expect(deltaCheckpoints(s)).toEqual([2, 3, 4, 5]);
  });
});
