/**
 * What a commit writes besides the status: what each instance flushed (as `sluice checkpoints`
 * shows it), the end of a bounded job, deltas no retained checkpoint needs, and the alarms an abort
 * raises. Instances are played by the test through the control store's own calls (take over the
 * lease, write the delta, publish the snapshot, ack), as a stage instance makes them.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { memoryCoordinator } from '../adapters/memory/checkpoint-store.js';
import { createJobStreams, createMemoryPorts, type MemoryPorts } from '../adapters/memory/memory-ports.js';
import { encodeDelta } from '../codec/snapshot.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import type { Telemetry } from '../runtime/ports.js';
import { CHECKPOINT_HISTORY, type Coordinator } from './coordinator.js';
import { JobStoppedError } from './protocol.js';

const T0 = 1_700_000_000_000;

class RecordedTelemetry implements Telemetry {
  readonly counts = new Map<string, number>();
  readonly logs: Array<{ level: string; message: string; fields: Record<string, unknown> }> = [];
  count(name: string, value = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + value);
  }
  timing(): void {}
  log(level: 'debug' | 'info' | 'warn' | 'error', message: string, fields: Record<string, unknown> = {}): void {
    this.logs.push({ level, message, fields });
  }
}

function setup(options: { retained?: number; shards?: number } = {}) {
  const j = job('books', { maxParallelism: 8, checkpoint: { timeoutMs: 1_000, ...(options.retained ? { retained: options.retained } : {}) } });
  j.source<{ k: string }>({ name: 'in', shards: options.shards ?? 2 }).keyBy((x) => x.k, { parallelism: 2 }).process({ processElement() {} }).sinkTo(collectSink('out'));
  const plan = planJob(j);
  const names = resourceNames(plan, 'test');
  const m = createMemoryPorts();
  createJobStreams(m.kinesis, plan, names);
  const clock = { now: T0 };
  const telemetry = new RecordedTelemetry();
  const coord = memoryCoordinator(plan, names, m, [], () => new Date(clock.now), { telemetry });
  return { coord, m, clock, telemetry, plan, names };
}

const fences = new WeakMap<MemoryPorts, Map<string, number>>();

/** Instance `id` snapshots checkpoint n (a delta of `size` bytes, `meta` as it publishes it) and acks n. */
async function snapshot(m: MemoryPorts, n: number, id: string, meta: Record<string, unknown>, size = 16): Promise<void> {
  let f = fences.get(m);
  if (!f) fences.set(m, (f = new Map()));
  const fence = f.get(id) ?? (await m.control.takeOver(id, 0)).fence;
  f.set(id, fence);
  const bytes = encodeDelta([], { timers: [], channels: [], watermark: null, processingTime: n, source: null, ended: ['x'.repeat(size)] });
  const delta = await m.control.writeDelta(id, n, bytes);
  await m.control.publishSnapshot(id, fence, { checkpointId: n, replayPoint: { kind: 'after', sequenceNumber: String(n) } as never, delta, meta });
  await m.control.ack(n, id);
}

async function complete(coord: Coordinator, m: MemoryPorts, meta: (id: string, i: number) => Record<string, unknown> = () => ({}), size = 16): Promise<number> {
  const { checkpointId: n } = await coord.allocate();
  const ids = (await coord.get(n))!.missing!;
  for (const [i, id] of ids.entries()) await snapshot(m, n, id, meta(id, i), size);
  await coord.commit(n);
  return n;
}

describe('a commit records what the checkpoint holds', () => {
  it('each instance\'s bytes, keys, replay point and delta, and their sums, on the checkpoint\'s record', async () => {
    const { coord, m } = setup();
    const n = await complete(coord, m, (_, i) => (i === 0 ? { finished: false } : { bytes: 100 * i, keys: i }));
    const ck = (await coord.get(n))!;
    const ids = Object.keys(ck.instances!).sort();
    expect(ids).toHaveLength(4);
    const stats = Object.values(ck.instances!);
    expect(stats.filter((s) => s.bytes === undefined && s.keys === undefined)).toHaveLength(1);
    expect(ck.bytes).toBe(100 + 200 + 300);
    expect(ck.keys).toBe(1 + 2 + 3);
    for (const s of stats) expect(s).toMatchObject({ replayPoint: { kind: 'after', sequenceNumber: String(n) }, delta: { store: 'inline' } });
  });

  it('an instance whose snapshot is of an older checkpoint is not counted for this one', async () => {
    const { coord, m } = setup();
    await complete(coord, m, () => ({ bytes: 10, keys: 1 }));
    const { checkpointId: n } = await coord.allocate();
    const ids = (await coord.get(n))!.missing!;
    // all ack n, but the last one's snapshot pointer still names checkpoint 1 (it had nothing new to say)
    for (const id of ids.slice(0, -1)) await snapshot(m, n, id, { bytes: 7, keys: 2 });
    await m.control.ack(n, ids.at(-1)!);
    await coord.commit(n);
    const ck = (await coord.get(n))!;
    expect(Object.keys(ck.instances!).sort()).toEqual(ids.slice(0, -1).sort());
    expect([ck.bytes, ck.keys]).toEqual([7 * 3, 2 * 3]);
  });
});

describe('a bounded job finishes with the checkpoint every instance saw its end in', () => {
  it('finishes when every snapshot says finished, and takes no checkpoint after it', async () => {
    const { coord, m, telemetry } = setup();
    await complete(coord, m, (_, i) => ({ finished: i !== 3 }));
    expect(await coord.jobStatus()).toEqual({});
    const n = await complete(coord, m, () => ({ finished: true }));
    expect(await coord.jobStatus()).toEqual({ stoppedAt: n, finishedAt: n });
    expect(telemetry.logs).toContainEqual(expect.objectContaining({ level: 'info', message: 'the job read all of its bounded input and finished', fields: { checkpointId: n } }));
    await expect(coord.allocate()).rejects.toBeInstanceOf(JobStoppedError);
  });

  it('does not finish while an expected instance has no snapshot of that checkpoint', async () => {
    const { coord, m } = setup();
    const { checkpointId: n } = await coord.allocate();
    const ids = (await coord.get(n))!.missing!;
    await snapshot(m, n, ids[0]!, { finished: true });
    await snapshot(m, n, ids[1]!, { finished: true });
    await snapshot(m, n, ids[2]!, { finished: true });
    // the fourth acks without a snapshot of n (the completion is by the ack set; finishing needs every snapshot)
    await m.control.ack(n, ids[3]!);
    await coord.commit(n);
    expect(await coord.jobStatus()).toEqual({});
  });
});

describe('garbage collection of deltas and records', () => {
  it('keeps the deltas of the last `retained` completed checkpoints and deletes older ones, inline and as objects', async () => {
    const { coord, m } = setup({ retained: 2 });
    // deltas over the inline limit go to objects: alternate the two
    for (let i = 0; i < 5; i++) await complete(coord, m, () => ({}), i % 2 ? 10 * 1024 : 16);
    const before = m.control.deltaKeys().length;
    expect(before).toBeGreaterThan(0);
    const r = await coord.gc();
    // 4 instances: checkpoints 4 and 5 kept (5 is also every instance's pointer)
    expect(m.control.deltaKeys()).toHaveLength(8);
    expect(r).toEqual({ deleted: before - 8, kept: 8 });
    const left = m.control.deltaKeys().map((k) => Number(/(\d+)(\.bin)?$/.exec(k)![1]));
    expect([...new Set(left)].sort()).toEqual([4, 5]);
    expect(left.filter((x) => x === 4)).toHaveLength(4);
  });

  it('lists the delta objects of all the job\'s instances in one listing, and never deletes a key under the prefix that is no instance\'s delta', async () => {
    const { coord, m } = setup({ retained: 1, shards: 3 });
    const listings: Array<readonly string[]> = [];
    const list = coord.ports.deltas.listByInstance.bind(coord.ports.deltas);
    coord.ports.deltas.listByInstance = async (ids) => (listings.push(ids), list(ids));
    for (let i = 0; i < 3; i++) await complete(coord, m, () => ({}), 10 * 1024);
    await coord.gc();
    for (let i = 0; i < 2; i++) await complete(coord, m, () => ({}), 10 * 1024);
    const stray = ['deltas/notes.txt', 'deltas/other/shardId-000000000000/000000000001.bin'];
    for (const id of listings[0]!) stray.push(`deltas/${id.replace(':', '/')}/.bin`, `deltas/${id.replace(':', '/')}/000000000001.bin.tmp`);
    for (const key of stray) m.control.putDeltaObject(key, new Uint8Array(1));
    listings.length = 0;
    const r = await coord.gc();
    // 3 source shards and 2 keyed instances: one listing for all 5
    expect(listings).toHaveLength(1);
    expect(listings[0]).toHaveLength(5);
    expect(r).toEqual({ deleted: 2 * 5, kept: 5 });
    for (const key of stray) expect(m.control.deltaKeys()).toContain(key);
  });

  it('trims checkpoint records beyond the history, but keeps savepoints and retained ones', async () => {
    const { coord, m } = setup({ retained: 1 });
    await coord.requestSavepoint({ id: 'early' });
    const sp = await complete(coord, m);
    for (let i = 0; i < CHECKPOINT_HISTORY + 3; i++) {
      await coord.allocate();
      await coord.abort(sp + 1 + i, 'test');
    }
    const last = await complete(coord, m);
    await coord.gc();
    const ids = (await coord.list()).map((c) => c.checkpointId);
    expect(ids).toContain(sp);
    expect(ids).toContain(last);
    expect(ids.length).toBe(CHECKPOINT_HISTORY + 1);
    expect(ids.filter((x) => x !== sp)[0]).toBe(last - CHECKPOINT_HISTORY + 1);
  });
});

describe('the alarms a coordinator raises', () => {
  it('aborts in a row that an instance never acked name a stall: metric CheckpointStalled and the instance in the log', async () => {
    const { coord, m, telemetry } = setup();
    for (let i = 0; i < 3; i++) {
      const { checkpointId: n } = await coord.allocate();
      const ids = (await coord.get(n))!.missing!;
      for (const id of ids.slice(1)) await m.control.ack(n, id);
      await coord.abort(n, 'timeout');
      expect(telemetry.counts.get('CheckpointStalled')).toBe(i < 2 ? undefined : 1);
    }
    const stall = await coord.stalled();
    expect(stall).toBeDefined();
    expect(telemetry.logs).toContainEqual(expect.objectContaining({ level: 'error', message: stall!.message, fields: { checkpointId: 3, waiting: stall!.waiting } }));
    // one completed checkpoint ends it
    await complete(coord, m);
    expect(await coord.stalled()).toBeUndefined();
  });

  it('a source stream resharded outside the job is named with its shard counts', async () => {
    const { coord, m, telemetry, plan, names } = setup();
    await complete(coord, m);
    const src = names.streamOf(plan.stages[0]!);
    m.kinesis.reshard(src, 4);
    await complete(coord, m);
    expect(telemetry.counts.get('SourceResharded')).toBe(1);
    expect(telemetry.logs).toContainEqual(
      expect.objectContaining({ level: 'error', message: `source stream ${src} was resharded outside the job: 2 → 4 open shards`, fields: expect.objectContaining({ stage: plan.stages[0]!.id, checkpointId: 2 }) }),
    );
    // the next checkpoint expects the new shards: nothing more to say
    await complete(coord, m);
    expect(telemetry.counts.get('SourceResharded')).toBe(1);
  });
});

describe('the workflow\'s task input', () => {
  it('runs each action the state machine names, and refuses an unknown one naming it', async () => {
    const { coord, m } = setup();
    expect(await coord.run({ action: 'allocate' } as never)).toEqual({ checkpointId: 1 });
    expect(await coord.run({ action: 'inject', checkpointId: 1 } as never)).toEqual({ checkpointId: 1, shards: 2 });
    for (const id of (await coord.get(1))!.missing!) await m.control.ack(1, id);
    expect(await coord.run({ action: 'await', checkpointId: 1, taskToken: 'tok' } as never)).toEqual({ checkpointId: 1 });
    expect(m.notifier.wasAnswered('tok')).toBe(true);
    expect(await coord.run({ action: 'overdue', checkpointId: 1 } as never)).toEqual({ checkpointId: 1, extend: true });
    expect(await coord.run({ action: 'commit', checkpointId: 1 } as never)).toMatchObject({ checkpointId: 1 });
    expect(await coord.run({ action: 'settle' } as never)).toEqual({ open: 0, oldest: 0 });
    expect(await coord.run({ action: 'savepoint', savepointId: 'sp', stop: true } as never)).toMatchObject({ id: 'sp', stop: true, status: 'REQUESTED' });
    expect(await coord.run({ action: 'allocate' } as never)).toEqual({ checkpointId: 2 });
    expect(await coord.get(2)).toMatchObject({ savepoint: true, savepointId: 'sp' });
    expect(await coord.run({ action: 'abort', checkpointId: 2, reason: 'x' } as never)).toEqual({ checkpointId: 2 });
    expect(await coord.run({ action: 'gc' } as never)).toMatchObject({ deleted: 0 });
    expect(await coord.run({ action: 'savepoint' } as never)).toMatchObject({ stop: false, status: 'REQUESTED' });
    await expect(coord.run({ action: 'explode' } as never)).rejects.toMatchObject({ code: 'BAD_INPUT', message: 'unknown coordinator action "explode"' });
  });
});
