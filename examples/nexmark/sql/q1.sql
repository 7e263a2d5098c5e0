-- Nexmark q1: currency conversion. Bid prices from dollars to euros.
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE q1 (auction BIGINT, bidder BIGINT, price DOUBLE, dateTime TIMESTAMP(3), extra VARCHAR)
  WITH ('connector' = 'collect');

INSERT INTO q1
SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM bid;
