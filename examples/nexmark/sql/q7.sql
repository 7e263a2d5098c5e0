-- Nexmark q7: highest bid. The bids with the highest price of each 10 s tumbling window.
-- Deviation: the window maximum's event time is TUMBLE_ROWTIME (window end - 1 ms); the bid joins it
-- when it falls in the same window, an interval join of [-10 s + 1 ms, 0] on the two event times.
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE q7 (auction BIGINT, price BIGINT, bidder BIGINT, dateTime TIMESTAMP(3)) WITH ('connector' = 'collect');

INSERT INTO q7
SELECT B.auction, B.price, B.bidder, B.dateTime
FROM bid B
JOIN (
  SELECT MAX(price) AS maxprice, TUMBLE_ROWTIME(dateTime, INTERVAL '10' SECOND) AS rt
  FROM bid
  GROUP BY TUMBLE(dateTime, INTERVAL '10' SECOND)
) B1
ON B.price = B1.maxprice
WHERE B.dateTime > B1.rt - INTERVAL '10' SECOND AND B.dateTime <= B1.rt;
