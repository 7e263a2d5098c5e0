import { describe, expect, it } from 'vitest';
import { compileSql } from './index.js';
import { missingColumns } from './missing-columns.js';

describe('missingColumns', () => {
  const { tables } = compileSql(`CREATE TABLE bid (auction BIGINT, price BIGINT, Bidder VARCHAR) WITH ('connector' = 'kinesis');
SELECT auction, SUM(price) AS total FROM bid GROUP BY auction;`);
  const bid = tables.get('bid')!;

  it('names a declared column that no record holds, matching fields as the source does (case-insensitively)', () => {
    expect(missingColumns(bid, [{ auction: 1, cost: 5, bidder: 'a' }, 'not an object', null, [1, 2]])).toEqual(['price']);
    expect(missingColumns(bid, [{ auction: 1 }, { PRICE: 2, bidder: 'b' }])).toEqual([]);
    expect(missingColumns(bid, [])).toEqual(['auction', 'price', 'Bidder']);
  });
});
