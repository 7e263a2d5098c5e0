import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../../api/index.js';
import { decodeSourceControl } from '../../codec/envelope.js';
import { planJob } from '../../plan/planner.js';
import { resourceNames } from '../../plan/resources.js';
import { CheckpointInFlightError } from '../../coordinator/protocol.js';
import { memoryCoordinator } from './checkpoint-store.js';
import { createJobStreams, createMemoryPorts } from './memory-ports.js';

describe('the Coordinator on the in-memory twins', () => {
  it('allocates one checkpoint at a time, injects barriers everywhere, completes by identity, commits and aborts', async () => {
    const j = job('coord', { maxParallelism: 8 });
    j.source<{ k: string }>({ name: 'in', shards: 3 }).keyBy((x) => x.k, { parallelism: 2 }).process({ processElement() {} }).sinkTo(collectSink('out'));
    const plan = planJob(j);
    const names = resourceNames(plan, 'test');
    const m = createMemoryPorts();
    createJobStreams(m.kinesis, plan, names);
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

  it('settles several checkpoints in flight: commits the complete ones in order, aborts the timed-out', async () => {
    const j = job('settle', { maxParallelism: 8, checkpoint: { maxConcurrent: 2, timeoutMs: 10_000 } });
    j.source<{ k: string }>({ name: 'in', shards: 1 }).sinkTo(collectSink('out'));
    const plan = planJob(j);
    const names = resourceNames(plan, 'test');
    const m = createMemoryPorts();
    createJobStreams(m.kinesis, plan, names);
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
});
