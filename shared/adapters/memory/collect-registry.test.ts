/**
 * The collect sink's store: outputs staged per (producer, epoch, seq), published once at the commit
 * that covers their epoch, and let go of once published.
 */
import { describe, expect, it } from 'vitest';
import { CollectRegistry } from './collect-registry.js';

const out = (epoch: number, seq: number, value: unknown = { n: seq }) => ({ producer: 's1:0', epoch, seq, value });

describe('CollectRegistry', () => {
  it('publishes each output once, lets go of it once published, and still tells a re-stage with other content', async () => {
    const r = new CollectRegistry();
    await r.stage('k', Array.from({ length: 50 }, (_, i) => out(1 + (i % 2), i)));
    expect(r.pending()).toBe(50);
    expect(r.publish(2)).toBe(25); // epoch 1 only
    expect(r.pending()).toBe(25);
    expect(r.publish(3)).toBe(25);
    expect(r.pending()).toBe(0);
    expect(r.publish(3)).toBe(0);
    // a replay stages published outputs again: the same content is neither published twice nor a conflict
    await r.stage('k', [out(1, 0), out(2, 1)]);
    expect(r.pending()).toBe(0);
    expect(r.publish(4)).toBe(0);
    expect(r.conflicts).toBe(0);
    // other content under a published id is non-determinism
    await r.stage('k', [out(1, 2, { n: 'other' })]);
    expect([r.conflicts, [...r.conflictedSinks]]).toEqual([1, ['k']]);
    // and under a staged, unpublished id too
    await r.stage('k', [out(5, 0), out(5, 0, { n: 'other' })]);
    expect(r.conflicts).toBe(2);
    expect(r.published('k')).toHaveLength(50);
  });
});
