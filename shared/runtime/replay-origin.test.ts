/**
 * A replay with no snapshot yet (an instance that has not checkpointed since it started) must notice
 * records trimmed by the stream's retention, as every other replay does: it starts at the first
 * position the instance ever processed, never at whatever the shard still holds.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { createJobStreams, createMemoryPorts } from '../adapters/memory/memory-ports.js';
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
