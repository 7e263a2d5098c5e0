import { describe, expect, it } from 'vitest';
import { collectsGarbage, deltaNeeded, deltasToDelete } from './gc.js';

describe('delta garbage collection', () => {
  const needs = { retained: new Set([7, 9]), pointer: 9, latestCompleted: 9 };

  it('keeps the retained checkpoints, the current pointer and anything newer than the last completed checkpoint', () => {
    expect(deltasToDelete([3, 5, 6, 7, 8, 9, 10, 11], needs)).toEqual([3, 5, 6, 8]);
  });

  it('keeps a pointer that lags behind the retained window (an instance whose snapshot is older)', () => {
    expect(deltaNeeded(4, { ...needs, pointer: 4 })).toBe(true);
    expect(deltasToDelete([4, 5, 7, 9], { ...needs, pointer: 4 })).toEqual([5]);
  });

  it('keeps every delta of the chain the pointer names (base < k ≤ pointer): a restore folds them', () => {
    // pointer 9 with base 4: its rows since checkpoint 4 are in deltas 5..9, not in the state table
    expect(deltasToDelete([3, 4, 5, 6, 7, 8, 9, 10], { ...needs, base: 4 })).toEqual([3, 4]);
    // a pointer without a chain needs only its own delta
    expect(deltasToDelete([3, 4, 5, 6, 8, 9], { ...needs, base: undefined })).toEqual([3, 4, 5, 6, 8]);
  });

  it('deletes aborted checkpoints the pointer has moved past, once and in order', () => {
    expect(deltasToDelete([8, 8, 2, 8], needs)).toEqual([2, 8]);
  });

  it('keeps everything when nothing completed yet', () => {
    expect(deltasToDelete([1, 2], { retained: new Set(), pointer: undefined, latestCompleted: 0 })).toEqual([]);
  });

  it('collects about once a minute: every sixth checkpoint at a 10 s pause, every one at 60 s or more', () => {
    const at = (pauseMs: number) => Array.from({ length: 24 }, (_, i) => i + 1).filter((n) => collectsGarbage(n, pauseMs));
    expect(at(10_000)).toEqual([6, 12, 18, 24]);
    expect(at(60_000)).toHaveLength(24);
    expect(at(120_000)).toHaveLength(24);
    expect(at(7_000)).toEqual([9, 18]);
  });

  it('checkpoints slower than their pause still collect about once a minute: whenever one is open across a minute boundary', () => {
    // a 300 ms pause (every 200th id) and checkpoints of 14.7 s: 4 a minute, so the ids alone collect once in 50 minutes
    const t0 = Date.UTC(2026, 0, 1, 10, 0, 0);
    let collected = 0;
    for (let n = 1, t = t0; t < t0 + 10 * 60_000; n++, t += 15_000) {
      if (collectsGarbage(n, 300, { startedAt: t + 300, committedAt: t + 15_000 })) collected++;
    }
    expect(collected).toBe(10);
    expect(collectsGarbage(7, 300, { startedAt: t0 + 59_500, committedAt: t0 + 65_000 })).toBe(true);
    expect(collectsGarbage(7, 300, { startedAt: t0 + 65_000, committedAt: t0 + 80_000 })).toBe(false);
  });
});
