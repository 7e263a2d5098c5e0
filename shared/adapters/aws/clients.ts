/**
 * SDK v3 clients for every service the engine uses. Endpoints come from the standard settings
 * (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_KINESIS`, `_DYNAMODB`, `_S3`, `_SFN`), so one build runs
 * against AWS, LocalStack or the local emulators. Clients can also be passed in.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { S3Client } from '@aws-sdk/client-s3';
import { SFNClient } from '@aws-sdk/client-sfn';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { backoffMs, isThrottling, sleep } from '../throttling.js';

export interface AwsClients {
  readonly kinesis: KinesisClient;
  readonly dynamodb: DynamoDBClient;
  readonly doc: DynamoDBDocumentClient;
  readonly s3: S3Client;
  readonly sfn: SFNClient;
}

export interface AwsClientOptions {
  readonly region?: string;
  readonly credentials?: { accessKeyId: string; secretAccessKey: string };
  /** per-service endpoints; unset ones come from the environment */
  readonly endpoints?: Partial<Record<'kinesis' | 'dynamodb' | 's3' | 'sfn', string>>;
  /** SDK attempts per call before our own retry loops take over; @default 8 */
  readonly maxAttempts?: number;
  /**
   * a request without a response after this long fails with a TimeoutError, which the SDK retries
   * (keep it well below the function's timeout); @default 30 s
   */
  readonly requestTimeoutMs?: number;
}

export function createAwsClients(options: AwsClientOptions = {}): AwsClients {
  const env = process.env;
  const base = {
    ...(options.region ? { region: options.region } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
    maxAttempts: options.maxAttempts ?? 8,
    // HTTP/1.1 for every client: Kinesis' default HTTP/2 handler fails against some emulators, and
    // keep-alive sockets are what Lambda wants anyway. A request timeout alone only logs a warning:
    // without throwOnRequestTimeout a call that never gets its response hangs the invocation (and
    // its shard) until the function times out; with it, the call fails and the SDK retries it.
    requestHandler: new NodeHttpHandler({ connectionTimeout: 5_000, requestTimeout: options.requestTimeoutMs ?? 30_000, throwOnRequestTimeout: true }),
  };
  const ep = options.endpoints ?? {};
  const s3Endpoint = ep.s3 ?? env.AWS_ENDPOINT_URL_S3 ?? env.AWS_ENDPOINT_URL;
  const dynamodb = new DynamoDBClient({ ...base, ...(ep.dynamodb ? { endpoint: ep.dynamodb } : {}) });
  return {
    kinesis: new KinesisClient({ ...base, ...(ep.kinesis ? { endpoint: ep.kinesis } : {}) }),
    dynamodb,
    doc: DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: true } }),
    // emulators and LocalStack serve buckets by path, not by virtual host
    s3: new S3Client({ ...base, ...(ep.s3 ? { endpoint: ep.s3 } : {}), ...(s3Endpoint ? { forcePathStyle: true } : {}) }),
    sfn: new SFNClient({ ...base, ...(ep.sfn ? { endpoint: ep.sfn } : {}) }),
  };
}

export { backoffMs, isThrottling, sleep } from '../throttling.js';

/** Retries `fn` while it fails with a throttling error (forever: data must not be dropped). */
export async function withThrottleRetry<T>(fn: () => Promise<T>, onRetry?: (err: unknown, attempt: number) => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!isThrottling(err)) throw err;
      onRetry?.(err, attempt);
      await sleep(backoffMs(attempt));
    }
  }
}
