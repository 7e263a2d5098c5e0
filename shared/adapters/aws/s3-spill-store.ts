/**
 * Dirty state an instance moved out of memory, as S3 objects under `spill/<instance>/<fence>/`.
 * Parts a dead owner left behind are never read again (a new owner has another fence); the
 * bucket's lifecycle rule expires them.
 */
import { DeleteObjectsCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import type { SpillStore } from '../../runtime/ports.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';

export const SPILL_PREFIX = 'spill/';

export class S3SpillStore implements SpillStore {
  constructor(
    private readonly clients: AwsClients,
    private readonly bucket: string,
  ) {}

  private prefix(instanceId: string, fence: number): string {
    return `${SPILL_PREFIX}${encodeURIComponent(instanceId)}/${fence}/`;
  }

  async put(instanceId: string, fence: number, part: string, bytes: Uint8Array): Promise<void> {
    const Key = this.prefix(instanceId, fence) + part;
    await withThrottleRetry(() => this.clients.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key, Body: bytes })));
  }

  async get(instanceId: string, fence: number, part: string): Promise<Uint8Array> {
    const Key = this.prefix(instanceId, fence) + part;
    const r = await withThrottleRetry(() => this.clients.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key })));
    return r.Body!.transformToByteArray();
  }

  async drop(instanceId: string, fence: number): Promise<void> {
    const Prefix = this.prefix(instanceId, fence);
    let token: string | undefined;
    do {
      const r = await withThrottleRetry(() =>
        this.clients.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix, ...(token ? { ContinuationToken: token } : {}) })),
      );
      const keys = (r.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (keys.length) await withThrottleRetry(() => this.clients.s3.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: keys, Quiet: true } })));
      token = r.NextContinuationToken;
    } while (token);
  }
}
