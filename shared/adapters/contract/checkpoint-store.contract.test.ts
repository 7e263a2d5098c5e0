/**
 * One contract for the coordinator's checkpoint store, run against the in-memory twin and against
 * DynamoDB (the emulator, over the real wire): the conditional rules the coordinator's crash safety
 * rests on — allocate opens at most maxConcurrent and never over a stop, a checkpoint record is
 * created but never overwrites another (an abort's), completion is by the identities expected,
 * a checkpoint ends once, leases are fenced — and the one-at-a-time requests (savepoint, rescale,
 * idle token, commit marker).
 */
import { describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../../local/emulators.js';
import { createTable } from '../../../local/provision.js';
import type { CheckpointStore, NewCheckpoint } from '../../coordinator/ports.js';
import type { ControlStore, SnapshotPointer } from '../../runtime/ports.js';
import { FencedError } from '../../util/errors.js';
import { createAwsClients } from '../aws/clients.js';
import { DynamoCheckpointStore } from '../aws/dynamo-checkpoint-store.js';
import { DynamoControlStore } from '../aws/dynamo-control-store.js';
import { MemoryCheckpointStore } from '../memory/checkpoint-store.js';
import { MemoryControlStore } from '../memory/memory-ports.js';
import { losingConditionalWrites } from '../../../local/chaos/sdk-answers.js';
import { contractTarget } from './target.js';

/** A fresh, empty control table seen from both sides: the coordinator's store and the instances' control store. */
interface Subject {
  readonly store: CheckpointStore;
  readonly control: ControlStore;
}

/** `lostResponses`: every conditional write is applied, its response lost, and sent again (the caller gets the retry's answer) */
type Open = (options?: { readonly lostResponses?: boolean }) => Promise<Subject>;

interface StoreTarget {
  readonly open: Open;
  stop(): Promise<void>;
}

const targets: Array<{ name: string; start(): Promise<StoreTarget> }> = [
  {
    name: 'in-memory twin',
    async start() {
      return {
        async open({ lostResponses = false } = {}) {
          const faults = { loseResponse: () => lostResponses };
          const control = new MemoryControlStore(faults);
          return { store: new MemoryCheckpointStore(control, faults), control };
        },
        stop: async () => {},
      };
    },
  },
  {
    name: 'DynamoDB (emulator)',
    async start() {
      const emulators: LocalEmulators = await startEmulators({ services: ['dynamodb'] });
      const clients = createAwsClients({ region: emulators.region, credentials: emulators.credentials, endpoints: emulators.endpoints, maxAttempts: 3 });
      let tables = 0;
      return {
        async open({ lostResponses = false } = {}) {
          const table = `contract-control-${++tables}`;
          await createTable(clients, table, 'pk', 'sk');
          // the real request reaches the emulator twice, as the chaos schedule's lost-response sends it
          const c = lostResponses ? losingConditionalWrites(clients) : clients;
          return { store: new DynamoCheckpointStore(c, table), control: new DynamoControlStore(c, table, 'no-bucket') };
        },
        stop: async () => {
          clients.dynamodb.destroy();
          await emulators.stop();
        },
      };
    },
  },
];

const checkpoint = (n: number, members: readonly string[], startedAt = `2026-01-01T00:00:0${n}.000Z`): NewCheckpoint => ({
  checkpointId: n,
  members,
  topology: [members.length],
  startedAt,
  savepoint: false,
});

const pointer = (n: number): SnapshotPointer => ({ checkpointId: n, replayPoint: { from: 'start' }, delta: { store: 'inline', key: `k${n}` }, meta: {} });

describe.each(targets)('checkpoint store contract: $name', (target) => {
  const side = contractTarget(target.start);
  const open: Open = (options) => side().open(options);

  it('opens a checkpoint only after the last one, below maxConcurrent, and never while a stop is held or taken', async () => {
    const { store } = await open();
    expect(await store.readState()).toEqual({ last: 0, open: [] });
    expect(await store.openNext(1, 0, 2, false)).toBe(true);
    // a second allocate that read the same `last` loses
    expect(await store.openNext(1, 0, 2, false)).toBe(false);
    expect(await store.openNext(2, 1, 2, false)).toBe(true);
    expect(await store.openNext(3, 2, 2, false)).toBe(false); // two open: the window is full
    await store.closeOpen(1);
    expect(await store.readState()).toEqual({ last: 2, open: [2] });
    expect(await store.openNext(3, 2, 2, true)).toBe(true); // a stop-with-savepoint
    await store.closeOpen(2);
    expect(await store.openNext(4, 3, 2, false)).toBe(false); // no checkpoint after the stop
    await store.liftStop(2); // not the one holding it: nothing
    expect((await store.readState()).stopping).toBe(3);
    await store.liftStop(3);
    await store.markStopped(3);
    await store.closeOpen(3);
    expect(await store.readState()).toEqual({ last: 3, open: [], stoppedAt: 3 });
    expect(await store.openNext(4, 3, 2, false)).toBe(false); // stopped
    await store.markFinished(4);
    expect(await store.readState()).toMatchObject({ stoppedAt: 3, finishedAt: 4 });
  });

  it('creates a checkpoint record but never overwrites another: an abort written first wins; a retry finds its own', async () => {
    const { store } = await open();
    const c = checkpoint(1, ['s1:a', 's1:b']);
    expect(await store.createCheckpoint(c)).toBe(true);
    expect(await store.createCheckpoint(c)).toBe(true); // the same allocate retried
    expect(await store.createCheckpoint({ ...c, startedAt: '2026-01-01T01:00:00.000Z' })).toBe(false); // another allocate
    expect(await store.getCheckpoint(1)).toMatchObject({ checkpointId: 1, status: 'IN_FLIGHT', expected: 2, acks: 0, complete: false, missing: ['s1:a', 's1:b'], topology: [2] });
    // an abort of an open checkpoint without a record, then its allocate's late write
    await store.createAbortedCheckpoint({ checkpointId: 2, members: ['s1:a'], topology: [1], startedAt: c.startedAt, reason: 'left open' });
    expect(await store.createCheckpoint(checkpoint(2, ['s1:a']))).toBe(false);
    expect(await store.getCheckpoint(2)).toMatchObject({ status: 'ABORTED', reason: 'left open' });
    // and an abort record never replaces a record its allocate wrote
    await store.createAbortedCheckpoint({ checkpointId: 1, members: ['s1:a'], topology: [1], startedAt: c.startedAt, reason: 'late' });
    expect((await store.getCheckpoint(1))!.status).toBe('IN_FLIGHT');
    expect((await store.listCheckpoints()).map((r) => r.checkpointId)).toEqual([1, 2]);
    expect(await store.membersOf(1)).toEqual(expect.arrayContaining(['s1:a', 's1:b']));
  });

  it('completes a checkpoint by the identities it expects: acks of strangers never fill it', async () => {
    const { store, control } = await open();
    await store.createCheckpoint(checkpoint(1, ['s1:a', 's1:b']));
    expect(await control.ack(1, 's1:x')).toEqual({ completedBy: false });
    expect(await control.ack(1, 's1:y')).toEqual({ completedBy: false });
    expect(await store.setTaskToken(1, 'tok')).toBe(false); // as many acks as expected, none expected
    expect(await control.ack(1, 's1:a')).toEqual({ completedBy: false, taskToken: 'tok' });
    expect(await control.ack(1, 's1:a')).toEqual({ completedBy: false, taskToken: 'tok' }); // a duplicate counts once
    expect(await control.ack(1, 's1:b')).toEqual({ completedBy: true, taskToken: 'tok' });
    // the completing instance's retry still reports it (its first SendTaskSuccess may have been lost)
    expect(await control.ack(1, 's1:b')).toEqual({ completedBy: true, taskToken: 'tok' });
    expect(await store.setTaskToken(1, 'tok2')).toBe(true); // acks in before the token: await answers itself
    expect(await store.getCheckpoint(1)).toMatchObject({ acks: 4, complete: true, missing: [] });
    expect(await store.acksOf(1)).toEqual(['s1:a', 's1:b', 's1:x', 's1:y']);
    expect(await control.ack(9, 's1:a')).toEqual({ completedBy: false }); // no record: nobody waits
  });

  it('sets a checkpoint’s topology and members from each injection’s listing until one marks it injected (with the last listing); then keeps them (barriers carrying them may be out)', async () => {
    const { store, control } = await open();
    await store.createCheckpoint(checkpoint(1, ['s1:a', 's1:b']));
    const first = (await store.fixInjection(1, { members: ['s1:a', 's1:b'], topology: [2] }))!;
    expect(first.topology).toEqual([2]);
    // that injection died before marking; the next one lists three shards
    const second = (await store.fixInjection(1, { members: ['s1:c', 's1:d', 's1:b'], topology: [3] }))!;
    expect(second.topology).toEqual([3]);
    expect(await store.markInjected(1, first.listing)).toBe(false); // a stale listing
    expect(await store.markInjected(1, second.listing)).toBe(true);
    expect(await store.markInjected(1, second.listing)).toBe(true); // a retry
    expect(await store.fixInjection(1, { members: ['s1:e'], topology: [1] })).toEqual(second);
    expect(await store.getCheckpoint(1)).toMatchObject({ topology: [3], expected: 3, injected: true, missing: ['s1:b', 's1:c', 's1:d'] });
    expect(await control.ack(1, 's1:a')).toEqual({ completedBy: false }); // counted at allocate only
    for (const id of ['s1:b', 's1:c']) await control.ack(1, id);
    expect(await control.ack(1, 's1:d')).toMatchObject({ completedBy: true });
    expect(await store.fixInjection(9, { members: ['s1:a'], topology: [1] })).toBeUndefined(); // no record
    expect(await store.getCheckpoint(9)).toBeUndefined();
  });

  it('ends a checkpoint once: a later end (commit after abort, a retried end) changes nothing, and the token goes', async () => {
    const { store, control } = await open();
    await store.createCheckpoint(checkpoint(1, ['s1:a']));
    await store.setTaskToken(1, 'tok');
    await store.finishCheckpoint(1, { status: 'ABORTED', endedAt: '2026-01-01T00:00:09.000Z', durationMs: 8000, reason: 'timed out' });
    await store.finishCheckpoint(1, { status: 'COMPLETED', endedAt: '2026-01-01T00:00:10.000Z', durationMs: 9000 });
    expect(await store.getCheckpoint(1)).toMatchObject({ status: 'ABORTED', reason: 'timed out', endedAt: '2026-01-01T00:00:09.000Z', durationMs: 8000 });
    expect(await control.ack(1, 's1:a')).toEqual({ completedBy: false }); // ended, and no token left to answer
    await store.recordInstances(1, { 's1:a': { bytes: 10, keys: 2, replayPoint: { from: 'start' }, delta: { store: 'inline', key: 'k' } } }, 10, 2);
    expect(await store.getCheckpoint(1)).toMatchObject({ bytes: 10, keys: 2, instances: { 's1:a': { bytes: 10, keys: 2 } } });
    await store.deleteCheckpoint(1);
    expect(await store.getCheckpoint(1)).toBeUndefined();
  });

  it('records progress only when the ack count grew, only while in flight: concurrent looks keep the first time', async () => {
    const { store } = await open();
    await store.createCheckpoint(checkpoint(1, ['s1:a', 's1:b']));
    expect(await store.getCheckpoint(1)).not.toHaveProperty('progressAt');
    await store.noteProgress(1, 1, '2026-01-01T00:00:05.000Z');
    await store.noteProgress(1, 1, '2026-01-01T00:00:06.000Z'); // a second look at the same count
    expect(await store.getCheckpoint(1)).toMatchObject({ progressAcks: 1, progressAt: '2026-01-01T00:00:05.000Z' });
    await store.noteProgress(1, 2, '2026-01-01T00:00:07.000Z');
    expect(await store.getCheckpoint(1)).toMatchObject({ progressAcks: 2, progressAt: '2026-01-01T00:00:07.000Z' });
    await store.finishCheckpoint(1, { status: 'ABORTED', endedAt: '2026-01-01T00:00:09.000Z', durationMs: 8000, reason: 'stuck' });
    await store.noteProgress(1, 3, '2026-01-01T00:00:10.000Z'); // ended: nothing
    expect(await store.getCheckpoint(1)).toMatchObject({ progressAcks: 2, progressAt: '2026-01-01T00:00:07.000Z' });
  });

  it('fences leases: only the holder of the newest fence publishes a snapshot pointer the coordinator reads', async () => {
    const { store, control } = await open();
    const first = await control.takeOver('s1:a', 0);
    await control.publishSnapshot('s1:a', first.fence, pointer(1));
    const second = await control.takeOver('s1:a', first.fence);
    await expect(control.takeOver('s1:a', first.fence)).rejects.toBeInstanceOf(FencedError); // a zombie's takeover
    await expect(control.publishSnapshot('s1:a', first.fence, pointer(2))).rejects.toBeInstanceOf(FencedError);
    expect((await store.snapshotPointer('s1:a'))!.checkpointId).toBe(1);
    await control.publishSnapshot('s1:a', second.fence, pointer(3));
    expect((await store.snapshotPointer('s1:a'))!.checkpointId).toBe(3);
    expect(await store.snapshotPointer('s1:never')).toBeUndefined();
    const all = await store.snapshotPointers(['s1:a', 's1:never']);
    expect([...all.keys()]).toEqual(['s1:a']);
  });

  it('lists and deletes the deltas kept inline', async () => {
    const { store, control } = await open();
    await control.writeDelta('s1:a', 1, new Uint8Array(10));
    await control.writeDelta('s1:a', 2, new Uint8Array(10));
    await control.writeDelta('s1:b', 1, new Uint8Array(10));
    expect((await store.inlineDeltas('s1:a')).sort()).toEqual([1, 2]);
    await store.deleteInlineDelta('s1:a', 1);
    expect(await store.inlineDeltas('s1:a')).toEqual([2]);
    expect(await store.inlineDeltas('s1:b')).toEqual([1]);
  });

  it('keeps one savepoint request at a time, one record per id, and ends a savepoint once', async () => {
    const { store } = await open();
    const rec = { id: 'sp1', status: 'REQUESTED' as const, stop: false, requestedAt: '2026-01-01T00:00:00.000Z' };
    expect(await store.createSavepoint(rec)).toBe(true);
    expect(await store.createSavepoint(rec)).toBe(false);
    expect(await store.putSavepointRequest({ id: 'sp1', stop: false, requestedAt: rec.requestedAt })).toBe(true);
    expect(await store.putSavepointRequest({ id: 'sp1', stop: false, requestedAt: rec.requestedAt })).toBe(true); // a retry of the same
    expect(await store.putSavepointRequest({ id: 'sp2', stop: true, requestedAt: rec.requestedAt })).toBe(false);
    expect(await store.getSavepointRequest()).toEqual({ id: 'sp1', stop: false });
    await store.deleteSavepointRequest('sp2'); // not its request
    expect(await store.getSavepointRequest()).toEqual({ id: 'sp1', stop: false });
    await store.updateSavepoint('sp1', { status: 'IN_PROGRESS', checkpointId: 4 });
    await store.dropRequestedSavepoint('sp1'); // past REQUESTED: stays
    await store.deleteSavepointRequest('sp1');
    expect(await store.getSavepointRequest()).toBeUndefined();
    await store.updateSavepoint('sp1', { status: 'COMPLETED', location: 'x', rows: 1, timers: 0, bytes: 5 });
    await store.updateSavepoint('sp1', { status: 'FAILED', reason: 'aborted' }, { unless: 'COMPLETED' });
    expect(await store.getSavepoint('sp1')).toEqual({ ...rec, status: 'COMPLETED', checkpointId: 4, location: 'x', rows: 1, timers: 0, bytes: 5 });
    expect(await store.createSavepoint({ ...rec, id: 'sp0' })).toBe(true);
    await store.dropRequestedSavepoint('sp0');
    expect((await store.listSavepoints()).map((s) => s.id)).toEqual(['sp1']);
  });

  it('keeps one rescale in progress; a finished one may be replaced', async () => {
    const { store } = await open();
    const r = { stage: 's2', fromShards: 2, toShards: 4, phase: 'requested' as const, requestedAt: '2026-01-01T00:00:00.000Z' };
    expect(await store.createRescale(r)).toBe(true);
    expect(await store.createRescale({ ...r, toShards: 3 })).toBe(false);
    await store.updateRescale({ phase: 'draining', checkpointId: 5 });
    expect(await store.getRescale()).toEqual({ ...r, phase: 'draining', checkpointId: 5 });
    await store.updateRescale({ phase: 'done', finishedAt: '2026-01-01T00:01:00.000Z' });
    expect(await store.createRescale({ ...r, toShards: 3 })).toBe(true);
    await store.clearRescale();
    expect(await store.getRescale()).toBeUndefined();
  });

  it('leaves a parked token on existing source leases, which their position write returns until its waker clears it', async () => {
    const { store, control } = await open();
    const { fence } = await control.takeOver('s0:a', 0);
    expect(await control.commitPosition('s0:a', fence, '10')).toBeUndefined();
    await store.markParked(['s0:a', 's0:never-ran'], 'tok');
    expect(await control.commitPosition('s0:a', fence, '11')).toBe('tok');
    // a retried or later write returns it again: only the waker removes it
    expect(await control.commitPosition('s0:a', fence, '12')).toBe('tok');
    expect((await control.readLease('s0:a')).parked).toBe('tok');
    await store.clearParked('s0:a', 'older'); // a later park's mark stays
    expect(await control.commitPosition('s0:a', fence, '13')).toBe('tok');
    await store.clearParked('s0:a', 'tok');
    expect(await control.commitPosition('s0:a', fence, '14')).toBeUndefined();
    expect(await control.readLease('s0:a')).toMatchObject({ fence, lastPosition: '14' });
    // no lease item is made for an instance that never ran
    expect((await control.readLease('s0:never-ran')).fence).toBe(0);
    expect(await control.takeOver('s0:never-ran', 0)).toMatchObject({ fence: 1, lastPosition: undefined });
  });

  it('hands a parked token to exactly one waker, and clears a commit marker only for its own checkpoint', async () => {
    const { store } = await open();
    expect(await store.idleToken()).toBeUndefined();
    await store.parkIdle('tok', '2026-01-01T00:00:00.000Z');
    expect(await store.idleToken()).toBe('tok');
    expect(await store.takeIdle('other')).toBe(false);
    expect(await store.takeIdle('tok')).toBe(true);
    expect(await store.takeIdle('tok')).toBe(false);
    expect(await store.idleToken()).toBeUndefined();
    await store.parkIdle('tok2', '2026-01-01T00:00:02.000Z'); // parked again: a fresh token to take
    expect(await store.idleToken()).toBe('tok2');
    expect(await store.takeIdle('tok2')).toBe(true);
    await store.markCommitting(7, '2026-01-01T00:00:00.000Z');
    await store.clearCommitting(6);
    expect(await store.loopState()).toEqual({ committing: 7, committingAt: '2026-01-01T00:00:00.000Z' });
    await store.clearCommitting(7);
    await store.setOperatorStop('2026-01-01T00:00:01.000Z');
    expect(await store.loopState()).toEqual({ stopped: '2026-01-01T00:00:01.000Z' });
    await store.setOperatorStop(undefined);
    expect(await store.loopState()).toEqual({});
  });

  describe('a lost response: the write applied, its response lost, the SDK sending it again', () => {
    it('a takeover whose retry meets its own earlier write holds the lease (no FencedError); a takeover by another still fails', async () => {
      const { control } = await open({ lostResponses: true });
      const first = await control.takeOver('s1:a', 0);
      expect(first.fence).toBe(1);
      const second = await control.takeOver('s1:a', first.fence);
      expect(second.fence).toBe(2);
      expect((await control.readLease('s1:a')).fence).toBe(2);
      await control.publishSnapshot('s1:a', second.fence, pointer(1)); // the holder's fenced writes go on
      // another writer took the lease between: the stale takeover is fenced as before
      await expect(control.takeOver('s1:a', first.fence)).rejects.toBeInstanceOf(FencedError);
      expect((await control.readLease('s1:a')).fence).toBe(2);
    });

    it('an injection whose retries meet their own writes gets its topology back and marks the checkpoint injected', async () => {
      const { store } = await open({ lostResponses: true });
      await store.createCheckpoint(checkpoint(1, ['s1:a']));
      const fixed = (await store.fixInjection(1, { members: ['s1:b', 's1:c'], topology: [2] }))!;
      expect(fixed.topology).toEqual([2]);
      expect(await store.markInjected(1, fixed.listing)).toBe(true);
      expect(await store.getCheckpoint(1)).toMatchObject({ topology: [2], expected: 2, injected: true });
    });

    it("an allocate whose retry meets its own open reports it opened; another allocate of the same n still loses", async () => {
      const { store } = await open({ lostResponses: true });
      expect(await store.openNext(1, 0, 2, false)).toBe(true);
      expect(await store.readState()).toEqual({ last: 1, open: [1] });
      expect(await store.openNext(1, 0, 2, false)).toBe(false); // a second allocate that read the same `last`
      expect(await store.openNext(2, 1, 2, true)).toBe(true);
      expect(await store.readState()).toEqual({ last: 2, open: [1, 2], stopping: 2 });
    });

    it('a rescale whose retry meets its own record is created; one asked for by another is still refused', async () => {
      const { store } = await open({ lostResponses: true });
      const r = { stage: 's2', fromShards: 2, toShards: 4, phase: 'requested' as const, requestedAt: '2026-01-01T00:00:00.000Z' };
      expect(await store.createRescale(r)).toBe(true);
      expect(await store.createRescale({ ...r, toShards: 3 })).toBe(false);
      expect(await store.getRescale()).toEqual(r);
    });

    it('a waker whose take of the parked token meets its own earlier take woke the coordinator; a second waker still did not', async () => {
      const { store } = await open({ lostResponses: true });
      await store.parkIdle('tok', '2026-01-01T00:00:00.000Z');
      expect(await store.takeIdle('tok')).toBe(true);
      expect(await store.takeIdle('tok')).toBe(false);
      expect(await store.idleToken()).toBeUndefined();
    });
  });
});
