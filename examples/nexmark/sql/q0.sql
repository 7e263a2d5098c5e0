-- Nexmark q0: pass-through. Every bid, unchanged (measures the cost of moving records).
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE q0 (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3), extra VARCHAR)
  WITH ('connector' = 'collect');

INSERT INTO q0
SELECT auction, bidder, price, dateTime, extra FROM bid;
