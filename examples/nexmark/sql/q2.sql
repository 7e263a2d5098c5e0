-- Nexmark q2: selection. Bids on a few auctions (every 123rd auction id).
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE q2 (auction BIGINT, price BIGINT) WITH ('connector' = 'collect');

INSERT INTO q2
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
