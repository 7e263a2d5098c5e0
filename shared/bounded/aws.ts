/** AWS adapters of the bounded reader: S3 ListObjectsV2/GetObject, Kinesis PutRecords/ListShards. */
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { ListShardsCommand, PutRecordsCommand, type KinesisClient } from '@aws-sdk/client-kinesis';
import { backoffMs, sleep } from '../adapters/aws/clients.js';
import type { ObjectStore, SourceWriter } from './bounded-reader.js';

export function s3ObjectStore(s3: S3Client): ObjectStore {
  return {
    async list(bucket, prefix) {
      const out: Array<{ key: string; size: number }> = [];
      let token: string | undefined;
      do {
        const r = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }));
        for (const o of r.Contents ?? []) if (o.Key && !o.Key.endsWith('/')) out.push({ key: o.Key, size: o.Size ?? 0 });
        token = r.IsTruncated ? r.NextContinuationToken : undefined;
      } while (token);
      return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    },
    async get(bucket, key) {
      const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return r.Body!.transformToByteArray();
    },
  };
}

export function kinesisSourceWriter(kinesis: KinesisClient): SourceWriter {
  const put = async (stream: string, entries: Array<{ Data: Uint8Array; PartitionKey: string; ExplicitHashKey?: string }>) => {
    let pending = entries;
    for (let attempt = 0; pending.length; attempt++) {
      if (attempt) await sleep(backoffMs(attempt));
      const r = await kinesis.send(new PutRecordsCommand({ StreamName: stream, Records: pending }));
      pending = pending.filter((_, i) => r.Records?.[i]?.ErrorCode);
    }
  };
  return {
    putRecords: (stream, records) => put(stream, records.map((r) => ({ Data: r.data, PartitionKey: r.partitionKey }))),
    async shardHashKeys(stream) {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const r = await kinesis.send(new ListShardsCommand(token ? { NextToken: token } : { StreamName: stream }));
        for (const s of r.Shards ?? []) if (!s.SequenceNumberRange?.EndingSequenceNumber) keys.push(s.HashKeyRange!.StartingHashKey!);
        token = r.NextToken;
      } while (token);
      return keys;
    },
    putRecordAt: (stream, data, explicitHashKey) => put(stream, [{ Data: data, PartitionKey: 'end', ExplicitHashKey: explicitHashKey }]),
  };
}
