/**
 * The in-process DynamoDB (dynalite) closes the iterator of every read it makes: Query (with and
 * without a Limit), Scan, paged Scan. Counted on abstract-level's open resources, not on heap bytes.
 */
import { createRequire } from 'node:module';
import { CreateTableCommand, PutItemCommand, QueryCommand, ScanCommand, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDynamoClient } from './aws-env.js';
import { startEmulators, type LocalEmulators } from './emulators.js';

interface Level {
  attachResource(resource: unknown): void;
  detachResource(resource: unknown): void;
}

// the abstract-level that dynalite's memory-level loads
const fromDynalite = createRequire(createRequire(import.meta.url).resolve('dynalite'));
const abstract = createRequire(fromDynalite.resolve('memory-level'))('abstract-level') as { AbstractLevel: { prototype: Level } };
const proto = abstract.AbstractLevel.prototype;
const open = new Set<unknown>();
const isIterator = (r: unknown) => typeof (r as { next?: unknown }).next === 'function' && typeof (r as { close?: unknown }).close === 'function';

let emu: LocalEmulators;
const original = { attach: proto.attachResource, detach: proto.detachResource };
beforeAll(async () => {
  proto.attachResource = function (this: Level, r: unknown) {
    if (isIterator(r)) open.add(r);
    return original.attach.call(this, r);
  };
  proto.detachResource = function (this: Level, r: unknown) {
    open.delete(r);
    return original.detach.call(this, r);
  };
  emu = await startEmulators({ services: ['dynamodb'] });
});
afterAll(async () => {
  await emu?.stop();
  proto.attachResource = original.attach;
  proto.detachResource = original.detach;
});

describe('dynalite in process', () => {
  it('closes the iterator of every Query and Scan (else each one holds the table as it was, for as long as the process runs)', async () => {
    const ddb = localDynamoClient(emu.endpoints.dynamodb);
    try {
      await ddb.send(
        new CreateTableCommand({
          TableName: 'reads',
          AttributeDefinitions: [
            { AttributeName: 'pk', AttributeType: 'S' },
            { AttributeName: 'sk', AttributeType: 'N' },
          ],
          KeySchema: [
            { AttributeName: 'pk', KeyType: 'HASH' },
            { AttributeName: 'sk', KeyType: 'RANGE' },
          ],
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
      for (let i = 0; i < 20; i++) await ddb.send(new PutItemCommand({ TableName: 'reads', Item: { pk: { S: `p${i % 2}` }, sk: { N: String(i) } } }));
      const before = open.size;
      const reads = 40;
      for (let i = 0; i < reads / 4; i++) {
        const q = { TableName: 'reads', KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': { S: 'p0' } } };
        expect((await ddb.send(new QueryCommand(q))).Count).toBe(10);
        expect((await ddb.send(new QueryCommand({ ...q, Limit: 1, ScanIndexForward: false }))).Items?.[0]?.sk?.N).toBe('18');
        expect((await ddb.send(new ScanCommand({ TableName: 'reads' }))).Count).toBe(20);
        expect((await ddb.send(new ScanCommand({ TableName: 'reads', Limit: 3 }))).LastEvaluatedKey).toBeDefined();
        await ddb.send(new GetItemCommand({ TableName: 'reads', Key: { pk: { S: 'p1' }, sk: { N: '1' } } }));
      }
      // closing is asynchronous: wait for it (bounded), then every read's iterator is closed
      for (let i = 0; i < 200 && open.size > before; i++) await new Promise((r) => setTimeout(r, 10));
      expect(open.size - before).toBe(0);
    } finally {
      ddb.destroy();
    }
  });
});
