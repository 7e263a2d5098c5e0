/** The objects of one S3 bucket (`ObjectApi`), throttling retried. */
import { DeleteObjectsCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import type { ObjectApi } from '../objects.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';

/** DeleteObjects takes at most this many keys. */
const MAX_DELETE_KEYS = 1000;

export function s3ObjectApi(clients: Pick<AwsClients, 's3'>, bucket: string): ObjectApi {
  const s3 = clients.s3;
  return {
    async put(key, body) {
      await withThrottleRetry(() => s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body })));
    },
    async get(key) {
      const r = await withThrottleRetry(() => s3.send(new GetObjectCommand({ Bucket: bucket, Key: key })));
      return r.Body!.transformToByteArray();
    },
    async list(prefix) {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const r = await withThrottleRetry(() => s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) })));
        for (const o of r.Contents ?? []) keys.push(o.Key!);
        token = r.IsTruncated ? r.NextContinuationToken : undefined;
      } while (token);
      return keys.sort();
    },
    async delete(keys) {
      for (let i = 0; i < keys.length; i += MAX_DELETE_KEYS) {
        const Objects = keys.slice(i, i + MAX_DELETE_KEYS).map((Key) => ({ Key }));
        await withThrottleRetry(() => s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects, Quiet: true } })));
      }
    },
  };
}
