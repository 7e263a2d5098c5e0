/** Blobs (`ObjectBlobStore`) as S3 objects of the job's bucket. */
import { ObjectBlobStore } from '../objects.js';
import type { AwsClients } from './clients.js';
import { s3ObjectApi } from './s3-objects.js';

export class S3BlobStore extends ObjectBlobStore {
  constructor(clients: Pick<AwsClients, 's3'>, bucket: string) {
    super(s3ObjectApi(clients, bucket));
  }
}
