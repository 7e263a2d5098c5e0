-- Nexmark q4: average closing price per category. The closing price of an auction is its highest
-- bid before it expires (a regular join with a time condition on a column, then a GROUP BY: an
-- updating result); the average per category is an aggregate over that updating result, which
-- retracts an auction's old price whenever a higher bid replaces it. Upserted into DynamoDB.
CREATE TABLE auction (
  id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
  dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE q4 (category BIGINT, avgprice DOUBLE, PRIMARY KEY (category)) WITH ('connector' = 'dynamodb');

INSERT INTO q4
SELECT Q.category, AVG(Q.final)
FROM (
  SELECT MAX(B.price) AS final, A.category
  FROM auction A, bid B
  WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
  GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
