/**
 * Barriers at the source's read position (source-barriers.ts), on the real StageRunner, the real
 * Coordinator and the in-memory twins: a checkpoint does not wait behind a source's unread backlog,
 * and a replay puts barrier n after exactly the record where it first went out.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { memoryCoordinator } from '../adapters/memory/checkpoint-store.js';
import { createJobStreams, createMemoryPorts, withHooks, type MemoryPorts } from '../adapters/memory/memory-ports.js';
import { MemorySourceBarrierStore } from '../adapters/memory/source-barriers.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import type { PortHooks } from '../adapters/memory/memory-faults.js';
import type { RuntimePorts, StoredRecord } from './ports.js';
import { instanceIdOf } from './stage-instance.js';
import { StageRunner } from './stage-runner.js';

const BACKLOG = 500;

function setup() {
  const j = job('srcpos');
  j.source<{ id: number }>({ name: 'in', shards: 1 })
    .map((e) => ({ id: e.id }))
    .sinkTo(collectSink('out'));
  const plan = planJob(j);
  const names = resourceNames(plan);
  const mem: MemoryPorts = createMemoryPorts({ seed: 3 });
  createJobStreams(mem.kinesis, plan, names);
  const stage = plan.stages[0]!;
  const stream = names.streamOf(stage);
  mem.kinesis.putRecords(
    stream,
    Array.from({ length: BACKLOG }, (_, i) => ({ data: new TextEncoder().encode(JSON.stringify({ id: i })), partitionKey: `p${i}` })),
  );
  const [shard] = mem.kinesis.listShards(stream);
  const records: readonly StoredRecord[] = mem.kinesis.records(stream, shard!.shardId);
  const coordinator = memoryCoordinator(plan, names, mem);
  const barriers = new MemorySourceBarrierStore(mem.control);
  const runner = (ports: RuntimePorts) => new StageRunner(j, plan, stage, names, ports, {});
  const id = instanceIdOf(stage.id, shard!.shardId);
  /** the snapshot pointers published for checkpoint n */
  const snapshotsOf = (n: number) => mem.control.published.filter((p) => p.instanceId === id && p.pointer.checkpointId === n).map((p) => p.pointer.replayPoint);
  return { j, plan, mem, coordinator, barriers, runner, shardId: shard!.shardId, records, snapshotsOf };
}

describe('barriers at the source read position', () => {
  it('completes a checkpoint after one batch of a large unread backlog, without reading the rest', async () => {
    const s = setup();
    const { checkpointId: n } = await s.coordinator.allocate();
    await s.coordinator.inject(n);
    await s.runner({ ...s.mem.ports, sourceBarriers: s.barriers }).run(s.shardId, s.records.slice(0, 10));
    // barrier n went out right after the batch's last record, not behind the 490 unread ones
    expect(s.snapshotsOf(n)).toEqual([{ from: 'after', sequenceNumber: s.records[9]!.sequenceNumber }]);
    expect((await s.coordinator.get(n))?.complete).toBe(true);
  });

  it('with barriers at the tail (no announcement read), the same batch takes no checkpoint', async () => {
    const s = setup();
    const { checkpointId: n } = await s.coordinator.allocate();
    await s.coordinator.inject(n);
    await s.runner(s.mem.ports).run(s.shardId, s.records.slice(0, 10));
    expect(s.snapshotsOf(n)).toEqual([]);
    expect((await s.coordinator.get(n))?.complete).toBe(false);
  });

  it('records the position before forwarding: an owner that dies after forwarding barrier n, a takeover with a larger batch replays n after the same record', async () => {
    const s = setup();
    const { checkpointId: n } = await s.coordinator.allocate();
    await s.coordinator.inject(n);
    // environment A forwards barrier n after record 9 and dies before its snapshot is durable
    let crashed = false;
    const crash: PortHooks = {
      before(op) {
        if (op === 'control.publishSnapshot' && !crashed) {
          crashed = true;
          throw new Error('environment lost after forwarding the barrier');
        }
      },
    };
    const a = s.runner({ ...withHooks(s.mem.ports, crash), sourceBarriers: s.barriers });
    await expect(a.run(s.shardId, s.records.slice(0, 10))).rejects.toThrow('environment lost');
    expect(crashed).toBe(true);
    // the mapping retries from the same record in another environment, with more records in the batch
    const b = s.runner({ ...s.mem.ports, sourceBarriers: s.barriers });
    await b.run(s.shardId, s.records.slice(0, 25));
    // barrier n goes out where A forwarded it (after record 9), not at B's read position (record 24)
    expect(s.snapshotsOf(n)).toEqual([{ from: 'after', sequenceNumber: s.records[9]!.sequenceNumber }]);
    expect((await s.coordinator.get(n))?.complete).toBe(true);
  });

  it('a later owner puts no barrier before what an earlier owner read', async () => {
    const s = setup();
    const ports = { ...s.mem.ports, sourceBarriers: s.barriers };
    // A reads records 0..49 with no checkpoint open, emits them and dies before committing its
    // position (a batch the lease covered would return at once: BatchAlreadyProcessed); then n
    // opens and B takes over from record 0
    const dies: PortHooks = {
      before: (op) => {
        if (op === 'control.commitPosition') throw new Error('A dies before its commit');
      },
    };
    await expect(s.runner({ ...withHooks(s.mem.ports, dies), sourceBarriers: s.barriers }).run(s.shardId, s.records.slice(0, 50))).rejects.toThrow('A dies');
    const { checkpointId: n } = await s.coordinator.allocate();
    await s.coordinator.inject(n);
    await s.runner(ports).run(s.shardId, s.records.slice(0, 20));
    // B read only up to 19, but A may have emitted 0..49 in epoch 0: n goes after 49
    await s.runner(ports).run(s.shardId, s.records.slice(20, 60));
    const points = s.snapshotsOf(n);
    expect(points).toHaveLength(1);
    expect(points[0]).toEqual({ from: 'after', sequenceNumber: s.records[49]!.sequenceNumber });
  });
});
