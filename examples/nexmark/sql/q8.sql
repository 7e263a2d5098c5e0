-- Nexmark q8: monitor new users. People who registered and opened an auction in the same 10 s window.
-- Deviation: the window join is an interval join of zero width on the windows' *_ROWTIME.
CREATE TABLE person (
  id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR,
  dateTime TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE auction (
  id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
  dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR
) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'dateTime', 'watermark_delay_ms' = '1000');

CREATE TABLE q8 (id BIGINT, name VARCHAR, starttime TIMESTAMP(3)) WITH ('connector' = 'collect');

INSERT INTO q8
SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name, TUMBLE_START(dateTime, INTERVAL '10' SECOND) AS starttime, TUMBLE_ROWTIME(dateTime, INTERVAL '10' SECOND) AS rt
  FROM person
  GROUP BY id, name, TUMBLE(dateTime, INTERVAL '10' SECOND)
) P
JOIN (
  SELECT seller, TUMBLE_START(dateTime, INTERVAL '10' SECOND) AS starttime, TUMBLE_ROWTIME(dateTime, INTERVAL '10' SECOND) AS rt
  FROM auction
  GROUP BY seller, TUMBLE(dateTime, INTERVAL '10' SECOND)
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.rt = A.rt;
