/**
 * A coordinator task can die between any two of its writes (a Lambda timeout, a lost response). The
 * next task (allocate, settle, a retry) must finish what it left: commit again a checkpoint marked
 * COMPLETED, abort again one marked ABORTED or one opened with no record, and lift a stop held for a
 * checkpoint no longer open. Each test leaves the store as a task that died at that point would
 * (through the store's own writes) and checks what the next task does.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { decodeSourceControl } from '../codec/envelope.js';
import { memoryCoordinator } from '../adapters/memory/checkpoint-store.js';
import { createJobStreams, createMemoryPorts } from '../adapters/memory/memory-ports.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import { CheckpointInFlightError, JobStoppedError } from './protocol.js';

const T0 = 1_700_000_000_000;

function setup(options: { maxConcurrent?: number } = {}) {
  const j = job('unfinished', { maxParallelism: 8, checkpoint: { timeoutMs: 1_000, ...(options.maxConcurrent ? { maxConcurrent: options.maxConcurrent } : {}) } });
  j.source<{ k: string }>({ name: 'in', shards: 2 }).keyBy((x) => x.k, { parallelism: 3 }).process({ processElement() {} }).sinkTo(collectSink('out'));
  const plan = planJob(j);
  const names = resourceNames(plan, 'test');
  const m = createMemoryPorts();
  createJobStreams(m.kinesis, plan, names);
  const clock = { now: T0 };
  const published: number[] = [];
  const coord = memoryCoordinator(plan, names, m, [{ publish: async (n) => (published.push(n), 1) }], () => new Date(clock.now));
  const src = names.streamOf(plan.stages[0]!);
  /** barrier checkpoint ids each source shard holds, in order */
  const barriers = () => m.kinesis.listShards(src).map((s) => m.kinesis.records(src, s.shardId).map((r) => (decodeSourceControl(r.data) as { checkpointId: number }).checkpointId));
  const ackAll = async (n: number) => {
    for (const id of (await coord.get(n))!.missing!) await m.control.ack(n, id);
  };
  return { coord, m, clock, published, barriers, ackAll, store: coord.ports.store };
}

describe('the next coordinator task finishes what a task that died half-way left', () => {
  it('an allocate that died between opening n and writing its record: n is aborted with a record of today\'s topology, its barrier reaches every source shard, and n + 1 opens', async () => {
    const s = setup();
    await s.coord.allocate();
    await s.coord.inject(1);
    await s.ackAll(1);
    await s.coord.commit(1);
    // the first write of allocate 2 (open it), then the task died
    expect(await s.store.openNext(2, 1, 1, false)).toBe(true);
    expect((await s.coord.allocate()).checkpointId).toBe(3);
    const two = (await s.coord.get(2))!;
    expect(two).toMatchObject({ status: 'ABORTED', topology: [2, 3], expected: 5, reason: expect.stringContaining('its allocate died before writing its record') });
    expect(s.barriers()).toEqual([
      [1, 2],
      [1, 2],
    ]);
    expect((await s.store.readState()).open).toEqual([3]);
  });

  it('a commit that died after marking n COMPLETED: the next allocate publishes n again, records what each instance flushed, closes n and opens n + 1', async () => {
    const s = setup();
    await s.coord.allocate();
    await s.ackAll(1);
    const ck = (await s.coord.get(1))!;
    await s.store.finishCheckpoint(1, { status: 'COMPLETED', endedAt: new Date(T0).toISOString(), durationMs: 0 });
    expect(s.published).toEqual([]);
    expect((await s.coord.allocate()).checkpointId).toBe(2);
    expect(s.published).toEqual([1]);
    const done = (await s.coord.get(1))!;
    expect(done).toMatchObject({ status: 'COMPLETED', startedAt: ck.startedAt, instances: {} });
    expect((await s.store.readState()).open).toEqual([2]);
  });

  it('an abort that died after marking n ABORTED: the next allocate delivers barrier n everywhere and keeps the abort\'s reason', async () => {
    const s = setup();
    await s.coord.allocate();
    await s.store.finishCheckpoint(1, { status: 'ABORTED', endedAt: new Date(T0).toISOString(), durationMs: 0, reason: '"operator stop"' });
    expect(s.barriers()).toEqual([[], []]);
    expect((await s.coord.allocate()).checkpointId).toBe(2);
    expect(s.barriers()).toEqual([[1], [1]]);
    expect(await s.coord.get(1)).toMatchObject({ status: 'ABORTED', reason: '"operator stop"' });
  });

  it('settle finishes the same left-overs with several checkpoints in flight, and an abort of n twice delivers its barrier again', async () => {
    const s = setup({ maxConcurrent: 2 });
    await s.coord.allocate();
    await s.coord.allocate();
    await s.store.finishCheckpoint(1, { status: 'COMPLETED', endedAt: new Date(T0).toISOString(), durationMs: 0 });
    await s.store.finishCheckpoint(2, { status: 'ABORTED', endedAt: new Date(T0).toISOString(), durationMs: 0, reason: 'x' });
    expect(await s.coord.settle()).toEqual({ open: 0, oldest: 0 });
    expect(s.published).toEqual([1]);
    expect(s.barriers()).toEqual([[2], [2]]);
    // an abort retried after it finished: the barrier again (sources ignore one they had), nothing else changes
    await s.coord.abort(2, 'again');
    expect(s.barriers()).toEqual([
      [2, 2],
      [2, 2],
    ]);
    expect(await s.coord.get(2)).toMatchObject({ status: 'ABORTED', reason: 'x' });
  });

  it('an abort of a checkpoint that is neither open nor recorded delivers nothing', async () => {
    const s = setup();
    expect(await s.coord.abort(7, 'late')).toEqual({ checkpointId: 7 });
    expect(await s.coord.get(7)).toBeUndefined();
    expect(s.barriers()).toEqual([[], []]);
    expect((await s.coord.allocate()).checkpointId).toBe(1);
  });

  it('a stop-with-savepoint whose checkpoint was closed before its stop was lifted: the next allocate lifts it and the job goes on', async () => {
    const s = setup();
    await s.coord.requestSavepoint({ id: 'sp', stop: true });
    expect((await s.coord.allocate()).checkpointId).toBe(1);
    expect((await s.store.readState()).stopping).toBe(1);
    // no checkpoint after a stop in flight
    await s.store.finishCheckpoint(1, { status: 'ABORTED', endedAt: new Date(T0).toISOString(), durationMs: 0, reason: 'x' });
    await s.store.closeOpen(1);
    expect((await s.store.readState())).toMatchObject({ open: [], stopping: 1 });
    expect((await s.coord.allocate()).checkpointId).toBe(2);
    expect((await s.store.readState()).stopping).toBeUndefined();
  });

  it('while a stop-with-savepoint is in flight no checkpoint opens; once it completed the job is stopped', async () => {
    const s = setup({ maxConcurrent: 2 });
    await s.coord.requestSavepoint({ id: 'sp', stop: true });
    await s.coord.allocate();
    const inFlight = await s.coord.allocate().catch((e: unknown) => e);
    expect(inFlight).toBeInstanceOf(CheckpointInFlightError);
    expect((inFlight as Error).message).toContain('no checkpoint after the stop-with-savepoint 1');
    expect(await s.coord.getSavepoint('sp')).toMatchObject({ status: 'IN_PROGRESS', checkpointId: 1, stop: true });
    await s.ackAll(1);
    await s.coord.commit(1);
    expect(await s.coord.jobStatus()).toEqual({ stoppedAt: 1 });
    await expect(s.coord.allocate()).rejects.toBeInstanceOf(JobStoppedError);
  });

  it('a savepoint whose checkpoint is aborted fails, and the stop it asked for does not happen', async () => {
    const s = setup();
    await s.coord.requestSavepoint({ id: 'sp', stop: true });
    await s.coord.allocate();
    await s.coord.abort(1, 'timeout');
    expect(await s.coord.getSavepoint('sp')).toMatchObject({ status: 'FAILED', reason: 'checkpoint 1 was aborted' });
    expect(await s.coord.jobStatus()).toEqual({});
    expect((await s.coord.allocate()).checkpointId).toBe(2);
    expect((await s.coord.get(2))!.savepoint).toBe(false);
  });
});
