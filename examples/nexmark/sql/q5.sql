-- Nexmark q5: hot items. For every 10 s window sliding by 2 s, the auctions with the most bids.
-- Deviation: Flink's q5 joins on window_start/window_end of window table functions; here both
-- sides are group windows whose event time (*_ROWTIME = window end - 1 ms) is propagated, and the
-- join on the same window is an interval join with zero width on that time.
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE q5 (auction BIGINT, num BIGINT, starttime TIMESTAMP(3)) WITH ('connector' = 'collect');

INSERT INTO q5
SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime
FROM (
  SELECT auction, COUNT(*) AS num,
         HOP_START(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS starttime,
         HOP_ROWTIME(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS rt
  FROM bid
  GROUP BY auction, HOP(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
) AS AuctionBids
JOIN (
  SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, TUMBLE_ROWTIME(CountBids.rt, INTERVAL '2' SECOND) AS rt
  FROM (
    SELECT COUNT(*) AS num,
           HOP_START(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS starttime,
           HOP_ROWTIME(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS rt
    FROM bid
    GROUP BY auction, HOP(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
  ) AS CountBids
  GROUP BY CountBids.starttime, TUMBLE(CountBids.rt, INTERVAL '2' SECOND)
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.rt = MaxBids.rt AND AuctionBids.num >= MaxBids.maxn;
