/**
 * Smoke test of `npm run bench` on a tiny input (no emulators, no files): every in-process part
 * runs, the table and the chart render, the summary line has its fields. Performance is never
 * asserted here (shared machines are noisy); docs/performance.md holds the figures.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseArgs, renderSvg, renderTable, runBench, summaryLine } from '../../bench/main.js';
import { itemSize, numberSize, writeUnits } from '../../bench/dynamo-size.js';
import { measurePath } from '../../bench/handler.js';
import { keyGroupOf } from '../plan/key-groups.js';
import { keyGroupOfKey } from '../runtime/keyed-state.js';

describe('bench (smoke)', () => {
  it('runs every in-process part on a tiny input and prints one summary line', async () => {
    const r = await runBench({ quick: true });
    expect(r.parts).not.toContain('emulated');
    expect(r.summary).toMatch(
      /^bench: handler_eps=\d+ fair_ratio=[\d.]+ source_eps=\d+ window_fair_ratio=[\d.]+ ckpt_cpu_events_per_key=[\d.]+ ckpt_wcu_uniform=[\d.]+ ckpt_wcu_hot=[\d.]+ ckpt_wcu_tail=[\d.]+ nexmark_q5_eps_core=\d+ overhead_bytes=[\d.]+$/,
    );
    // the engine did the work the fair loops did
    expect(r.handler!.checksum.engine).toBe(r.handler!.checksum.fair);
    expect(r.handler!.outputs.engine).toBe(r.handler!.outputs.fair);
    expect(r.window!.checksum.engine).toBe(r.window!.checksum.fair);
    expect(r.source!.outputs.engine).toBe(r.source!.outputs.fair);
    // rates are events over total time: the checkpoints' time is inside the engine's total
    expect(r.handler!.engine.wallMs).toBeGreaterThan(r.handler!.engineData.wallMs);
    expect(r.handler!.checkpoints.dirtyKeys).toBeGreaterThan(0);
    for (const c of r.checkpoints!) expect(c.used.total).toBeGreaterThanOrEqual(c.layoutFreeFloor);
    expect(r.nexmark!.figures.map((f) => f.query)).toEqual(['q0', 'q1', 'q2', 'q5', 'q7', 'q8']);
    expect(renderTable(r)).toContain('| Keyed count through the handler');
    expect(renderSvg(r)).toMatch(/^<svg [^]*<\/svg>\n$/);
  }, 60_000);

  it('a path with no timed round is refused, not reported as NaN', async () => {
    const spec = { path: 'window', shape: { eventsPerPacket: 10, packetsPerBatch: 2, batchesPerRound: 2 }, sourceBatch: 10, sourcePerCheckpoint: 40, rounds: 2, warmupRounds: 2, keys: 10 } as const;
    await expect(measurePath(spec)).rejects.toThrow(/2 rounds left out of 2: at least one must be timed/);
  }, 60_000);

  it('parses the command line and refuses what it does not know', () => {
    expect(parseArgs(['--quick', '--only', 'handler,nexmark'])).toEqual({ help: false, quick: true, only: ['handler', 'nexmark'], out: undefined });
    expect(parseArgs(['--help']).help).toBe(true);
    expect(parseArgs(['--only=cost']).only).toEqual(['cost']);
    expect(() => parseArgs(['--only', 'hotpath'])).toThrow(/unknown part "hotpath"/);
    expect(() => parseArgs(['--hotpath-only'])).toThrow(/unknown option/);
    expect(() => parseArgs(['--only'])).toThrow(/needs a value/);
  });

  it('a summary line of a partial run marks what did not run', () => {
    const line = summaryLine({ version: 2, date: '', quick: true, parts: [], machine: { node: '', cpus: 1, cpu: '', loadAvgAtStart: [] } });
    expect(line).toBe('bench: handler_eps=- fair_ratio=- source_eps=- window_fair_ratio=- ckpt_cpu_events_per_key=- ckpt_wcu_uniform=- ckpt_wcu_hot=- ckpt_wcu_tail=- nexmark_q5_eps_core=- overhead_bytes=-');
  });

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
