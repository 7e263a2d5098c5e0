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
});
