/**
 * Nexmark in SQL, in-process (MemoryJobRunner: the real stage runners on the in-memory twins),
 * against DuckDB running an independently written batch query over the same events. Results are
 * compared as multisets of rows; floats to 9 significant digits.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyedStream } from 'sluice';
import { compileSql } from 'sluice/sql';
import { MemoryJobRunner } from 'sluice/testing';
import { generateNexmark, splitNexmark } from './generator.js';
import { canonicalRows, NexmarkOracle, ORACLE_SQL } from './oracle.js';

const EVENTS = splitNexmark(generateNexmark({ seed: 7, events: 4_000, ratePerSecond: 200 }));
const JOINS = typeof (KeyedStream.prototype as unknown as Record<string, unknown>)['intervalJoin'] === 'function';
const CONNECT = typeof (KeyedStream.prototype as unknown as Record<string, unknown>)['connect'] === 'function';

/** Runs a SQL file over the events: produce everything, checkpoint, end of input, drain; returns the rows of its one sink. */
export async function runSqlInMemory(file: string, tables: Record<string, readonly unknown[]>, options: { seed?: number; recycle?: number } = {}) {
  const compiled = compileSql(readFileSync(new URL(`./sql/${file}.sql`, import.meta.url), 'utf8'), { name: file.replace(/[^A-Za-z0-9]/g, ''), origin: `${file}.sql` });
  const runner = new MemoryJobRunner(compiled.job, { seed: options.seed ?? 1, environments: 2, recycleProbability: options.recycle ?? 0 });
  for (const source of compiled.sources) {
    const rows = tables[source]!;
    for (let i = 0; i < rows.length; i += 500) {
      runner.produce(source, rows.slice(i, i + 500));
      if ((i / 500) % 3 === 2) await runner.checkpoint();
    }
  }
  await runner.runUntilIdle();
  runner.endOfInput();
  await runner.drain();
  const sink = compiled.sinks[0]!;
  const rows = sink.updating
    ? [...runner.upserts(sink.name).values()].map((r) => Object.fromEntries(sink.columns.map((c) => [c, r[c] ?? null])))
    : runner.published<Record<string, unknown>>(sink.name);
  return { rows, columns: sink.columns, deadLetters: runner.deadLetters().length };
}

describe('Nexmark in SQL vs DuckDB (in-process)', () => {
  let oracle: NexmarkOracle;
  beforeAll(async () => {
    oracle = await NexmarkOracle.load(EVENTS);
  });
  afterAll(() => oracle?.close());

  const cases: Array<[string, boolean, string]> = [
    ['q0', true, 'pass-through'],
    ['q1', true, 'currency conversion (projection with arithmetic)'],
    ['q2', true, 'selection (WHERE with MOD)'],
    ['hot-auctions', true, 'HOP windows, COUNT, MAX, COUNT(DISTINCT), HAVING'],
    ['max-bids', true, 'a TUMBLE window over a HOP window result (event time through HOP_ROWTIME)'],
    ['bidder-sessions', true, 'SESSION windows with WHERE, COUNT, SUM, AVG, MIN'],
    ['auction-stats', true, 'a non-windowed GROUP BY: an updating result upserted by key into DynamoDB'],
    ['q3', CONNECT, 'regular join (needs KeyedStream.connect)'],
    ['q4', CONNECT, 'average closing price per category: regular join, then an aggregate over an updating result (retractions)'],
    ['q5', JOINS, 'hot items: windows of windows, interval join on window time (needs KeyedStream.intervalJoin)'],
    ['q7', JOINS, 'highest bid: interval join of bids with the window maximum (needs KeyedStream.intervalJoin)'],
    ['q8', JOINS, 'new users: window join as zero-width interval join (needs KeyedStream.intervalJoin)'],
  ];
  for (const [name, enabled, what] of cases) {
    it.runIf(enabled)(`${name}: ${what} — same rows as DuckDB`, async () => {
      const got = await runSqlInMemory(name, EVENTS);
      const want = await oracle.query(ORACLE_SQL[name]!);
      expect(got.deadLetters).toBe(0);
      expect(want.length).toBeGreaterThan(0);
      expect(canonicalRows(got.rows, got.columns)).toEqual(canonicalRows(want, got.columns));
    });
  }

  it('a windowed query gives the same rows when environments lose their caches (restore + replay)', async () => {
    const got = await runSqlInMemory('hot-auctions', EVENTS, { seed: 11, recycle: 0.3 });
    const want = await oracle.query(ORACLE_SQL['hot-auctions']!);
    expect(canonicalRows(got.rows, got.columns)).toEqual(canonicalRows(want, got.columns));
  });
});
