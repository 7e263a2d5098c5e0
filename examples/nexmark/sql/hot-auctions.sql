-- Bids per auction in 10 s windows sliding by 2 s (the inner part of q5), with HAVING.
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE hot_auctions (auction BIGINT, num BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3), top BIGINT, bidders BIGINT)
  WITH ('connector' = 'collect');

INSERT INTO hot_auctions
SELECT auction, COUNT(*) AS num,
       HOP_START(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS starttime,
       HOP_END(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS endtime,
       MAX(price) AS top, COUNT(DISTINCT bidder) AS bidders
FROM bid
GROUP BY auction, HOP(dateTime, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
HAVING COUNT(*) >= 3;
