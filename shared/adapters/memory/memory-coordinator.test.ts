import { describe, expect, it } from 'vitest';
import { collectSink, job, valueState } from '../../api/index.js';
import { decodeSourceControl } from '../../codec/envelope.js';
import { planJob } from '../../plan/planner.js';
import { resourceNames } from '../../plan/resources.js';
import { CheckpointInFlightError } from '../../coordinator/protocol.js';
import { MemoryJobRunner } from '../../testing/memory-job-runner.js';
import { memoryCoordinator } from './checkpoint-store.js';
import { createJobStreams, createMemoryPorts } from './memory-ports.js';

/** plans a job, names its resources and makes its streams on fresh in-memory twins */
function onTwins(j: ReturnType<typeof job>) {
  const plan = planJob(j);
  const names = resourceNames(plan, 'test');
  const m = createMemoryPorts();
  createJobStreams(m.kinesis, plan, names);
  return { plan, names, m };
}

describe('the Coordinator on the in-memory twins', () => {
  it('allocates one checkpoint at a time, injects barriers everywhere, completes by identity, commits and aborts', async () => {
    const j = job('coord', { maxParallelism: 8 });
    j.source<{ k: string }>({ name: 'in', shards: 3 }).keyBy((x) => x.k, { parallelism: 2 }).process({ processElement() {} }).sinkTo(collectSink('out'));
    const { plan, names, m } = onTwins(j);
    const published: number[] = [];
    const coord = memoryCoordinator(plan, names, m, [{ publish: (n) => (published.push(n), 0) }], () => new Date(1_700_000_000_000));
    const { checkpointId } = await coord.allocate();
    expect(checkpointId).toBe(1);
    expect((await coord.get(1))!.topology).toEqual([3, 2]);
    await expect(coord.allocate()).rejects.toBeInstanceOf(CheckpointInFlightError);
    const inj = await coord.inject(1);
    expect(inj.shards).toBe(3);
    const src = names.streamOf(plan.stages[0]!);
    for (const s of m.kinesis.listShards(src)) {
      const recs = m.kinesis.records(src, s.shardId);
      expect(recs).toHaveLength(1);
      expect(decodeSourceControl(recs[0]!.data)).toMatchObject({ kind: 'barrier', checkpointId: 1, topology: [3, 2], savepoint: false });
      expect(coord.ports.injector.injected.find((x) => x.shardId === s.shardId)?.sequenceNumber).toBe(recs[0]!.sequenceNumber);
    }
    // as many acks as expected, from instances nobody expected (a source resharded outside the job):
    // the set is complete only by identity
    for (const id of ['a', 'b', 'c', 'd', 'e']) await m.control.ack(1, id);
    await coord.await(1, 'tok0');
    expect(m.notifier.wasAnswered('tok0')).toBe(false);
    // acks before the token: await answers at once
    for (const stage of plan.stages) for (const s of m.kinesis.listShards(names.streamOf(stage))) await m.control.ack(1, `${stage.id}:${s.shardId}`);
    await coord.await(1, 'tok1');
    expect(m.notifier.wasAnswered('tok1')).toBe(true);
    await coord.commit(1);
    expect(published).toEqual([1]);
    expect((await coord.get(1))!.status).toBe('COMPLETED');
    await coord.allocate();
    await coord.abort(2, 'timeout');
    expect((await coord.get(2))!.status).toBe('ABORTED');
    await expect(coord.commit(2)).rejects.toMatchObject({ code: 'CHECKPOINT_ABORTED' });
    // abort re-delivers barrier 2 to every source shard
    for (const s of m.kinesis.listShards(src)) expect(m.kinesis.records(src, s.shardId)).toHaveLength(2);
    expect((await coord.allocate()).checkpointId).toBe(3);
  });

  it('a source resharded outside the job between a checkpoint’s allocate and its inject: the injection takes the topology and members from the shards it lists and marks the checkpoint injected before any barrier; later injections keep them, and one that died before the mark is redone from a new listing', async () => {
    const j = job('injtopo', { maxParallelism: 8 });
    j.source<{ k: string }>({ name: 'in', shards: 2 }).keyBy((x) => x.k, { parallelism: 2 }).process({ processElement() {} }).sinkTo(collectSink('out'));
    const { plan, names, m } = onTwins(j);
    const coord = memoryCoordinator(plan, names, m, [], () => new Date(1_700_000_000_000));
    const src = names.streamOf(plan.stages[0]!);
    const openIds = (stream: string) => m.kinesis.listShards(stream).filter((s) => s.endingSequenceNumber === undefined).map((s) => s.shardId);
    await coord.allocate();
    expect((await coord.get(1))!.topology).toEqual([2, 2]);
    // someone splits the source between allocate and inject: 2 → 3 open shards
    m.kinesis.reshard(src, 3);
    await coord.inject(1);
    const ck = (await coord.get(1))!;
    expect(ck.topology).toEqual([3, 2]);
    expect(ck.injected).toBe(true);
    const inner = names.streamOf(plan.stages[1]!);
    expect([...ck.missing!].sort()).toEqual([...openIds(src).map((s) => `${plan.stages[0]!.id}:${s}`), ...openIds(inner).map((s) => `${plan.stages[1]!.id}:${s}`)].sort());
    const barriersIn = (shardId: string) => m.kinesis.records(src, shardId).map((r) => decodeSourceControl(r.data));
    for (const s of openIds(src)) expect(barriersIn(s)).toEqual([expect.objectContaining({ kind: 'barrier', checkpointId: 1, topology: [3, 2] })]);
    // split again before the abort's injection: the barriers out count 3, so every later one does too
    m.kinesis.reshard(src, 4);
    await coord.abort(1, 'timeout');
    expect((await coord.get(1))!.topology).toEqual([3, 2]);
    for (const s of openIds(src)) expect(barriersIn(s)).toEqual([expect.objectContaining({ kind: 'barrier', checkpointId: 1, topology: [3, 2] })]);
    // the next checkpoint: an injection that fixed its topology and died before any barrier went
    // out, then a split: the retry counts the shards it lists itself
    await coord.allocate();
    const members = (await m.control.checkpoint(2))!.members!;
    await coord.ports.store.fixInjection(2, { members: [...members], topology: [4, 2] });
    m.kinesis.reshard(src, 5);
    await coord.inject(2);
    expect((await coord.get(2))!.topology).toEqual([5, 2]);
    for (const s of openIds(src)) expect(barriersIn(s)).toEqual([expect.objectContaining({ kind: 'barrier', checkpointId: 2, topology: [5, 2] })]);
  });

  it('settles several checkpoints in flight: commits the complete ones in order, aborts the timed-out', async () => {
    const j = job('settle', { maxParallelism: 8, checkpoint: { maxConcurrent: 2, timeoutMs: 10_000 } });
    j.source<{ k: string }>({ name: 'in', shards: 1 }).sinkTo(collectSink('out'));
    const { plan, names, m } = onTwins(j);
    let clock = 1_700_000_000_000;
    const coord = memoryCoordinator(plan, names, m, [], () => new Date(clock));
    await coord.allocate();
    await coord.allocate();
    await expect(coord.allocate()).rejects.toBeInstanceOf(CheckpointInFlightError);
    const [instance] = (await coord.get(2))!.missing!;
    await m.control.ack(2, instance!);
    expect(await coord.settle()).toEqual({ open: 1, oldest: 1 });
    expect((await coord.get(2))!.status).toBe('COMPLETED');
    clock += 10_001;
    expect(await coord.settle()).toEqual({ open: 0, oldest: 0 });
    expect((await coord.get(1))!.status).toBe('ABORTED');
  });

  it('takes a requested savepoint with the next checkpoint and writes its files from the instances\' state', async () => {
    const j = job('sp', { maxParallelism: 8 });
    const sum = valueState<number>('sum');
    j.source<{ k: string; v: number }>({ name: 'in', shards: 2 })
      .keyBy((x) => x.k, { parallelism: 2 })
      .process({
        state: [sum],
        processElement(x, ctx, out) {
          const n = (ctx.getState(sum).value() ?? 0) + x.v;
          ctx.getState(sum).update(n);
          out.collect({ k: x.k, n });
        },
      })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    r.produce('in', [{ k: 'a', v: 1 }, { k: 'b', v: 2 }, { k: 'a', v: 3 }]);
    await r.drain();
    await r.coordinator.requestSavepoint({ id: 'sp1' });
    await expect(r.coordinator.requestSavepoint({ id: 'sp2' })).rejects.toMatchObject({ code: 'SAVEPOINT_PENDING' });
    const n = await r.checkpoint();
    expect(await r.coordinator.get(n)).toMatchObject({ status: 'COMPLETED', savepoint: true, savepointId: 'sp1' });
    expect(await r.coordinator.getSavepoint('sp1')).toMatchObject({ status: 'COMPLETED', checkpointId: n, rows: 2, location: 'memory://savepoints/sp1/' });
    const manifest = JSON.parse(new TextDecoder().decode(r.coordinator.ports.savepoints.objects.get('savepoints/sp1/manifest.json'))) as { checkpointId: number; rows: number; sources: unknown[] };
    expect(manifest).toMatchObject({ checkpointId: n, rows: 2 });
    expect(manifest.sources).toHaveLength(2);
    // the request was taken: the next checkpoint is an ordinary one
    expect((await r.coordinator.get(await r.checkpoint()))!.savepoint).toBe(false);
  });
});
