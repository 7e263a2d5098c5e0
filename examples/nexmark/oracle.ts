/**
 * The test oracle for the Nexmark queries: DuckDB running, over the same events as a batch, a query
 * written independently of Sluice's SQL front end (windows are spelled out with arithmetic on the
 * ms timestamps, session windows with LAG and a running sum). Dev-only: @duckdb/node-api is a
 * devDependency.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import type { Auction, Bid, Person } from './generator.js';

const HOP = (table: string) => `(SELECT b.*, (dateTime - dateTime % 2000) - k * 2000 AS ws FROM ${table} b CROSS JOIN range(0, 5) r(k))`;
const COUNT_BIDS = `SELECT auction, COUNT(*) AS num, ws AS starttime FROM ${HOP('bid')} GROUP BY auction, ws`;

/** DuckDB's rendering of each query in examples/nexmark/sql, by file name. */
export const ORACLE_SQL: Record<string, string> = {
  q0: 'SELECT auction, bidder, price, dateTime, extra FROM bid',
  q1: 'SELECT auction, bidder, CAST(0.908 * price AS DOUBLE) AS price, dateTime, extra FROM bid',
  q2: 'SELECT auction, price FROM bid WHERE auction % 123 = 0',
  q3: `SELECT P.name, P.city, P.state, A.id FROM auction A JOIN person P ON A.seller = P.id
       WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')`,
  q4: `SELECT Q.category, AVG(Q.final) AS avgprice FROM (
         SELECT MAX(B.price) AS final, A.category FROM auction A, bid B
         WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires GROUP BY A.id, A.category) Q
       GROUP BY Q.category`,
  q5: `WITH c AS (${COUNT_BIDS}), m AS (SELECT starttime, MAX(num) AS maxn FROM c GROUP BY starttime)
       SELECT c.auction, c.num, c.starttime FROM c JOIN m ON c.starttime = m.starttime WHERE c.num >= m.maxn`,
  q7: `WITH m AS (SELECT dateTime - dateTime % 10000 AS ws, MAX(price) AS maxprice FROM bid GROUP BY 1)
       SELECT b.auction, b.price, b.bidder, b.dateTime FROM bid b JOIN m ON b.price = m.maxprice AND b.dateTime - b.dateTime % 10000 = m.ws`,
  q8: `WITH p AS (SELECT DISTINCT id, name, dateTime - dateTime % 10000 AS ws FROM person),
            a AS (SELECT DISTINCT seller, dateTime - dateTime % 10000 AS ws FROM auction)
       SELECT p.id, p.name, p.ws AS starttime FROM p JOIN a ON p.id = a.seller AND p.ws = a.ws`,
  'hot-auctions': `SELECT auction, COUNT(*) AS num, ws AS starttime, ws + 10000 AS endtime, MAX(price) AS top, COUNT(DISTINCT bidder) AS bidders
       FROM ${HOP('bid')} GROUP BY auction, ws HAVING COUNT(*) >= 3`,
  'max-bids': `WITH c AS (${COUNT_BIDS}) SELECT starttime, MAX(num) AS maxn FROM c GROUP BY starttime`,
  'bidder-sessions': `WITH f AS (SELECT * FROM bid WHERE channel <> 'Apple'),
       s AS (SELECT *, CASE WHEN dateTime - LAG(dateTime) OVER (PARTITION BY bidder ORDER BY dateTime) < 5000 THEN 0 ELSE 1 END AS fresh FROM f),
       g AS (SELECT *, SUM(fresh) OVER (PARTITION BY bidder ORDER BY dateTime ROWS UNBOUNDED PRECEDING) AS sid FROM s)
       SELECT bidder, MIN(dateTime) AS sstart, MAX(dateTime) + 5000 AS send, COUNT(*) AS bids, SUM(price) AS total, AVG(price) AS avgprice, MIN(price) AS lo
       FROM g GROUP BY bidder, sid`,
  'auction-stats': `SELECT auction, COUNT(*) AS bids, MAX(price) AS top, AVG(price) AS avgprice, COUNT(DISTINCT bidder) AS bidders FROM bid GROUP BY auction`,
};

const COLUMNS = {
  person: { id: 'BIGINT', name: 'VARCHAR', emailAddress: 'VARCHAR', creditCard: 'VARCHAR', city: 'VARCHAR', state: 'VARCHAR', dateTime: 'BIGINT', extra: 'VARCHAR' },
  auction: {
    id: 'BIGINT',
    itemName: 'VARCHAR',
    description: 'VARCHAR',
    initialBid: 'BIGINT',
    reserve: 'BIGINT',
    dateTime: 'BIGINT',
    expires: 'BIGINT',
    seller: 'BIGINT',
    category: 'BIGINT',
    extra: 'VARCHAR',
  },
  bid: { auction: 'BIGINT', bidder: 'BIGINT', price: 'BIGINT', channel: 'VARCHAR', url: 'VARCHAR', dateTime: 'BIGINT', extra: 'VARCHAR' },
};

/** An in-memory DuckDB holding the three Nexmark tables. */
export class NexmarkOracle {
  private constructor(
    private readonly db: DuckDBInstance,
    private readonly conn: DuckDBConnection,
  ) {}

  static async load(tables: { person: readonly Person[]; auction: readonly Auction[]; bid: readonly Bid[] }): Promise<NexmarkOracle> {
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    const dir = mkdtempSync(join(tmpdir(), 'nexmark-oracle-'));
    try {
      for (const [name, rows] of Object.entries(tables)) {
        const file = join(dir, `${name}.jsonl`);
        writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
        const cols = Object.entries(COLUMNS[name as keyof typeof COLUMNS])
          .map(([c, t]) => `${c}: '${t}'`)
          .join(', ');
        await conn.run(`CREATE TABLE ${name} AS SELECT * FROM read_json('${file}', format = 'newline_delimited', columns = {${cols}})`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    return new NexmarkOracle(db, conn);
  }

  /** Rows of a query, with BIGINTs as numbers. */
  async query(sql: string): Promise<Array<Record<string, unknown>>> {
    const r = await this.conn.runAndReadAll(sql);
    return r.getRowObjectsJS().map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v])));
  }

  close(): void {
    this.conn.closeSync();
    this.db.closeSync();
  }
}

/** Rows as a sorted list of canonical strings (floats to 9 significant digits), for comparing multisets. */
export function canonicalRows(rows: ReadonlyArray<Record<string, unknown>>, columns: readonly string[]): string[] {
  return rows
    .map((r) => JSON.stringify(columns.map((c) => (typeof r[c] === 'number' && !Number.isInteger(r[c]) ? Number((r[c] as number).toPrecision(9)) : (r[c] ?? null)))))
    .sort();
}
