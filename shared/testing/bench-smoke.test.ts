/**
 * Smoke test of `npm run bench` on a tiny input (no emulators, no files): every in-process section
 * runs, the table and the chart render, the summary line has its fields. Performance is never
 * asserted here (shared machines are noisy); docs/performance.md holds the figures.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { renderSvg, renderTable, runBench } from '../../bench/main.js';
import { itemSize, numberSize, writeUnits } from '../../bench/dynamo-size.js';
import { keyGroupOf } from '../plan/key-groups.js';
import { keyGroupOfKey } from '../runtime/keyed-state.js';

describe('bench (smoke)', () => {
  it('runs every in-process section on a tiny input and prints one summary line', async () => {
    const r = await runBench({ quick: true, emulators: false });
    expect(r.summary).toMatch(/^bench: hotpath_eps=\d+ hotpath_ratio=[\d.]+ overhead_bytes=[\d.]+ ckpt_wcu_ratio=[\d.]+ usd_per_million=[\d.]+$/);
    // the engine did the work the hand-written loop did
    expect(r.hotpath.count.checksum.engine).toBe(r.hotpath.count.checksum.hand);
    expect(r.hotpath.window.outputs.engine).toBe(r.hotpath.window.outputs.hand);
    expect(r.checkpoints[0]!.used.total).toBeGreaterThanOrEqual(r.checkpoints[0]!.floor);
    expect(renderTable(r)).toContain('| Hot path: keyed count');
    expect(renderSvg(r)).toMatch(/^<svg [^]*<\/svg>\n$/);
  }, 20_000);

  it('sizes DynamoDB items as DynamoDB bills them', () => {
    expect(numberSize(0)).toBe(1);
    expect(numberSize(12345)).toBe(4); // dynalite's rule, which AWS's examples match
    expect(itemSize({ pk: 'ab', n: 1, b: new Uint8Array(10), m: { x: 'yz' }, l: [true] })).toBe(2 + 2 + 1 + 2 + 1 + 10 + 1 + (3 + 1 + 1 + 2) + 1 + (3 + 1 + 1));
    expect(writeUnits(1024)).toBe(1);
    expect(writeUnits(1025)).toBe(2);
    expect(writeUnits(10, 3000)).toBe(3); // the larger of before and after
  });

  it("keyGroupOfKey (the engine's) gives keyGroupOf's key group for every key", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.stringMatching(/^user-\d{1,6}$/)), fc.integer({ min: 1, max: 32_768 }), (key, n) => {
        expect(keyGroupOfKey(key, n)).toBe(keyGroupOf(key, n));
      }),
    );
  });
});
