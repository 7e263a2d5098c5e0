-- Sessions of each bidder (a gap of 5 s closes a session): bids, total and average price.
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE bidder_sessions (bidder BIGINT, sstart TIMESTAMP(3), send TIMESTAMP(3), bids BIGINT, total BIGINT, avgprice DOUBLE, lo BIGINT)
  WITH ('connector' = 'collect');

INSERT INTO bidder_sessions
SELECT bidder, SESSION_START(dateTime, INTERVAL '5' SECOND), SESSION_END(dateTime, INTERVAL '5' SECOND),
       COUNT(*), SUM(price), AVG(price), MIN(price)
FROM bid
WHERE channel <> 'Apple'
GROUP BY bidder, SESSION(dateTime, INTERVAL '5' SECOND);
