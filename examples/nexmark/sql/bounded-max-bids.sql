-- max-bids over bounded input: the bids are JSON-lines objects (gzip or not) under s3://<job bucket>/input/bid/.
-- A bounded reader puts them into the table's stream and ends the input; every window fires at the end.
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 's3', 'prefix' = 'input/bid/', 'format' = 'json', 'shards' = '2', 'event_time' = 'dateTime');

CREATE TABLE max_bids (starttime TIMESTAMP(3), maxn BIGINT) WITH ('connector' = 'collect');

INSERT INTO max_bids
SELECT CountBids.starttime, MAX(CountBids.num) AS maxn
FROM (
  SELECT COUNT(*) AS num,
         HOP_START(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS starttime,
         HOP_ROWTIME(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS rt
  FROM bid
  GROUP BY auction, HOP(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
) AS CountBids
GROUP BY CountBids.starttime, TUMBLE(CountBids.rt, INTERVAL '2' SECOND);
