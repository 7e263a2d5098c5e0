-- Nexmark q3: local item suggestion. Sellers in Oregon, Idaho or California who open auctions in
-- category 10. A regular (unbounded) join: both inputs stay in keyed state.
CREATE TABLE person (
  id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR,
  dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE auction (
  id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
  dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE q3 (name VARCHAR, city VARCHAR, state VARCHAR, id BIGINT) WITH ('connector' = 'collect');

INSERT INTO q3
SELECT P.name, P.city, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
