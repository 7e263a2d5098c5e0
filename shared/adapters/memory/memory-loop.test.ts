/**
 * The coordinator loop (shared/coordinator/loop.ts) on the in-memory twins: a job run by
 * MemoryJobRunner, its checkpoints taken through the loop's tasks, the idle parking and the wake.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../../api/index.js';
import { CoordinatorLoop } from '../../coordinator/loop.js';
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

    // a source stage that saw input wakes it: exactly one waker fails the parked token
    r.produce('in', [{ k: 'd' }]);
    const wake = new CoordinatorWake(ports.store, workflow);
    expect(await wake.afterInput()).toBe(true);
    expect(await wake.afterInput()).toBe(false);
    expect(workflow.failed).toEqual([{ taskToken: 'begin-2', error: LOOP_ERRORS.inputArrived, cause: 'a source stage received input' }]);
    expect(await loop.run({ action: 'begin', taskToken: 'begin-3' })).toEqual({ iteration: 1, ckpt: { checkpointId: 2 } });
  });
});
