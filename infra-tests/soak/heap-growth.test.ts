/** The soak's heap figure: medians of the first minute after warm-up and of the last minute, not two single samples. */
import { describe, expect, it } from 'vitest';
import { heapGrowth } from './soak.js';

const at = (s: number, heapMb: number, phase: 'catch-up' | 'steady' = 'steady') => ({ atMs: s * 1000, phase, heapMb });

describe('heapGrowth', () => {
  it('compares the median of the first minute from warm-up with the median of the last minute', () => {
    const samples = [
      at(0, 30, 'catch-up'),
      at(10, 40, 'catch-up'),
      at(20, 50), // before warm-up
      ...[30, 40, 50, 60, 70, 80, 90].map((s, i) => at(s, [60, 66, 58, 60, 61, 59, 60][i]!)), // 30..90 s: median 60
      ...[100, 200, 300].map((s) => at(s, 62)),
      ...[310, 320, 330, 340, 350, 360].map((s, i) => at(s, [70, 64, 66, 66, 57, 66][i]!)), // 300..360 s: median 66 (with 62 at 300 s)
    ];
    const g = heapGrowth(samples, 25_000);
    expect([g.heapWarmMb, g.heapEndMb]).toEqual([60, 66]);
    expect(g.heapGrowthPct).toBeCloseTo(10, 5);
    expect([g.warmWindow[0]!.atMs, g.warmWindow.at(-1)!.atMs, g.endWindow[0]!.atMs]).toEqual([30_000, 90_000, 300_000]);
  });

  it('a single spike at the end moves nothing', () => {
    const samples = [...Array.from({ length: 30 }, (_, i) => at(i * 10, 50)), at(300, 90)];
    expect(heapGrowth(samples, 0).heapGrowthPct).toBe(0);
  });
});
