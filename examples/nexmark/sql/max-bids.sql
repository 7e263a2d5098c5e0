-- The most bids any auction got per sliding window (the MaxBids part of q5): a window aggregate
-- over a window aggregate, through the inner query's event time (HOP_ROWTIME).
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

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
