/** AWS side of the bounded reader: objects by S3 ListObjectsV2/GetObject, records by Kinesis PutRecords/ListShards. */
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { ObjectStore, SourceWriter } from '../../bounded/bounded-reader.js';
import { sourceWriterOf } from '../../bounded/source-writer.js';
import { sdkKinesisApi } from './kinesis.js';

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

/** Puts the records into the job's source stream (every entry accepted, throttles retried). */
export function kinesisSourceWriter(kinesis: KinesisClient): SourceWriter {
  return sourceWriterOf(sdkKinesisApi(kinesis));
}
