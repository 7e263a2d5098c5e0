/**
 * Sub-plan reuse: a windowed aggregate that two subqueries of one statement compute over the same
 * input is planned once (Nexmark q5's HOP count); any difference in input, WHERE, window or GROUP
 * BY keys plans two.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { planJob } from '../plan/planner.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { compileSql } from './index.js';

const TABLES = `CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, dateTime TIMESTAMP(3))
  WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime');
CREATE TABLE bid2 (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, dateTime TIMESTAMP(3))
  WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime');
CREATE TABLE o (auction BIGINT, n BIGINT, top BIGINT, m BIGINT) WITH ('connector' = 'collect');
`;

interface Side {
  from?: string;
  select?: string;
  where?: string;
  groups?: string;
  size?: number;
}

/** A join of two windowed aggregates over bids, A (count and maximum) and B (maximum), on auction and window. */
function pair(a: Side = {}, b: Side = {}): string {
  const sub = (s: Side, select: string) => {
    const w = `dateTime, INTERVAL '${s.size ?? 10}' SECOND`;
    return `SELECT auction, ${s.select ?? select}, TUMBLE_ROWTIME(${w}) AS rt FROM ${s.from ?? 'bid'}${s.where ? ` WHERE ${s.where}` : ''} GROUP BY ${s.groups ?? 'auction'}, TUMBLE(${w})`;
  };
  return `${TABLES}INSERT INTO o SELECT A.auction, A.n, A.top, B.m
  FROM (${sub(a, 'COUNT(*) AS n, MAX(price) AS top')}) AS A
  JOIN (${sub(b, 'MAX(price) AS m')}) AS B
  ON A.auction = B.auction AND A.rt = B.rt;`;
}

const windowOperators = (sql: string) =>
  planJob(compileSql(sql, { name: 'reuse' }).job)
    .stages.flatMap((s) => s.operators)
    .filter((o) => o.kind === 'window');

describe('a windowed aggregate named twice in a statement is planned once', () => {
  it("Nexmark q5: one HOP count stage feeds both AuctionBids and MaxBids' CountBids", () => {
    const plan = planJob(compileSql(readFileSync(new URL('../../examples/nexmark/sql/q5.sql', import.meta.url), 'utf8'), { name: 'q5' }).job);
    const windows = plan.stages.flatMap((s) => s.operators.filter((o) => o.kind === 'window').map((o) => o.name));
    expect(windows).toEqual(['hop window aggregate', 'tumble window aggregate']);
    // bid → one keyBy; the HOP stage feeds both the TUMBLE stage and the join
    expect(plan.stages.map((s) => s.operators.filter((o) => o.kind === 'exchange').length)).toEqual([1, 2, 1, 0]);
  });

  it('a subquery whose aggregates are among another\'s reads its rows, whatever the aliases', async () => {
    const sql = pair({ from: 'bid x' }, { from: 'bid y' });
    expect(windowOperators(sql)).toHaveLength(1);
    const { job } = compileSql(sql, { name: 'reuse' });
    const r = new MemoryJobRunner(job, { seed: 3 });
    r.produce('bid', [
      { auction: 1, bidder: 1, price: 5, channel: 'c', dateTime: 1_000 },
      { auction: 1, bidder: 2, price: 9, channel: 'c', dateTime: 2_000 },
      { auction: 2, bidder: 1, price: 7, channel: 'c', dateTime: 3_000 },
      { auction: 1, bidder: 3, price: 4, channel: 'c', dateTime: 12_000 },
    ]);
    r.endOfInput();
    await r.drain();
    // B's MAX is the second value of the shared rows: it must not read A's COUNT
    const rows = r.published<Record<string, number>>('o').map((x) => [x['auction'], x['n'], x['top'], x['m']]);
    expect(rows.sort()).toEqual([
      [1, 1, 4, 4],
      [1, 2, 9, 9],
      [2, 1, 7, 7],
    ]);
  });

  const differing: Array<[string, Side, Side]> = [
    ['WHERE', {}, { where: 'price > 10' }],
    ['window size', {}, { size: 20 }],
    ['GROUP BY keys', {}, { groups: 'auction, bidder' }],
    ['input table', {}, { from: 'bid2' }],
    ['an aggregate the first did not compute', { select: 'COUNT(*) AS n, COUNT(*) AS top' }, {}],
  ];
  for (const [what, a, b] of differing) {
    it(`two subqueries differing in ${what} are planned apart`, () => {
      expect(windowOperators(pair(a, b))).toHaveLength(2);
    });
  }
});
