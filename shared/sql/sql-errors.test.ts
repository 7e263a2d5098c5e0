/**
 * The SQL front end: scripts that compile (and what they compile to), and scripts that do not, each
 * failing with a code, the line:column of the offending token and a message that says what to do.
 */
import { describe, expect, it } from 'vitest';
import { describePlan } from '../plan/describe.js';
import { planJob } from '../plan/planner.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { compileSql, SqlError } from './index.js';

const BID = `CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, dateTime TIMESTAMP(3))
  WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime');
`;

/** 1-based line:column of the n-th occurrence of `token` in `text`. */
function at(text: string, token: string, nth = 1): string {
  let i = -1;
  for (let k = 0; k < nth; k++) i = text.indexOf(token, i + 1);
  if (i < 0) throw new Error(`no ${token} in the text`);
  const before = text.slice(0, i).split('\n');
  return `${before.length}:${before[before.length - 1]!.length + 1}`;
}

function failure(sql: string): SqlError {
  try {
    compileSql(sql, { origin: 'q.sql' });
  } catch (err) {
    if (err instanceof SqlError) return err;
    throw err;
  }
  throw new Error('compiled without error');
}

describe('SQL errors carry line:column and an actionable message', () => {
  const cases: Array<{ what: string; sql: string; code: string; token: string; nth?: number; message: RegExp }> = [
    { what: 'syntax error', sql: `${BID}SELECT auction FROM\n  bid WHERE;`, code: 'SQL_SYNTAX', token: ';', nth: 2, message: /syntax error at the end of the statement/ },
    { what: 'reserved word as a name', sql: `${BID}CREATE TABLE out (a BIGINT) WITH ('connector' = 'collect');`, code: 'SQL_SYNTAX', token: 'out', message: /reserved word: write it in backquotes \(`out`\)/ },
    { what: 'unknown column', sql: `${BID}SELECT auction,\n       pricee FROM bid;`, code: 'SQL_UNKNOWN_COLUMN', token: 'pricee', message: /unknown column "pricee" \(columns: auction, bidder, price, channel, dateTime\)/ },
    { what: 'unknown qualifier', sql: `${BID}SELECT b.price, x.price FROM bid b;`, code: 'SQL_UNKNOWN_TABLE', token: 'x.price', message: /unknown table or alias "x" \(in scope: b\)/ },
    { what: 'unknown table', sql: `${BID}SELECT price FROM bids;`, code: 'SQL_UNKNOWN_TABLE', token: 'bids', message: /unknown table "bids" \(declared: bid\)/ },
    {
      what: 'column neither grouped nor aggregated',
      sql: `${BID}SELECT auction, price, COUNT(*) FROM bid GROUP BY auction;`,
      code: 'SQL_INVALID',
      token: 'price',
      nth: 2,
      message: /column "price" must appear in GROUP BY or be inside an aggregate/,
    },
    { what: 'unknown function', sql: `${BID}SELECT auction, FOO(price) FROM bid;`, code: 'SQL_UNSUPPORTED', token: 'FOO', message: /unknown function FOO \(scalar functions: .*; aggregates: COUNT, SUM, MIN, MAX, AVG\)/ },
    { what: 'ORDER BY on a stream', sql: `${BID}SELECT auction FROM bid ORDER BY auction;`, code: 'SQL_UNSUPPORTED', token: 'ORDER', message: /ORDER BY is not supported on a stream/ },
    { what: 'outer join', sql: `${BID}SELECT a.price FROM bid a LEFT JOIN bid b ON a.auction = b.auction;`, code: 'SQL_UNSUPPORTED', token: 'LEFT', message: /LEFT JOIN is not supported \(only inner joins\)/ },
    {
      what: 'window on a column that is not event time',
      sql: `${BID}SELECT COUNT(*) FROM bid GROUP BY TUMBLE(price, INTERVAL '1' SECOND);`,
      code: 'SQL_INVALID',
      token: 'price',
      nth: 2,
      message: /TUMBLE needs the event-time column of bid \(dateTime\), got price/,
    },
    {
      what: 'window property without the window',
      sql: `${BID}SELECT TUMBLE_START(dateTime, INTERVAL '1' SECOND), COUNT(*) FROM bid GROUP BY auction;`,
      code: 'SQL_INVALID',
      token: 'TUMBLE_START',
      message: /TUMBLE_START\(\.\.\.\) needs GROUP BY TUMBLE\(\.\.\.\)/,
    },
    {
      what: 'updating result into an append-only sink',
      sql: `${BID}CREATE TABLE counts (auction BIGINT, n BIGINT) WITH ('connector' = 'collect');\nINSERT INTO counts SELECT auction, COUNT(*) FROM bid GROUP BY auction;`,
      code: 'SQL_INVALID',
      token: 'counts',
      nth: 2,
      message: /result is updating .* write it to a connector = 'dynamodb' sink/,
    },
    {
      what: 'sink with another number of columns',
      sql: `${BID}CREATE TABLE narrow (auction BIGINT) WITH ('connector' = 'collect');\nINSERT INTO narrow SELECT auction, price FROM bid;`,
      code: 'SQL_INVALID',
      token: 'narrow',
      nth: 2,
      message: /the query produces 2 columns \(auction, price\) but sink narrow declares 1 \(auction\); columns go to the sink by position/,
    },
    { what: 'unknown table option', sql: `CREATE TABLE t (a BIGINT) WITH ('connector' = 'kinesis', 'shard' = '2');\nSELECT a FROM t;`, code: 'SQL_INVALID', token: "'shard'", message: /unknown option 'shard' \(options: connector, format, shards/ },
    { what: 'event_time naming no column', sql: `CREATE TABLE t (a BIGINT) WITH ('connector' = 'kinesis', 'event_time' = 'ts');\nSELECT a FROM t;`, code: 'SQL_UNKNOWN_COLUMN', token: "'event_time'", message: /event_time names column 'ts', which is not declared/ },
    { what: 'nested aggregate', sql: `${BID}SELECT MAX(COUNT(*)) FROM bid GROUP BY auction;`, code: 'SQL_INVALID', token: 'MAX', message: /aggregates cannot be nested/ },
    {
      what: 'join without an equality',
      sql: `${BID}SELECT a.price FROM bid a JOIN bid b ON a.price > b.price;`,
      code: 'SQL_UNSUPPORTED',
      token: 'JOIN',
      message: /a join needs an equality between a column of a and one of b/,
    },
  ];
  for (const c of cases) {
    it(c.what, () => {
      const e = failure(c.sql);
      expect(e.code).toBe(c.code);
      expect(e.detail).toMatch(c.message);
      expect(`${e.line}:${e.column}`).toBe(at(c.sql, c.token, c.nth));
      expect(e.message.startsWith(`q.sql:${e.line}:${e.column}: `)).toBe(true);
    });
  }
});

describe('SQL compiles through the public API to the same planner', () => {
  it('a grouped window query becomes source → keyBy → window stage → sink, with state declared', () => {
    const { job, sinks, sources } = compileSql(
      `${BID}SELECT auction, COUNT(*) AS n, TUMBLE_END(dateTime, INTERVAL '10' SECOND) AS wend FROM bid WHERE price > 10 GROUP BY auction, TUMBLE(dateTime, INTERVAL '10' SECOND);`,
      { name: 'tumbling' },
    );
    const plan = planJob(job);
    expect(sources).toEqual(['bid']);
    expect(sinks).toEqual([{ name: 'result', connector: 'collect', updating: false, columns: ['auction', 'n', 'wend'] }]);
    expect(plan.stages.map((s) => s.operators.map((o) => o.kind))).toEqual([
      ['source', 'filter', 'exchange'],
      ['window', 'map', 'sink'],
    ]);
    expect(describePlan(plan)).toMatch(/tumble window aggregate {2}state: windows/);
  });

  it('reads CSV records by column order and converts types; a bad record goes to the dead letters', async () => {
    const { job } = compileSql(
      `CREATE TABLE t (name VARCHAR, n BIGINT, ok BOOLEAN, ts TIMESTAMP) WITH ('connector' = 'kinesis', 'format' = 'csv');
       CREATE TABLE o (name VARCHAR, n BIGINT, ok BOOLEAN, ts TIMESTAMP) WITH ('connector' = 'collect');
       INSERT INTO o SELECT UPPER(name), n * 2, NOT ok, ts FROM t WHERE n IS NOT NULL;`,
      { name: 'csv' },
    );
    const r = new MemoryJobRunner(job);
    r.produce('t', ['"a, b",3,true,2026-01-01 00:00:01', 'c,,false,5', 'd,x,true,5']);
    await r.drain();
    expect(r.published('o')).toEqual([{ name: 'A, B', n: 6, ok: false, ts: Date.UTC(2026, 0, 1, 0, 0, 1) }]);
    expect(r.deadLetters()).toHaveLength(1);
  });

  it('several INSERT INTO statements share one source and make one job', () => {
    const { job, sinks } = compileSql(
      `${BID}CREATE TABLE a (auction BIGINT, n BIGINT, PRIMARY KEY (auction)) WITH ('connector' = 'dynamodb');
       CREATE TABLE b (price BIGINT) WITH ('connector' = 'collect');
       INSERT INTO a SELECT auction, COUNT(*) FROM bid GROUP BY auction;
       INSERT INTO b SELECT price FROM bid WHERE channel = 'Apple';`,
      { name: 'two' },
    );
    expect(planJob(job).sources).toHaveLength(1);
    expect(sinks.map((s) => [s.name, s.updating])).toEqual([
      ['a', true],
      ['b', false],
    ]);
  });

  it('an aggregate over an updating result retracts the rows it replaces (a histogram of bid counts)', async () => {
    const { job } = compileSql(
      `${BID}CREATE TABLE hist (n BIGINT, auctions BIGINT, top BIGINT, PRIMARY KEY (n)) WITH ('connector' = 'dynamodb');
       INSERT INTO hist
       SELECT n, COUNT(*), MAX(auction) FROM (SELECT auction, COUNT(*) AS n FROM bid WHERE price > 0 GROUP BY auction) WHERE n < 4 GROUP BY n;`,
      { name: 'hist' },
    );
    const r = new MemoryJobRunner(job, { seed: 4 });
    const bids = [1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5].map((auction, i) => ({ auction, bidder: i, price: 10, channel: 'x', dateTime: 1000 + i }));
    r.produce('bid', bids);
    await r.drain();
    // counts per auction: 1→1, 2→2, 3→3, 4→4 (filtered out: n < 4), 5→1
    const rows = [...r.upserts('hist').values()].map((v) => [v['n'], v['auctions'], v['top']]).sort();
    // n = 3 passed through 1 and 2 on its way; n = 4 retracted auction 4 from n = 3 (its MAX fell back to 3)
    expect(rows).toEqual([
      [1, 2, 5],
      [2, 1, 2],
      [3, 1, 3],
    ]);
  });
});
