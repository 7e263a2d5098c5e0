import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import type { BlobStore } from '../../runtime/spilling-state-store.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';

/** Blobs as S3 objects of the job's bucket. */
export class S3BlobStore implements BlobStore {
  constructor(
    private readonly clients: AwsClients,
    private readonly bucket: string,
  ) {}

  async put(key: string, bytes: Uint8Array): Promise<void> {
    await withThrottleRetry(() => this.clients.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: bytes })));
  }

  async get(key: string): Promise<Uint8Array> {
    const r = await withThrottleRetry(() => this.clients.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key })));
    return r.Body!.transformToByteArray();
  }
}
