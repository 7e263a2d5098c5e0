/**
 * A deployable SQL job: two Nexmark queries over the same bid stream, compiled from SQL by the same
 * planner as any job. `npx cdk synth -c sluice:example=nexmark` synthesizes it; `sluice plan
 * examples/nexmark/job.ts` describes it.
 *
 * The SQL is a string in this module (not a .sql file read at run time) so that the Lambda bundle
 * carries it: esbuild bundles imports, not files opened at run time. For a .sql file, read it at
 * synth time in a module like this one and pass the text: `sqlJob(readFileSync('q.sql', 'utf8'))`
 * works locally (`sluice sql q.sql`), but a deployed function must get the text through its bundle.
 */
import { sqlJob } from 'sluice/sql';

export const NEXMARK_SQL = `
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

-- hot auctions: bids per auction in 10 s windows sliding by 2 s, as JSON-lines files in S3
CREATE TABLE hot_auctions (auction BIGINT, num BIGINT, starttime TIMESTAMP(3), top BIGINT)
  WITH ('connector' = 's3', 'prefix' = 'sinks/hot-auctions');

-- per-auction statistics, updated after every bid, upserted into DynamoDB by auction
CREATE TABLE auction_stats (auction BIGINT, bids BIGINT, top BIGINT, avgprice DOUBLE, PRIMARY KEY (auction))
  WITH ('connector' = 'dynamodb');

INSERT INTO hot_auctions
SELECT auction, COUNT(*), HOP_START(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND), MAX(price)
FROM bid
GROUP BY auction, HOP(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND);

INSERT INTO auction_stats
SELECT auction, COUNT(*), MAX(price), AVG(price) FROM bid GROUP BY auction;
`;

export default sqlJob(NEXMARK_SQL, {
  name: 'nexmark',
  origin: 'examples/nexmark/job.ts',
  job: { maxParallelism: 64, checkpoint: { intervalMs: 5_000, timeoutMs: 60_000 } },
});
