-- A non-windowed aggregate: an updating result, upserted by key (auction) into a DynamoDB table.
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE auction_stats (auction BIGINT, bids BIGINT, top BIGINT, avgprice DOUBLE, bidders BIGINT, PRIMARY KEY (auction))
  WITH ('connector' = 'dynamodb');

INSERT INTO auction_stats
SELECT auction, COUNT(*) AS bids, MAX(price) AS top, AVG(price) AS avgprice, COUNT(DISTINCT bidder) AS bidders
FROM bid
GROUP BY auction;
