import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ceilingMs, timeoutVerdict, windowMs } from './timeouts.js';

const T = 1000; // timeoutMs

/**
 * The workflow around the rule: it waits one window (`timeoutMs`), then asks for a verdict; the
 * coordinator restarts the window when it sees the ack count grew. `ackTimes` are when each
 * instance acks, in ms after the start. Returns when the checkpoint completed, or that it aborted.
 */
function run(ackTimes: readonly number[], abortedBefore: number): { completedAt: number } | { abortedAt: number; reason: string } {
  const sorted = [...ackTimes].sort((a, b) => a - b);
  const expected = sorted.length;
  const acksAt = (t: number) => sorted.filter((x) => x <= t).length;
  let seen = 0;
  let since = 0;
  for (let now = T; ; now += T) {
    if (acksAt(now) === expected) return { completedAt: sorted[expected - 1]! };
    const acks = acksAt(now);
    if (acks > seen) {
      seen = acks;
      since = now;
    }
    const v = timeoutVerdict({ ageMs: now, quietMs: now - since, acks, expected, abortedBefore }, T);
    if (v.abort) return { abortedAt: now, reason: v.reason };
  }
}

describe('checkpoint timeouts: a progress window under a ceiling', () => {
  it('keeps a checkpoint open while acks keep arriving, however long it takes below the ceiling', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: T - 1 }), { minLength: 2, maxLength: 12 }), (gaps) => {
        // each ack comes less than one window after the one before
        const times = gaps.map((_, i) => gaps.slice(0, i + 1).reduce((a, b) => a + b, 0));
        fc.pre(times[times.length - 1]! < ceilingMs(T) - T);
        const r = run(times, 0);
        expect(r).toEqual({ completedAt: times[times.length - 1] });
      }),
    );
  });

  it('aborts a checkpoint that got no ack for a whole window, and says so', () => {
    const r = run([300, 900, 5_000], 0);
    // the two acks are seen at the first look (1 s), nothing more by the next one
    expect(r).toMatchObject({ abortedAt: 2000 });
    expect((r as { reason: string }).reason).toMatch(/no acknowledgement for 1000 ms since the last one \(window 1000 ms\) with 2 of 3 acks/);
    expect((run([4_000], 0) as { reason: string }).reason).toMatch(/since it started/);
  });

  it('never keeps a checkpoint open past the ceiling', () => {
    const trickle = Array.from({ length: 40 }, (_, i) => 500 + i * 600); // an ack every 600 ms, for 24 s
    const r = run(trickle, 0);
    expect(r).toMatchObject({ abortedAt: ceilingMs(T) });
    expect((r as { reason: string }).reason).toMatch(/reached the ceiling of 10000 ms/);
  });

  it('after aborts the window grows, so a job whose first ack needs longer than timeoutMs completes a later checkpoint', () => {
    fc.assert(
      fc.property(fc.integer({ min: T, max: ceilingMs(T) - 2 * T }), fc.integer({ min: 1, max: 8 }), (firstAck, instances) => {
        // every checkpoint needs `firstAck` ms before any ack (a queue to cross), then acks come fast
        const times = Array.from({ length: instances }, (_, i) => firstAck + i * 10);
        let aborted = 0;
        for (;;) {
          const r = run(times, aborted);
          if ('completedAt' in r) break;
          aborted++;
          expect(aborted).toBeLessThanOrEqual(Math.ceil(Math.log2(ceilingMs(T) / T)));
          expect(windowMs(T, aborted)).toBeGreaterThan(windowMs(T, aborted - 1));
        }
      }),
    );
  });
});
