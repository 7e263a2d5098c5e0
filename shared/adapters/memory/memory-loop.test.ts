/**
 * The coordinator loop (shared/coordinator/loop.ts) on the in-memory twins: a job run by
 * MemoryJobRunner, its checkpoints taken through the loop's tasks, the idle parking and the wake.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../../api/index.js';
import { COORDINATOR_TIMEOUT_MS, CoordinatorLoop, EXPRESS_LIMIT_MS, ROUND } from '../../coordinator/loop.js';
import { CoordinatorWake, LOOP_ERRORS } from '../../coordinator/wake.js';
import { MemoryJobRunner } from '../../testing/memory-job-runner.js';
import { memoryLoopPorts, type MemoryWorkflow } from './checkpoint-store.js';

describe('the coordinator loop on the in-memory twins', () => {
  it('checkpoints through begin/await/commit, parks while no input waits, and the first input wakes it', async () => {
    const j = job('loop', { maxParallelism: 8 });
    j.source<{ k: string }>({ name: 'in', shards: 2 }).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    const ports = memoryLoopPorts(r.mem, r.coordinator.ports.store);
    const loop = new CoordinatorLoop({ plan: r.plan, names: r.names, ports, run: (input) => r.coordinator.run(input), idle: true, pauseMs: 1000 });
    const workflow = ports.workflow as MemoryWorkflow;

    r.produce('in', [{ k: 'a' }, { k: 'b' }, { k: 'c' }]);
    const begun = (await loop.run({ action: 'begin', taskToken: 'begin-1' })) as { ckpt: { checkpointId: number } };
    expect(begun).toEqual({ iteration: 1, ckpt: { checkpointId: 1 } });
    expect(r.mem.notifier.succeeded.map((s) => s.taskToken)).toEqual(['begin-1']);
    await loop.run({ action: 'await', checkpointId: 1, taskToken: 'acks-1' });
    await r.runUntilIdle();
    expect(r.mem.notifier.wasAnswered('acks-1')).toBe(true); // the last ack woke the workflow
    await loop.run({ action: 'commit', checkpointId: 1, taskToken: 'commit-1' });
    expect((await r.coordinator.get(1))!.status).toBe('COMPLETED');
    expect(await ports.store.loopState()).toEqual({}); // the commit marker is gone
    expect(r.published('out')).toHaveLength(3);

    // nothing after the last committed barrier: the token is parked, no checkpoint starts
    expect(await loop.run({ action: 'begin', taskToken: 'begin-2' })).toEqual({ idle: true });
    expect(await ports.store.idleToken()).toBe('begin-2');
    expect((await ports.store.readState()).last).toBe(1);

    // a source stage that saw input wakes it: exactly one waker fails the parked token (park-wake.test.ts: the batches)
    r.produce('in', [{ k: 'd' }]);
    const wake = new CoordinatorWake(ports.store, workflow);
    expect(await wake.afterBatch('s0:a', { token: 'begin-2' })).toBe(true);
    expect(await wake.afterBatch('s0:b', { token: 'begin-2' })).toBe(false);
    expect(workflow.failed).toEqual([{ taskToken: 'begin-2', error: LOOP_ERRORS.inputArrived, cause: 'a source stage received input' }]);
    expect(await loop.run({ action: 'begin', taskToken: 'begin-3' })).toEqual({ iteration: 1, ckpt: { checkpointId: 2 } });
  });

  it('runs Express rounds without task tokens: next allocates, poll reads the acks, commit says whether the round has time left', async () => {
    const j = job('rounds', { maxParallelism: 8 });
    j.source<{ k: string }>({ name: 'in', shards: 2 }).sinkTo(collectSink('out'));
    // one clock for the coordinator's records and the loop
    let t = Date.parse('2026-12-01T12:00:00Z');
    const r = new MemoryJobRunner(j, { now: () => t });
    const ports = memoryLoopPorts(r.mem, r.coordinator.ports.store);
    const loop = new CoordinatorLoop({ plan: r.plan, names: r.names, ports, run: (input) => r.coordinator.run(input), idle: true, pauseMs: 1000, now: () => new Date(t) });
    const round = new Date(t).toISOString();

    r.produce('in', [{ k: 'a' }, { k: 'b' }]);
    expect(await loop.run({ action: 'next', iteration: 0, roundStartedAt: round })).toEqual({ iteration: 1, ckpt: { checkpointId: 1 }, end: 'allocated' });
    expect(await loop.run({ action: 'poll', checkpointId: 1, roundStartedAt: round })).toEqual({ acked: false, aborted: false, late: false });
    await r.runUntilIdle();
    expect(await loop.run({ action: 'poll', checkpointId: 1, roundStartedAt: round })).toEqual({ acked: true, aborted: false, late: false });
    expect(await loop.run({ action: 'commit', checkpointId: 1, roundStartedAt: round })).toMatchObject({ checkpointId: 1, more: true });
    expect(r.published('out')).toHaveLength(2);
    // a completed checkpoint reads as acked: a duplicate round commits it again, which publishes nothing
    expect(await loop.run({ action: 'poll', checkpointId: 1, roundStartedAt: round })).toMatchObject({ acked: true });
    expect(await loop.run({ action: 'commit', checkpointId: 1, roundStartedAt: round })).toMatchObject({ published: 0 });
    expect(r.published('out')).toHaveLength(2);

    // no input since the last committed barrier: the round ends and leaves parking to the Standard execution
    expect(await loop.run({ action: 'next', iteration: 1, roundStartedAt: round })).toEqual({ iteration: 1, ckpt: { checkpointId: 1 }, end: 'idle' });
    expect(await ports.store.idleToken()).toBeUndefined();

    // out of time: no allocation after ROUND.allocateForMs, no more waiting after ROUND.pollForMs,
    // which leaves a commit begun then the coordinator function's whole timeout inside the round's five minutes
    expect(ROUND.allocateForMs).toBeLessThan(ROUND.pollForMs);
    expect(ROUND.pollForMs + COORDINATOR_TIMEOUT_MS).toBeLessThanOrEqual(EXPRESS_LIMIT_MS);
    r.produce('in', [{ k: 'c' }]);
    const old = (ms: number) => new Date(t - ms).toISOString();
    expect(await loop.run({ action: 'commit', checkpointId: 1, roundStartedAt: old(ROUND.allocateForMs) })).toMatchObject({ more: false });
    expect(await loop.run({ action: 'next', iteration: 1, roundStartedAt: old(ROUND.allocateForMs) })).toEqual({ iteration: 1, ckpt: { checkpointId: 1 }, end: 'budget' });
    expect((await ports.store.readState()).last).toBe(1);
    // an operator stopped the coordinator: a round still running allocates nothing more
    await ports.store.setOperatorStop(new Date(t).toISOString());
    expect(await loop.run({ action: 'next', iteration: 1, roundStartedAt: round })).toEqual({ iteration: 1, ckpt: { checkpointId: 1 }, end: 'budget' });
    await ports.store.setOperatorStop(undefined);
    expect(await loop.run({ action: 'next', iteration: 1, roundStartedAt: round })).toEqual({ iteration: 2, ckpt: { checkpointId: 2 }, end: 'allocated' });
    expect(await loop.run({ action: 'poll', checkpointId: 2, roundStartedAt: old(ROUND.pollForMs) })).toEqual({ acked: false, aborted: false, late: true });

    // a whole progress window without an ack: the coordinator's own rule aborts it (timeouts.ts), and the round goes on
    t += r.plan.checkpoint.timeoutMs + 1000;
    expect(await loop.run({ action: 'poll', checkpointId: 2, roundStartedAt: new Date(t).toISOString() })).toEqual({ acked: false, aborted: true, late: false });
    expect((await r.coordinator.get(2))!.status).toBe('ABORTED');
  });
});
