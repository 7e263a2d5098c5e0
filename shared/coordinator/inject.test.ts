/**
 * Inject: what barrier n carries and where it goes, the topology fixed at its first injection, and
 * an injection that loses the mark to another one listing the shards at the same time.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { memoryCoordinator } from '../adapters/memory/checkpoint-store.js';
import { createJobStreams, createMemoryPorts } from '../adapters/memory/memory-ports.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import { instanceIdOf } from '../runtime/stage-instance.js';
import { coordinatorOnTwins, T0 } from './on-twins.test-support.js';

describe('inject', () => {
  it('refuses a checkpoint that does not exist', async () => {
    const s = coordinatorOnTwins();
    await expect(s.coord.inject(4)).rejects.toMatchObject({ code: 'NO_CHECKPOINT', message: 'checkpoint 4 does not exist' });
  });

  it('puts barrier n, stamped with the clock, into every open source shard and announces it to those shards\' sources; inner streams get none', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    s.clock.now = T0 + 1234;
    expect(await s.coord.inject(1)).toEqual({ checkpointId: 1, shards: 2 });
    const barrier = { kind: 'barrier', checkpointId: 1, topology: [2, 3], savepoint: false, time: T0 + 1234 };
    expect(s.controls()).toEqual([[barrier], [barrier]]);
    expect(s.controls(s.inner).flat()).toEqual([]);
    const [announced] = s.m.control.announcedBarriers;
    expect(announced!.barrier).toEqual(barrier);
    expect([...announced!.instances].sort()).toEqual(s.openShards(s.src).map((x) => instanceIdOf(s.plan.stages[0]!.id, x.shardId)).sort());
    expect((await s.coord.get(1))!.injected).toBe(true);
  });

  it('a savepoint\'s barrier says so', async () => {
    const s = coordinatorOnTwins();
    await s.coord.requestSavepoint({ id: 'sp' });
    await s.coord.allocate();
    await s.coord.inject(1);
    expect(s.controls().flat()).toEqual([expect.objectContaining({ checkpointId: 1, savepoint: true }), expect.objectContaining({ checkpointId: 1, savepoint: true })]);
  });

  it('with several checkpoints in flight, barriers go only to the tails of the shards, none is announced', async () => {
    const s = coordinatorOnTwins({ maxConcurrent: 2 });
    await s.coord.allocate();
    await s.coord.inject(1);
    expect(s.barriers()).toEqual([[1], [1]]);
    expect(s.m.control.announcedBarriers).toEqual([]);
  });

  it('an inner stream resharded between allocate and inject: the injection counts only the source shards again, the inner stage keeps what allocate counted', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    const members = [...(await s.store.membersOf(1))!].sort();
    s.m.kinesis.reshard(s.inner, 4);
    await s.coord.inject(1);
    const ck = (await s.coord.get(1))!;
    expect(ck.topology).toEqual([2, 3]);
    expect([...(await s.store.membersOf(1))!].sort()).toEqual(members);
    expect(s.logs.filter((l) => l.message.includes('was resharded between checkpoint'))).toEqual([]);
  });

  it('a source split between allocate and inject is counted and logged with both topologies', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    s.m.kinesis.reshard(s.src, 3);
    await s.coord.inject(1);
    expect(s.logs).toContainEqual(
      expect.objectContaining({ level: 'WARN', message: "a source stream was resharded between checkpoint 1's allocate and its inject: it counts the shards open now", checkpointId: 1, allocated: [2, 3], injected: [3, 3] }),
    );
    expect((await s.coord.get(1))!.expected).toBe(6);
  });

  it('a source whose shards were replaced by as many others between allocate and inject is logged too', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    s.m.kinesis.reshard(s.src, 3);
    s.m.kinesis.reshard(s.src, 2);
    await s.coord.inject(1);
    expect(s.logs).toContainEqual(expect.objectContaining({ level: 'WARN', checkpointId: 1, allocated: [2, 3], injected: [2, 3] }));
  });

  it('an injection that loses the mark to one that listed a split meanwhile lists again and sends what it lists now', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    const markInjected = s.store.markInjected.bind(s.store);
    s.store.markInjected = async (n, listing) => {
      s.store.markInjected = markInjected;
      // another injection of n lists the source after a split, and dies before its mark
      s.m.kinesis.reshard(s.src, 3);
      const members = [...(await s.store.membersOf(n))!].filter((m) => !m.startsWith(`${s.plan.stages[0]!.id}:`));
      await s.store.fixInjection(n, { members: [...members, ...s.openShards(s.src).map((x) => instanceIdOf(s.plan.stages[0]!.id, x.shardId))], topology: [3, 3] });
      return markInjected(n, listing);
    };
    expect(await s.coord.inject(1)).toEqual({ checkpointId: 1, shards: 3 });
    expect(s.controls().map((c) => c.map((x) => x?.kind === 'barrier' && x.topology))).toEqual([[[3, 3]], [[3, 3]], [[3, 3]]]);
    expect(await s.coord.get(1)).toMatchObject({ injected: true, topology: [3, 3], expected: 6 });
  });

  it('an injection that loses the mark to one that made it keeps that one\'s topology', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    const markInjected = s.store.markInjected.bind(s.store);
    s.store.markInjected = async (n, listing) => {
      s.store.markInjected = markInjected;
      // the other injection listed again and marked n; then the source is split once more
      const fixed = (await s.store.fixInjection(n, { members: [...(await s.store.membersOf(n))!], topology: [2, 3] }))!;
      expect(await markInjected(n, fixed.listing)).toBe(true);
      s.m.kinesis.reshard(s.src, 4);
      return markInjected(n, listing);
    };
    await s.coord.inject(1);
    expect(s.controls().map((c) => c.map((x) => x?.kind === 'barrier' && x.topology))).toEqual([[[2, 3]], [[2, 3]], [[2, 3]], [[2, 3]]]);
    expect(await s.coord.get(1)).toMatchObject({ injected: true, topology: [2, 3], expected: 5 });
  });

  it('gives up, retryably, when every listing is overtaken by another before its mark', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    const markInjected = s.store.markInjected.bind(s.store);
    let tries = 0;
    s.store.markInjected = async (n, listing) => {
      tries++;
      await s.store.fixInjection(n, { members: [...(await s.store.membersOf(n))!], topology: [2, 3] });
      return markInjected(n, listing);
    };
    await expect(s.coord.inject(1)).rejects.toMatchObject({ code: 'TOPOLOGY_MISMATCH', retryable: true, message: 'checkpoint 1: its injections kept listing other source shards' });
    expect(tries).toBe(5);
    expect(s.barriers()).toEqual([[], []]);
  });

  it('once injected, later injections (a retry, the abort) keep the topology its barriers carry', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.coord.inject(1);
    s.m.kinesis.reshard(s.src, 3);
    await s.coord.inject(1);
    await s.coord.abort(1, 'test');
    expect(await s.coord.get(1)).toMatchObject({ topology: [2, 3], expected: 5 });
    for (const c of s.controls()) for (const x of c) expect(x).toMatchObject({ checkpointId: 1, topology: [2, 3] });
  });

  it('with two sources, a split of one between allocate and inject replaces only that source\'s members', async () => {
    const j = job('two', { maxParallelism: 8 });
    const a = j.source<{ k: string }>({ name: 'a', shards: 2 });
    const b = j.source<{ k: string }>({ name: 'b', shards: 2 });
    a.keyBy((x) => x.k, { parallelism: 3 }).process({ processElement() {} }).sinkTo(collectSink('outA'));
    b.sinkTo(collectSink('outB'));
    const plan = planJob(j);
    const names = resourceNames(plan, 'test');
    const m = createMemoryPorts();
    createJobStreams(m.kinesis, plan, names);
    const coord = memoryCoordinator(plan, names, m, [], () => new Date(T0));
    await coord.allocate();
    const before = (await coord.ports.store.membersOf(1))!;
    const [sa, sb] = plan.stages.filter((s) => s.input.kind === 'source');
    m.kinesis.reshard(names.streamOf(sb!), 3);
    await coord.inject(1);
    const after = (await coord.ports.store.membersOf(1))!;
    const openB = m.kinesis.listShards(names.streamOf(sb!)).filter((s) => s.endingSequenceNumber === undefined).map((s) => instanceIdOf(sb!.id, s.shardId));
    expect([...after].sort()).toEqual([...before.filter((x) => !x.startsWith(`${sb!.id}:`)), ...openB].sort());
    expect(after.filter((x) => x.startsWith(`${sa!.id}:`))).toHaveLength(2);
    expect((await coord.get(1))!.expected).toBe(after.length);
    expect(after).toHaveLength(new Set(after).size);
  });
});

