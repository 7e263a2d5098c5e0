/** The default batching window: fewer batches, and a checkpoint's barriers still cross a few stages well within its interval and its progress window. */
import { describe, expect, it } from 'vitest';
import { BATCHING, defaultBatchingWindowMs, maxBatchingWindowMs } from './stage-batching.js';

describe('the default batching window', () => {
  it('is a fifth of the time between checkpoints in whole seconds, at most 5 s, none below 1 s', () => {
    expect(defaultBatchingWindowMs({ intervalMs: 10_000, minPauseMs: 0, timeoutMs: 60_000 })).toBe(2000);
    expect(defaultBatchingWindowMs({ intervalMs: 10_000, minPauseMs: 20_000, timeoutMs: 60_000 })).toBe(4000);
    expect(defaultBatchingWindowMs({ intervalMs: 7_000, minPauseMs: 0, timeoutMs: 60_000 })).toBe(1000);
    expect(defaultBatchingWindowMs({ intervalMs: 600_000, minPauseMs: 0, timeoutMs: 600_000 })).toBe(5000);
    expect(defaultBatchingWindowMs({ intervalMs: 4_000, minPauseMs: 0, timeoutMs: 60_000 })).toBe(0);
  });

  it('lets a barrier cross three stages within 60 % of the interval and 75 % of the progress window, whatever the settings', () => {
    for (const intervalMs of [100, 1000, 2500, 5000, 9999, 10_000, 30_000, 60_000, 300_000]) {
      for (const timeoutMs of [1000, 4000, 10_000, 60_000, 600_000]) {
        const w = defaultBatchingWindowMs({ intervalMs, minPauseMs: 0, timeoutMs });
        expect(w % 1000).toBe(0);
        expect(3 * w).toBeLessThanOrEqual(0.6 * intervalMs);
        expect(3 * w).toBeLessThanOrEqual(0.75 * timeoutMs);
        expect(w).toBeLessThanOrEqual(maxBatchingWindowMs({ timeoutMs }));
        expect(w).toBeLessThanOrEqual(BATCHING.windowCapMs);
      }
    }
  });
});
