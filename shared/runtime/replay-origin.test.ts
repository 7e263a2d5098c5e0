/**
 * A replay with no snapshot yet (an instance that has not checkpointed since it started) must notice
 * records trimmed by the stream's retention, as every other replay does: it starts at the first
 * position the instance ever processed, never at whatever the shard still holds.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { createJobStreams, createMemoryPorts } from '../adapters/memory/memory-ports.js';
import { encodeSourceControl } from '../codec/envelope.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import { StageRunner } from './stage-runner.js';

describe('replay with no snapshot', () => {
  it('fails loudly (REPLAY_TRIMMED) when retention trimmed records the instance had processed (replay from the first position)', async () => {
    const j = job('origin', { maxParallelism: 8 });
    j.source<{ n: number }>({ name: 'in', shards: 1 }).map((x) => x.n * 2).sinkTo(collectSink('out'));
    const plan = planJob(j);
    const names = resourceNames(plan);
    const mem = createMemoryPorts({ seed: 5 });
    createJobStreams(mem.kinesis, plan, names);
    const stream = names.streamOf(plan.stages[0]!);
    const shard = mem.kinesis.listShards(stream)[0]!.shardId;
    const put = (n: number) => mem.kinesis.putRecord(stream, { data: new TextEncoder().encode(JSON.stringify({ n })), partitionKey: `p${n}` });
    for (let i = 1; i <= 5; i++) put(i);
    await new StageRunner(j, plan, plan.stages[0]!, names, mem.ports).run(shard, mem.kinesis.records(stream, shard));
    expect(mem.control.lease(`${plan.stages[0]!.id}:${shard}`).snapshot).toBeUndefined();
    // no checkpoint for longer than the retention: the first two records are gone
    mem.kinesis.trim(stream, shard, 2);
    for (let i = 6; i <= 8; i++) put(i);
    const batch = mem.kinesis.records(stream, shard).slice(-3);
    // another environment gets the next batch: it must replay 1–5 before it, and 1–2 are gone
    const other = new StageRunner(j, plan, plan.stages[0]!, names, mem.ports);
    await expect(other.run(shard, batch)).rejects.toMatchObject({ code: 'REPLAY_TRIMMED' });
  });

  it('replays from the first position when nothing was trimmed', async () => {
    const j = job('origin-ok', { maxParallelism: 8 });
    j.source<{ n: number }>({ name: 'in', shards: 1 }).map((x) => x.n * 2).sinkTo(collectSink('out'));
    const plan = planJob(j);
    const names = resourceNames(plan);
    const mem = createMemoryPorts({ seed: 6 });
    createJobStreams(mem.kinesis, plan, names);
    const stream = names.streamOf(plan.stages[0]!);
    const shard = mem.kinesis.listShards(stream)[0]!.shardId;
    const put = (n: number) => mem.kinesis.putRecord(stream, { data: new TextEncoder().encode(JSON.stringify({ n })), partitionKey: `p${n}` });
    for (let i = 1; i <= 5; i++) put(i);
    await new StageRunner(j, plan, plan.stages[0]!, names, mem.ports).run(shard, mem.kinesis.records(stream, shard));
    for (let i = 6; i <= 8; i++) put(i);
    const other = new StageRunner(j, plan, plan.stages[0]!, names, mem.ports);
    const out = await other.run(shard, mem.kinesis.records(stream, shard).slice(-3));
    expect(out).toMatchObject({ cacheHit: false, replayed: 5, processed: 3 });
  });
});

describe('a long replay', () => {
  // A replay cannot be cut short, but it makes durable progress at every barrier it passes: the
  // instance snapshots there as in live processing (and barriers are injected every checkpoint
  // interval, aborted checkpoints included). So an invocation that dies after a long replay leaves
  // the next one a later snapshot, and the next replay is shorter: a retry never starts over.
  it('snapshots at the barriers it replays through, so a retry after a crash replays only past the last one (durable replay progress)', async () => {
    const j = job('progress', { maxParallelism: 8 });
    j.source<{ n: number }>({ name: 'in', shards: 1 }).map((x) => x.n * 2).sinkTo(collectSink('out'));
    const plan = planJob(j);
    const names = resourceNames(plan);
    let crash = false;
    const mem = createMemoryPorts({
      seed: 7,
      faults: {
        before: (op) => {
          if (crash && op === 'control.commitPosition') {
            crash = false;
            throw new Error('the invocation timed out');
          }
        },
      },
    });
    createJobStreams(mem.kinesis, plan, names);
    const stage = plan.stages[0]!;
    const stream = names.streamOf(stage);
    const shard = mem.kinesis.listShards(stream)[0]!.shardId;
    const put = (n: number) => mem.kinesis.putRecord(stream, { data: new TextEncoder().encode(JSON.stringify({ n })), partitionKey: `p${n}` });
    const barrier = (n: number) => {
      mem.control.allocateCheckpoint([1]);
      mem.kinesis.putRecord(stream, { data: encodeSourceControl({ kind: 'barrier', checkpointId: n, topology: [1], savepoint: false, time: n }), partitionKey: 'barrier' });
      mem.control.finishCheckpoint(n, 'ABORTED'); // aborted or not, the barrier is in the log
    };
    for (let i = 1; i <= 3; i++) put(i);
    await new StageRunner(j, plan, stage, names, mem.ports).run(shard, mem.kinesis.records(stream, shard));
    barrier(1);
    for (let i = 4; i <= 6; i++) put(i);
    barrier(2);
    for (let i = 7; i <= 9; i++) put(i);
    const batch = mem.kinesis.records(stream, shard).slice(-1);
    // a new environment replays everything before the batch, then dies before the batch's end
    crash = true;
    await expect(new StageRunner(j, plan, stage, names, mem.ports).run(shard, batch)).rejects.toThrow('timed out');
    expect(mem.control.lease(`${stage.id}:${shard}`).snapshot?.checkpointId).toBe(2);
    const retry = await new StageRunner(j, plan, stage, names, mem.ports).run(shard, batch);
    // only r7 and r8 lie between barrier 2 and the batch
    expect(retry).toMatchObject({ cacheHit: false, replayed: 2, processed: 1 });
  });
});
