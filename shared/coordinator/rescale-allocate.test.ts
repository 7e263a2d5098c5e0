/**
 * Allocate through an in-place rescale (rescale.ts): the checkpoint that announces it carries the
 * stage in its record and barriers, none starts while it is pending or while the stream reshards,
 * and the next one counts the new shards.
 */
import { describe, expect, it } from 'vitest';
import { CheckpointInFlightError } from './protocol.js';
import { coordinatorOnTwins } from './on-twins.test-support.js';

describe('allocate during an in-place rescale', () => {
  it('announces the reshard with the next checkpoint, starts none until it completed and the stream resharded, then counts the new shards', async () => {
    const s = coordinatorOnTwins({ maxConcurrent: 2 });
    const stage = s.plan.stages[1]!.id;
    await s.coord.rescales.request(stage, 4);
    expect(await s.coord.allocate()).toEqual({ checkpointId: 1 });
    expect(await s.coord.get(1)).toMatchObject({ reshard: [1], topology: [2, 3] });
    expect(await s.coord.rescales.get()).toMatchObject({ phase: 'draining', checkpointId: 1 });
    await s.coord.inject(1);
    for (const c of s.controls()) expect(c).toEqual([expect.objectContaining({ checkpointId: 1, reshard: [1] })]);
    // a window of two, but nothing may start after the announcing checkpoint until it ends
    const waiting = await s.coord.allocate().catch((e: unknown) => e);
    expect(waiting).toBeInstanceOf(CheckpointInFlightError);
    expect((waiting as Error).message).toBe(`no checkpoint yet: waiting for checkpoint 1 to announce the reshard of ${s.inner}`);
    await s.ackAll(1);
    await s.coord.commit(1);
    const resharding = await s.coord.allocate().catch((e: unknown) => e);
    expect(resharding).toBeInstanceOf(CheckpointInFlightError);
    expect((resharding as Error).message).toBe(`no checkpoint yet: resharding ${s.inner} to 4 shards`);
    expect(s.openShards(s.inner)).toHaveLength(4);
    expect(await s.coord.allocate()).toEqual({ checkpointId: 2 });
    const two = (await s.coord.get(2))!;
    expect(two).toMatchObject({ topology: [2, 4], expected: 6 });
    expect(two.reshard).toBeUndefined();
    expect(await s.coord.rescales.get()).toMatchObject({ phase: 'done' });
  });

  it('announces again with the next checkpoint when the announcing one was aborted', async () => {
    const s = coordinatorOnTwins();
    await s.coord.rescales.request(s.plan.stages[1]!.id, 4);
    await s.coord.allocate();
    await s.coord.abort(1, 'test');
    expect(await s.coord.allocate()).toEqual({ checkpointId: 2 });
    expect(await s.coord.get(2)).toMatchObject({ reshard: [1] });
    expect(await s.coord.rescales.get()).toMatchObject({ phase: 'draining', checkpointId: 2 });
  });

  it('a source stage rescaled in place is not reported as resharded outside the job', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.ackAll(1);
    await s.coord.commit(1);
    await s.coord.rescales.request(s.plan.stages[0]!.id, 3);
    await s.coord.allocate();
    await s.ackAll(2);
    await s.coord.commit(2);
    await expect(s.coord.allocate()).rejects.toBeInstanceOf(CheckpointInFlightError);
    expect(await s.coord.allocate()).toEqual({ checkpointId: 3 });
    expect((await s.coord.get(3))!.topology).toEqual([3, 3]);
    expect(s.telemetry.get('SourceResharded')).toBe(0);
    expect(s.logs.filter((l) => l.level === 'ERROR')).toEqual([]);
  });
});
