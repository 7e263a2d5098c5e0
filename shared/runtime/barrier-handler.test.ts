import { describe, expect, it } from 'vitest';
import type { BarrierEnvelope, DataEnvelope } from '../codec/envelope.js';
import { createBarrierHandler } from './barrier-handler.js';
import type { Unit } from './inner-packets.js';
import { RecordDedupe } from './record-dedupe.js';

const barrier = (checkpointId: number, count: number): BarrierEnvelope => ({ kind: 'barrier', checkpointId, count, topology: [1, 2], savepoint: false });
const data = (producer: string, epoch: number, seq: number, position: string): Unit => ({
  position,
  index: 0,
  producer,
  env: { kind: 'data', epoch, seq, keyGroup: 0, timestamp: undefined, payload: new Uint8Array() } satisfies DataEnvelope,
});
const twoProducers = () => 2;

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
    expect(h.takeOverflow()).toBe('199');
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
});
