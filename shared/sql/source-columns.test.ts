/**
 * A source table's rows carry only the columns some query of the script reads (and the event
 * time): the rest is converted — a bad value still sends the record to the dead letters — but not
 * carried to the next stage. Every way a query reaches a column must keep it: the SELECT list, a
 * `*`, WHERE, a join's columns, another statement reading the same table.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { compileSql } from './index.js';

const BID = `CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3))
  WITH ('connector' = 'kinesis', 'shards' = '1', 'event_time' = 'dateTime');
`;
const sink = (name: string, cols: string) => `CREATE TABLE ${name} (${cols}) WITH ('connector' = 'collect');\n`;

const bids = [
  { auction: 1, bidder: 10, price: 5, channel: 'web', url: 'u1', dateTime: 1_000 },
  { auction: 2, bidder: 11, price: 9, channel: 'app', url: 'u2', dateTime: 2_000 },
  { auction: 1, bidder: 12, price: 7, channel: 'app', url: 'u3', dateTime: 3_000 },
];

/** The source's parsed row of a raw bid, as the source stage hands it on. */
function parsedRow(sql: string, raw: Record<string, unknown>): Record<string, unknown> {
  const src = compileSql(sql, { name: 'cols' }).job.nodes.find((n) => n.kind === 'source' && n.name === 'bid');
  if (!src || !('parse' in src) || !src.parse) throw new Error('no parse on the bid source');
  return src.parse(raw) as Record<string, unknown>;
}

async function run(sql: string, input: readonly Record<string, unknown>[] = bids) {
  const r = new MemoryJobRunner(compileSql(sql, { name: 'cols' }).job, { seed: 4 });
  r.produce('bid', [...input]);
  r.endOfInput();
  await r.drain();
  return r;
}
const sorted = (rows: unknown[]) => rows.map((x) => JSON.stringify(x)).sort();

describe("a source's rows carry only the columns read", () => {
  it("Nexmark q5's bids carry the auction and the event time only", () => {
    const q5 = readFileSync(new URL('../../examples/nexmark/sql/q5.sql', import.meta.url), 'utf8');
    expect(parsedRow(q5, { ...bids[0], extra: '' })).toEqual({ auction: 1, dateTime: 1_000 });
  });

  it('the event time is carried even when no query reads it', async () => {
    const sql = `${BID}${sink('o', 'auction BIGINT')}INSERT INTO o SELECT auction FROM bid;`;
    expect(parsedRow(sql, bids[0]!)).toEqual({ auction: 1, dateTime: 1_000 });
    const r = await run(sql);
    expect(sorted(r.published('o'))).toEqual(sorted(bids.map((b) => ({ auction: b.auction }))));
    expect(r.deadLetters()).toEqual([]);
  });

  it('a * reads every column', async () => {
    const sql = `${BID}${sink('o', 'auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3)')}INSERT INTO o SELECT * FROM (SELECT * FROM bid) AS x;`;
    expect(sorted((await run(sql)).published('o'))).toEqual(sorted(bids));
  });

  it('a column read only by WHERE is carried to the WHERE', async () => {
    const sql = `${BID}${sink('o', 'auction BIGINT')}INSERT INTO o SELECT auction FROM bid WHERE channel = 'app' AND bidder > 11;`;
    expect(sorted((await run(sql)).published('o'))).toEqual(sorted([{ auction: 1 }]));
  });

  it("a join's columns, read through either side", async () => {
    const sql = `${BID}${sink('o', 'url VARCHAR, price BIGINT')}INSERT INTO o SELECT a.url, b.price FROM bid a JOIN bid b ON a.auction = b.auction AND a.dateTime = b.dateTime;`;
    expect(sorted((await run(sql)).published('o'))).toEqual(sorted(bids.map((b) => ({ url: b.url, price: b.price }))));
  });

  it('a column another statement reads is carried to it too (one source stream per table)', async () => {
    const sql = `${BID}${sink('o1', 'auction BIGINT')}${sink('o2', 'u VARCHAR')}INSERT INTO o1 SELECT auction FROM bid;\nINSERT INTO o2 SELECT url AS u FROM bid;`;
    const r = await run(sql);
    expect(sorted(r.published('o1'))).toEqual(sorted(bids.map((b) => ({ auction: b.auction }))));
    expect(sorted(r.published('o2'))).toEqual(sorted(bids.map((b) => ({ u: b.url }))));
  });

  it('a bad value in a column no query reads still sends the record to the dead letters', async () => {
    const sql = `${BID}${sink('o', 'auction BIGINT')}INSERT INTO o SELECT auction FROM bid;`;
    const r = await run(sql, [bids[0]!, { ...bids[1]!, bidder: 'not a number' }, bids[2]!]);
    expect(sorted(r.published('o'))).toEqual(sorted([{ auction: 1 }, { auction: 1 }]));
    expect(r.deadLetters()).toHaveLength(1);
  });
});
