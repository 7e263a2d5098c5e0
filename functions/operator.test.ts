import type { KinesisStreamRecord } from 'aws-lambda';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { kinesisBatch } from './operator.js';

const record = (shardId: string, sequenceNumber: string, data: string, arrivalSeconds: number): KinesisStreamRecord => ({
  eventID: `${shardId}:${sequenceNumber}`,
  eventName: 'aws:kinesis:record',
  eventSource: 'aws:kinesis',
  eventSourceARN: 'arn:aws:kinesis:eu-west-1:123456789012:stream/in',
  eventVersion: '1.0',
  awsRegion: 'eu-west-1',
  invokeIdentityArn: 'arn:aws:iam::123456789012:role/x',
  kinesis: { kinesisSchemaVersion: '1.0', partitionKey: `pk-${sequenceNumber}`, sequenceNumber, data: Buffer.from(data).toString('base64'), approximateArrivalTimestamp: arrivalSeconds },
});

describe('the stage function converts AWS\'s Kinesis event for the engine', () => {
  it('takes the shard from the event ids, decodes base64 data and turns arrival seconds into ms', () => {
    const batch = kinesisBatch({ Records: [record('shardId-000000000001', '49001', '{"a":1}', 1700000000.1234), record('shardId-000000000001', '49002', 'x', 1700000001)] });
    expect(batch?.shardId).toBe('shardId-000000000001');
    expect(batch?.records.map((r) => [r.sequenceNumber, Buffer.from(r.data).toString(), r.partitionKey, r.approximateArrivalTimestamp])).toEqual([
      ['49001', '{"a":1}', 'pk-49001', 1700000000123],
      ['49002', 'x', 'pk-49002', 1700000001000],
    ]);
  });

  it('has nothing to run for an empty batch', () => {
    expect(kinesisBatch({ Records: [] })).toBeUndefined();
  });

  it('refuses a batch that mixes shards (an event source mapping never sends one)', () => {
    expect(() => kinesisBatch({ Records: [record('shardId-000000000001', '1', 'a', 1), record('shardId-000000000002', '2', 'b', 1)] })).toThrow(expect.objectContaining({ code: 'BATCH_INVALID' }));
  });

  it('gives every record its own bytes, as Buffer.from decodes them, though one buffer holds the batch', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 40 }), { minLength: 1, maxLength: 12 }), fc.boolean(), (datas, unpadded) => {
        const records = datas.map((d, i) => {
          const r = record('shardId-000000000001', String(1000 + i), '', 1);
          const b64 = Buffer.from(d).toString('base64');
          // the decoder takes base64 without its padding too; the bound must hold for both
          return { ...r, kinesis: { ...r.kinesis, data: unpadded ? b64.replace(/=+$/, '') : b64 } };
        });
        const batch = kinesisBatch({ Records: records })!;
        // read after the whole batch is decoded: a record written over by the next shows it
        expect(batch.records.map((r) => [...r.data])).toEqual(datas.map((d) => [...d]));
      }),
    );
  });

  it('puts a batch\'s records one after the other in one buffer (a source decodes their text in one go there)', () => {
    const batch = kinesisBatch({ Records: ['{"a":1}', '', 'xyz', '{"b":2}'].map((t, i) => record('shardId-000000000001', String(10 + i), t, 1)) })!;
    let at = batch.records[0]!.data.byteOffset;
    for (const r of batch.records) {
      expect(r.data.buffer).toBe(batch.records[0]!.data.buffer);
      expect(r.data.byteOffset).toBe(at);
      at += r.data.length;
    }
  });
});
