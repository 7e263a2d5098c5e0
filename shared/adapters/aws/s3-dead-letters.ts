/**
 * Dead letters as JSON objects in S3, one per rejected record, under a deterministic key (so a
 * replay that rejects the same record again overwrites the same object).
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import type { DeadLetter, DeadLetterStore } from '../../runtime/ports.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';

export const deadLetterKey = (d: Pick<DeadLetter, 'job' | 'stage' | 'shardId' | 'sequenceNumber' | 'subSequence'>) =>
  `dead-letters/${d.job}/${d.stage}/${d.shardId}/${d.sequenceNumber}-${d.subSequence}.json`;

export class S3DeadLetterStore implements DeadLetterStore {
  constructor(
    private readonly clients: AwsClients,
    private readonly bucket: string,
  ) {}

  async put(d: DeadLetter): Promise<void> {
    const body = JSON.stringify({
      job: d.job,
      stage: d.stage,
      shardId: d.shardId,
      sequenceNumber: d.sequenceNumber,
      subSequence: d.subSequence,
      reason: d.reason,
      data: Buffer.from(d.data).toString('base64'),
    });
    await withThrottleRetry(() =>
      this.clients.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: deadLetterKey(d), Body: body, ContentType: 'application/json' })),
    );
  }
}
