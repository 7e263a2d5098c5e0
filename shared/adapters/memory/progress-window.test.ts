/**
 * The checkpoint timeout as a progress window, through the Coordinator on the in-memory twins with
 * its clock driven by the test: the workflow asks `overdue` every `timeoutMs` (the AwaitAcks state's
 * timeout), instances ack at given times, and the first complete ack set is committed.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../../api/index.js';
import type { Coordinator } from '../../coordinator/coordinator.js';
import { planJob } from '../../plan/planner.js';
import { resourceNames } from '../../plan/resources.js';
import { CEILING_FACTOR } from '../../coordinator/timeouts.js';
import type { CommitTarget } from '../../coordinator/protocol.js';
import { memoryCoordinator } from './checkpoint-store.js';
import { createJobStreams, createMemoryPorts, type MemoryPorts } from './memory-ports.js';

const T = 1_000; // checkpoint.timeoutMs

function setup(commitTargets: readonly CommitTarget[] = []) {
  const j = job('progress', { maxParallelism: 16, checkpoint: { timeoutMs: T } });
  // 6 source shards, 6 keyed instances: 12 acks per checkpoint
  j.source<{ k: string }>({ name: 'in', shards: 6 }).keyBy((x) => x.k, { parallelism: 6 }).process({ processElement() {} }).sinkTo(collectSink('out'));
  const plan = planJob(j);
  const names = resourceNames(plan, 'test');
  const m = createMemoryPorts();
  createJobStreams(m.kinesis, plan, names);
  const clock = { now: 1_700_000_000_000 };
  const coord = memoryCoordinator(plan, names, m, commitTargets, () => new Date(clock.now));
  return { coord, m, clock };
}

type Outcome = { completedAt: number } | { abortedAt: number; reason: string };

/**
 * One checkpoint as the workflow runs it: allocate, then instance i acks at `ackAt[i]` ms after the
 * start (undefined: never), and `overdue` is asked at T, 2T, … until n completes or is aborted.
 */
async function checkpoint(s: { coord: Coordinator; m: MemoryPorts; clock: { now: number } }, ackAt: ReadonlyArray<number | undefined>): Promise<Outcome> {
  const { coord, m, clock } = s;
  const start = clock.now;
  const { checkpointId: n } = await coord.allocate();
  const members = (await coord.get(n))!.missing!;
  expect(members).toHaveLength(12);
  const acks = members.map((id, i) => ({ id, at: ackAt[i] })).filter((a): a is { id: string; at: number } => a.at !== undefined).sort((a, b) => a.at - b.at);
  let next = 0;
  for (let look = T; ; look += T) {
    // the acks that arrive before this look
    for (; next < acks.length && acks[next]!.at < look; next++) {
      clock.now = start + acks[next]!.at;
      await m.control.ack(n, acks[next]!.id);
      if ((await coord.get(n))!.complete) {
        await coord.commit(n);
        expect((await coord.get(n))!.status).toBe('COMPLETED');
        return { completedAt: acks[next]!.at };
      }
    }
    clock.now = start + look;
    const o = await coord.overdue(n);
    if (!o.extend) {
      const ck = (await coord.get(n))!;
      expect(ck.status).toBe('ABORTED');
      expect(o.reason).toBeDefined();
      // the reason is on the record, as the operator reads it
      expect(ck.reason).toContain(o.reason!);
      return { abortedAt: look, reason: ck.reason! };
    }
    if (look > 100 * T) throw new Error('the checkpoint neither completed nor aborted');
  }
}

/** acks every `gap` ms from `first` on */
const trickle = (first: number, gap: number, count = 12) => Array.from({ length: count }, (_, i) => first + i * gap);

describe('checkpoint timeoutMs is a progress window under a hard ceiling', () => {
  it('completes a checkpoint whose acks trickle in for far longer than timeoutMs, none a window after the last', async () => {
    const s = setup();
    // an ack every 0.45 T: the last of 12 arrives at ~5 T, five times the timeout
    const r = await checkpoint(s, trickle(300, 450));
    expect(r).toEqual({ completedAt: 300 + 11 * 450 });
  });

  it('aborts a checkpoint with no ack for a whole window, and records why; the next one completes', async () => {
    const s = setup();
    // 10 acks early, then nothing: two instances are stuck
    const r = await checkpoint(s, [...trickle(100, 50, 10), undefined, undefined]);
    // the first look (T) sees the acks grow and restarts the window; the next (2T) finds nothing new
    expect(r).toMatchObject({ abortedAt: 2 * T });
    expect((r as { reason: string }).reason).toMatch(/no acknowledgement for 1000 ms since the last one \(window 1000 ms\) with 10 of 12 acks/);
    // and a checkpoint that never got an ack says so
    const none = await checkpoint(s, Array.from({ length: 12 }, () => undefined));
    // after one abort the window is 2T: measured from the start, the look at 2T aborts it
    expect(none).toMatchObject({ abortedAt: 2 * T });
    expect((none as { reason: string }).reason).toMatch(/since it started \(window 2000 ms\) with 0 of 12 acks/);
    // the next checkpoint completes, although its first ack needs 1.5 T (a queue to cross): the
    // window doubled after the aborts, so it is not aborted before its first ack
    const after = await checkpoint(s, trickle(1_500, 20));
    expect(after).toEqual({ completedAt: 1_500 + 11 * 20 });
  });

  it('aborts at the hard ceiling a checkpoint whose acks keep arriving but never complete it', async () => {
    const s = setup();
    // 11 instances ack every 0.9 T (every look sees progress), the 12th never does
    const r = await checkpoint(s, [...trickle(800, 900, 11), undefined]);
    expect(r).toMatchObject({ abortedAt: CEILING_FACTOR * T });
    expect((r as { reason: string }).reason).toMatch(/open 10000 ms: reached the ceiling of 10000 ms \(10 × timeoutMs\) with 11 of 12 acks/);
  });

  it('settle and a later allocate apply the same rule: a progressing checkpoint stays open', async () => {
    const s = setup();
    const { coord, m, clock } = s;
    const start = clock.now;
    const { checkpointId: n } = await coord.allocate();
    const [a, b] = (await coord.get(n))!.missing!;
    clock.now = start + 0.9 * T;
    await m.control.ack(n, a!);
    clock.now = start + 1.5 * T; // past timeoutMs, but an ack came
    expect(await coord.settle()).toEqual({ open: 1, oldest: n });
    await expect(coord.allocate()).rejects.toMatchObject({ name: 'CheckpointInFlightError' });
    clock.now = start + 2.0 * T;
    await m.control.ack(n, b!);
    expect(await coord.settle()).toEqual({ open: 1, oldest: n });
    // a window with no ack since the look at 2T: the next allocate aborts it and opens n + 1
    clock.now = start + 3.1 * T;
    expect((await coord.allocate()).checkpointId).toBe(n + 1);
    expect((await coord.get(n))!).toMatchObject({ status: 'ABORTED', reason: expect.stringMatching(/left in flight .*no acknowledgement for 1100 ms since the last one/) });
  });

  it('a checkpoint whose acks were all in when its execution ended is committed by the next allocate, not aborted a window later', async () => {
    const s = setup();
    const { coord, m, clock } = s;
    const start = clock.now;
    const { checkpointId: n } = await coord.allocate();
    // every instance acks; the execution waiting for them ends before its commit
    for (const id of (await coord.get(n))!.missing!) await m.control.ack(n, id);
    // the next execution's allocate comes long after the window (its retries back off)
    clock.now = start + 5 * T;
    expect((await coord.allocate()).checkpointId).toBe(n + 1);
    expect((await coord.get(n))!.status).toBe('COMPLETED');
  });

  it('while that commit runs, a second allocate cannot open the next checkpoint: it commits n too (idempotent), and n + 1 opens once', async () => {
    let nested: Promise<unknown> | undefined;
    let coordRef: Coordinator | undefined;
    const s = setup([{ publish: () => ((nested ??= coordRef!.allocate().catch((e: Error) => e.name)), 0) }]);
    const { coord, m, clock } = s;
    coordRef = coord;
    const start = clock.now;
    const { checkpointId: n } = await coord.allocate();
    for (const id of (await coord.get(n))!.missing!) await m.control.ack(n, id);
    clock.now = start + 5 * T;
    const outer = await coord.allocate().then((o) => o.checkpointId, (e: Error) => e.name);
    const inner = await nested;
    // one of the two opened n + 1, the other found it open
    expect([outer, inner]).toContain(n + 1);
    expect([outer, inner].filter((x) => x === n + 1)).toHaveLength(1);
    expect((await coord.get(n))!.status).toBe('COMPLETED');
    expect((await coord.ports.store.readState()).open).toEqual([n + 1]);
  });

  it('a checkpoint opened by an execution that ended before it injected: the next allocate injects it again, once, when no ack came for timeoutMs', async () => {
    const s = setup();
    const { coord, m, clock } = s;
    // after an abort the window is 2T: without a new injection n would wait all of it with no ack
    await coord.abort((await coord.allocate()).checkpointId, 'a failed injection');
    const start = clock.now;
    const { checkpointId: n } = await coord.allocate();
    const announced = () => m.control.announcedBarriers.map((a) => a.barrier.checkpointId);
    expect(announced()).not.toContain(n);
    clock.now = start + 0.5 * T; // inside the window: the opener may still be injecting
    await expect(coord.allocate()).rejects.toMatchObject({ name: 'CheckpointInFlightError' });
    expect(announced()).not.toContain(n);
    clock.now = start + 1.2 * T;
    await expect(coord.allocate()).rejects.toMatchObject({ name: 'CheckpointInFlightError' });
    expect(announced()).toContain(n);
    // once: the retries that follow (Allocate backs off to one timeoutMs) put no more tail barriers
    const injector = coord.ports.injector;
    const put = injector.putControl.bind(injector);
    let tailBarriers = 0;
    injector.putControl = (...args) => (tailBarriers++, put(...args));
    clock.now = start + 1.5 * T;
    await expect(coord.allocate()).rejects.toMatchObject({ name: 'CheckpointInFlightError' });
    clock.now = start + 2.1 * T;
    await expect(coord.allocate()).rejects.toMatchObject({ name: 'CheckpointInFlightError' });
    expect(tailBarriers).toBe(0);
    for (const id of (await coord.get(n))!.missing!) await m.control.ack(n, id);
    expect((await coord.allocate()).checkpointId).toBe(n + 1);
    expect((await coord.get(n))!.status).toBe('COMPLETED');
  });
});
