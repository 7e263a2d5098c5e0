/**
 * A SUM that overflows when two windows' accumulators are merged — a session joined by a record
 * between two sessions, or a sliding window's panes merged at its firing — is refused like one an
 * add overflows: the record (or the firing) is a dead letter naming the sum, and no result carries
 * a sum JSON cannot write or a BIGINT that lost digits.
 */
import { describe, expect, it } from 'vitest';
import { decodePayload } from '../codec/payload.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { compileSql } from './index.js';

const table = (type: string) => `CREATE TABLE t (k VARCHAR, v ${type}, ts TIMESTAMP(3)) WITH ('connector' = 'kinesis', 'shards' = '1', 'event_time' = 'ts', 'watermark_delay_ms' = '60000');
CREATE TABLE o (k VARCHAR, total ${type}) WITH ('connector' = 'collect');
`;

async function run(sql: string, batches: readonly (readonly Record<string, unknown>[])[]) {
  const r = new MemoryJobRunner(compileSql(sql, { name: 'merge-overflow' }).job, { seed: 3 });
  for (const b of batches) {
    r.produce('t', [...b]);
    await r.drain();
  }
  r.endOfInput();
  await r.drain();
  return r;
}

const HALF = 2 ** 52; // two of them make 2^53, past ±(2^53 − 1)

describe('SUM over merged windows', () => {
  it('a record joining two sessions whose BIGINT sums overflow together is a dead letter; both sessions stay apart', async () => {
    const sql = `${table('BIGINT')}INSERT INTO o SELECT k, SUM(v) AS total FROM t GROUP BY k, SESSION(ts, INTERVAL '10' SECOND);`;
    // the watermark's delay keeps the first session open until the bridge at 9 s arrives
    const r = await run(sql, [[{ k: 'a', v: HALF, ts: 0 }, { k: 'a', v: HALF, ts: 15_000 }, { k: 'a', v: 0, ts: 9_000 }]]);
    const letters = r.deadLetters();
    expect(letters.map((l) => l.reason)).toEqual([expect.stringMatching(/SUM: the BIGINT sum 9007199254740992 is beyond/)]);
    expect(decodePayload(letters[0]!.data)).toMatchObject({ ts: 9_000 }); // the keyed stage's row of the bridge
    expect(r.published('o').map((row) => (row as { total: number }).total)).toEqual([HALF, HALF]);
  });

  it('a DOUBLE session sum merged past the largest double is a dead letter, not a result JSON writes as null', async () => {
    const sql = `${table('DOUBLE')}INSERT INTO o SELECT k, SUM(v) AS total FROM t GROUP BY k, SESSION(ts, INTERVAL '10' SECOND);`;
    const r = await run(sql, [[{ k: 'a', v: 1e308, ts: 0 }, { k: 'a', v: 1e308, ts: 15_000 }, { k: 'a', v: 0, ts: 9_000 }]]);
    expect(r.deadLetters().map((l) => l.reason)).toEqual([expect.stringMatching(/SUM: the sum overflows to Infinity/)]);
    expect(r.published('o').map((row) => (row as { total: number }).total)).toEqual([1e308, 1e308]);
  });

  it("a sliding window whose panes' sums overflow together fires as a dead letter, not as a result that lost digits", async () => {
    const sql = `${table('BIGINT')}INSERT INTO o SELECT k, SUM(v) AS total FROM t GROUP BY k, HOP(ts, INTERVAL '1' SECOND, INTERVAL '2' SECOND);`;
    const r = await run(sql, [[{ k: 'a', v: HALF, ts: 500 }, { k: 'a', v: HALF, ts: 1_500 }]]);
    const totals = r.published('o').map((row) => (row as { total: number }).total);
    for (const t of totals) expect(Math.abs(t)).toBeLessThanOrEqual(Number.MAX_SAFE_INTEGER);
    expect(totals).toEqual([HALF, HALF]); // [-1, 1) and [1, 3); [0, 2) holds both
    expect(r.deadLetters().map((l) => l.reason)).toEqual([expect.stringMatching(/SUM: the BIGINT sum 9007199254740992 is beyond/)]);
  });
});
