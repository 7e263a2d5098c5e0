/** Spilled dirty state (`ObjectSpillStore`) in the job's S3 bucket. */
import { ObjectSpillStore } from '../objects.js';
import type { AwsClients } from './clients.js';
import { s3ObjectApi } from './s3-objects.js';

export { SPILL_PREFIX } from '../objects.js';

export class S3SpillStore extends ObjectSpillStore {
  constructor(clients: Pick<AwsClients, 's3'>, bucket: string) {
    super(s3ObjectApi(clients, bucket));
  }
}
