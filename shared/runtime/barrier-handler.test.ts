import { describe, expect, it } from 'vitest';
import type { BarrierEnvelope, DataEnvelope } from '../codec/envelope.js';
import { createBarrierHandler } from './barrier-handler.js';
import type { AllSent } from './barrier-senders.js';
import type { Unit } from './inner-packets.js';
import { RecordDedupe } from './record-dedupe.js';

const barrier = (checkpointId: number, count: number): BarrierEnvelope => ({ kind: 'barrier', checkpointId, count, topology: [1, 2], savepoint: false });
const data = (producer: string, epoch: number, seq: number, position: string): Unit => ({
  position,
  index: 0,
  producer,
  env: { kind: 'data', epoch, seq, keyGroup: 0, timestamp: undefined, payload: new Uint8Array() } satisfies DataEnvelope,
});
/** barriers from two producers are all of a checkpoint's */
const twoProducers: AllSent = (ps) => [...ps].length >= 2;
/** as many producers as the topology's first stage counts */
const bySources: AllSent = (ps, t) => [...ps].length >= t[0]!;

describe('barrier handlers', () => {
  it('exactly-once aligns: checkpoint 1 waits for both barriers and every record they count; a later epoch is held and replayed from', () => {
    const dedupe = new RecordDedupe();
    const h = createBarrierHandler('exactly-once', dedupe, 10);
    expect(h.appliesFrom(0)).toBe(0);
    dedupe.admit('a', 0, 0);
    expect(h.onBarrier('a', barrier(1, 1), '100', 0)).toBe(true);
    expect(h.hold(data('a', 1, 0, '101'), 0)).toBe('held');
    expect(h.hold(data('a', 1, 0, '101'), 0)).toBe('duplicate');
    h.onBarrier('b', barrier(1, 2), '102', 0);
    dedupe.admit('b', 0, 0);
    expect(h.complete(1, twoProducers, '103')).toBeUndefined(); // b counted 2 records, 1 arrived
    dedupe.admit('b', 0, 1);
    const cp = h.complete(1, twoProducers, '103');
    expect(cp && { producers: [...cp.producers], replayFrom: cp.replayFrom }).toEqual({ producers: ['a', 'b'], replayFrom: '101' });
    expect(h.settled).toBe(false);
    expect(h.release(1).map((u) => u.position)).toEqual(['101']);
    expect(h.settled).toBe(true);
  });

  it('exactly-once remembers where to re-read past the hold bound', () => {
    const h = createBarrierHandler('exactly-once', new RecordDedupe(), 1);
    expect(h.hold(data('a', 1, 0, '200'), 0)).toBe('held');
    expect(h.hold(data('a', 1, 1, '201'), 0)).toBe('spilled');
    expect(h.hold(data('a', 1, 2, '199'), 0)).toBe('spilled');
    // the snapshot's replay point is the earliest spilled record, before the held one
    h.onBarrier('a', barrier(1, 0), '190', 0);
    h.onBarrier('b', barrier(1, 0), '191', 0);
    expect(h.complete(1, twoProducers, '300')?.replayFrom).toBe('199');
    expect(h.settled).toBe(false);
    expect(h.release(1)).toHaveLength(1);
    expect(h.settled).toBe(false); // the overflow is still to be re-read
    expect(h.takeOverflow()).toBe('199');
    expect(h.settled).toBe(true);
    expect(h.takeOverflow()).toBeUndefined();
  });

  it('at-least-once tracks: nothing is held or dropped, and barriers from every producer complete a checkpoint whatever arrived', () => {
    const h = createBarrierHandler('at-least-once', new RecordDedupe(), 10);
    expect(h.appliesFrom(5)).toBe(Number.NEGATIVE_INFINITY);
    expect(h.hold(data('a', 7, 0, '300'), 5)).toBeUndefined();
    h.onBarrier('a', barrier(6, 100), '301', 5);
    expect(h.complete(6, twoProducers, '302')).toBeUndefined();
    h.onBarrier('b', barrier(6, 100), '303', 5);
    expect(h.complete(6, twoProducers, '304')?.replayFrom).toBe('304');
    expect(h.settled).toBe(true);
  });

  it("exactly-once: a barrier of a checkpoint the instance is past is refused; a producer's first barrier of a checkpoint is the one that counts", () => {
    const dedupe = new RecordDedupe();
    const h = createBarrierHandler('exactly-once', dedupe, 10);
    expect(h.onBarrier('a', barrier(3, 0), '10', 3)).toBe(false);
    expect(h.onBarrier('a', barrier(2, 0), '10', 3)).toBe(false);
    expect(h.waiting(3)).toBe(false);
    expect(h.settled).toBe(true);
    // checkpoint 4: a's barrier counts one record; a re-delivered copy saying 5 does not raise it
    expect(h.onBarrier('a', barrier(4, 1), '11', 3)).toBe(true);
    expect(h.onBarrier('a', barrier(4, 5), '12', 3)).toBe(true);
    expect(h.settled).toBe(false);
    expect(h.describe()).toEqual({ held: 0, waitingBarriers: ['4:a'] });
    h.onBarrier('b', barrier(4, 0), '13', 3);
    dedupe.admit('a', 3, 0);
    expect(h.complete(4, twoProducers, '14')?.replayFrom).toBe('14');
    expect(h.waiting(4)).toBe(false);
  });

  it('exactly-once: a checkpoint whose topology counts a source shard that never sends its barrier (merged away outside the job) is superseded once a later checkpoint has every barrier, and aligns with the producers that sent it', () => {
    const dedupe = new RecordDedupe();
    const h = createBarrierHandler('exactly-once', dedupe, 10);
    // checkpoint 2 started with three source shards (s1, s2, s3); s2 and s3 were merged into s4 before its barrier reached them
    const topo = (checkpointId: number, count: number, sources: number): BarrierEnvelope => ({ ...barrier(checkpointId, count), topology: [sources, 2] });
    dedupe.admit('s1', 1, 0);
    h.onBarrier('s1', topo(2, 1, 3), '10', 1);
    h.onBarrier('s4', topo(2, 0, 3), '11', 1);
    expect(h.complete(2, bySources, '12')).toBeUndefined(); // 2 of 3: s2 may still come
    expect(h.hold(data('s4', 2, 0, '13'), 1)).toBe('held');
    // checkpoint 3 started with the open shards s1 and s4; one barrier is not yet every one
    h.onBarrier('s4', topo(3, 1, 2), '14', 1);
    expect(h.complete(2, bySources, '15')).toBeUndefined();
    h.onBarrier('s1', topo(3, 0, 2), '16', 1);
    const cp = h.complete(2, bySources, '17');
    expect(cp && { producers: [...cp.producers].sort(), replayFrom: cp.replayFrom }).toEqual({ producers: ['s1', 's4'], replayFrom: '13' });
    expect(h.release(2).map((u) => u.position)).toEqual(['13']);
    dedupe.admit('s4', 2, 0);
    expect(h.complete(3, bySources, '18')?.producers.size).toBe(2);
    expect(h.settled).toBe(true);
  });

  it('exactly-once: a superseded checkpoint still waits for the records its barriers count', () => {
    const dedupe = new RecordDedupe();
    const h = createBarrierHandler('exactly-once', dedupe, 10);
    const topo = (checkpointId: number, count: number, sources: number): BarrierEnvelope => ({ ...barrier(checkpointId, count), topology: [sources, 2] });
    h.onBarrier('s1', topo(2, 1, 2), '10', 1);
    h.onBarrier('s1', topo(3, 0, 1), '11', 1);
    expect(h.complete(2, bySources, '12')).toBeUndefined(); // s1 counted one record of epoch 1, none arrived
    dedupe.admit('s1', 1, 0);
    expect(h.complete(2, bySources, '13')?.producers.size).toBe(1);
  });

  it("exactly-once: the replay point is the earliest of the frontier, a held record, the hold overflow and a later checkpoint's barrier", () => {
    const dedupe = new RecordDedupe();
    const h = createBarrierHandler('exactly-once', dedupe, 2);
    // instance in epoch 0, completing checkpoint 1; checkpoint 3's barrier from b arrives early at 105
    h.onBarrier('a', barrier(1, 0), '100', 0);
    expect(h.hold(data('a', 1, 0, '103'), 0)).toBe('held');
    expect(h.onBarrier('b', barrier(3, 0), '105', 0)).toBe(true);
    h.onBarrier('b', barrier(1, 0), '101', 0);
    expect(h.complete(1, twoProducers, '120')?.replayFrom).toBe('103'); // the held record
    expect(h.release(1).map((u) => u.position)).toEqual(['103']);
    // checkpoint 2 (instance now in epoch 1): nothing held; checkpoint 3's barrier at 105 is the earliest
    h.onBarrier('a', barrier(2, 0), '121', 1);
    h.onBarrier('b', barrier(2, 0), '122', 1);
    expect(h.complete(2, twoProducers, '130')?.replayFrom).toBe('105');
    // checkpoint 3 itself: its own early barrier no longer pulls the replay point back
    h.onBarrier('a', barrier(3, 0), '131', 2);
    expect(h.complete(3, twoProducers, '140')?.replayFrom).toBe('140');
    // a later checkpoint's barrier past the frontier does not move it
    h.onBarrier('a', barrier(4, 0), '150', 3);
    h.onBarrier('a', barrier(6, 0), '160', 3);
    h.onBarrier('b', barrier(4, 0), '151', 3);
    expect(h.complete(4, twoProducers, '155')?.replayFrom).toBe('155');
    // past the hold bound the overflow's position is where replay starts
    expect(h.hold(data('a', 5, 0, '170'), 4)).toBe('held');
    expect(h.hold(data('a', 5, 1, '171'), 4)).toBe('held');
    expect(h.hold(data('a', 5, 2, '172'), 4)).toBe('spilled');
    h.onBarrier('a', barrier(5, 0), '165', 4);
    h.onBarrier('b', barrier(5, 0), '166', 4);
    expect(h.complete(5, twoProducers, '180')?.replayFrom).toBe('160'); // checkpoint 6's barrier is earlier still
    expect(h.release(5)).toHaveLength(2);
    expect(h.takeOverflow()).toBe('172');
  });

  it('exactly-once: a record of the instance\'s epoch or an older one applies now; only later epochs are held', () => {
    const h = createBarrierHandler('exactly-once', new RecordDedupe(), 10);
    expect(h.hold(data('a', 3, 0, '10'), 3)).toBeUndefined();
    expect(h.hold(data('a', 2, 1, '11'), 3)).toBeUndefined();
    expect(h.settled).toBe(true);
    expect(h.hold(data('a', 4, 2, '12'), 3)).toBe('held');
  });

  it('a fresh handler knows no topology and has no checkpoint to complete; an attempt to complete one takes the topology its barrier names', () => {
    const h = createBarrierHandler('exactly-once', new RecordDedupe(), 10);
    expect(h.topology).toEqual([]);
    expect(h.complete(1, twoProducers, '10')).toBeUndefined();
    h.onBarrier('a', { ...barrier(1, 0), topology: [3, 2] }, '11', 0);
    expect(h.complete(1, twoProducers, '12')).toBeUndefined(); // one of two producers
    expect(h.topology).toEqual([3, 2]);
  });

  it('exactly-once: the replay point is the earliest held record whatever order they were held in, and the overflow only when it is earlier', () => {
    const h = createBarrierHandler('exactly-once', new RecordDedupe(), 2);
    expect(h.hold(data('a', 1, 0, '103'), 0)).toBe('held');
    expect(h.hold(data('a', 1, 1, '104'), 0)).toBe('held');
    expect(h.hold(data('a', 1, 2, '105'), 0)).toBe('spilled'); // past the bound, after both held records
    expect(h.hold(data('a', 1, 3, '107'), 0)).toBe('spilled'); // a later spill does not move the overflow on
    h.onBarrier('a', barrier(1, 0), '100', 0);
    h.onBarrier('b', barrier(1, 0), '101', 0);
    expect(h.complete(1, twoProducers, '110')?.replayFrom).toBe('103');
    expect(h.release(1).map((u) => u.position)).toEqual(['103', '104']);
    expect(h.takeOverflow()).toBe('105');
  });

  it('at-least-once holds nothing back, so it has nothing to release and no overflow to re-read', () => {
    const h = createBarrierHandler('at-least-once', new RecordDedupe(), 0);
    expect(h.hold(data('a', 2, 0, '10'), 1)).toBeUndefined();
    expect(h.release(2)).toEqual([]);
    expect(h.takeOverflow()).toBeUndefined();
    expect(h.settled).toBe(true);
  });

  it('both modes describe what they wait for: each waiting checkpoint with the producers whose barrier came, and how many records are held', () => {
    for (const mode of ['exactly-once', 'at-least-once'] as const) {
      const h = createBarrierHandler(mode, new RecordDedupe(), 10);
      expect(h.describe()).toEqual({ held: 0, waitingBarriers: [] });
      h.onBarrier('a', barrier(2, 0), '10', 1);
      h.onBarrier('b', barrier(2, 0), '11', 1);
      h.onBarrier('a', barrier(3, 0), '12', 1);
      h.hold(data('a', 2, 0, '13'), 1);
      expect(h.describe()).toEqual({ held: mode === 'exactly-once' ? 1 : 0, waitingBarriers: ['2:a,b', '3:a'] });
    }
  });

  it("exactly-once: release gives back one epoch's held records in input order (position, then index in the record) and keeps later epochs held", () => {
    const h = createBarrierHandler('exactly-once', new RecordDedupe(), 10);
    const u = (epoch: number, seq: number, position: string, index: number): Unit => ({ ...data('a', epoch, seq, position), index });
    for (const x of [u(2, 0, '205', 1), u(3, 1, '201', 0), u(2, 2, '205', 0), u(2, 3, '202', 0)]) expect(h.hold(x, 1)).toBe('held');
    expect(h.release(4)).toEqual([]);
    expect(h.release(2).map((x) => `${x.position}/${x.index}`)).toEqual(['202/0', '205/0', '205/1']);
    expect(h.describe()).toMatchObject({ held: 1 });
    expect(h.settled).toBe(false);
    // a released record re-delivered is held again, not taken for a duplicate of one still held
    expect(h.hold(u(2, 3, '202', 0), 1)).toBe('held');
    expect(h.hold(u(3, 1, '201', 0), 1)).toBe('duplicate');
    expect(h.release(3).map((x) => x.position)).toEqual(['201']);
  });
});
