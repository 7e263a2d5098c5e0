/**
 * Fixed region and credentials for the local emulators, and SDK client factories that carry the
 * settings each emulator needs.
 *
 * kinesis-mock namespaces streams by account (derived from the access key id) and region, so every
 * process that talks to the same emulator must sign with the same pair: the constants below.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { S3Client } from '@aws-sdk/client-s3';
import { SFNClient } from '@aws-sdk/client-sfn';
import { NodeHttpHandler } from '@smithy/node-http-handler';

export const LOCAL_REGION = 'us-east-1';
export const LOCAL_ACCOUNT_ID = '000000000000';
export const LOCAL_CREDENTIALS: Readonly<{ accessKeyId: string; secretAccessKey: string }> = Object.freeze({
  accessKeyId: 'sluicelocal',
  secretAccessKey: 'sluicelocal',
});

const common = (endpoint: string) => ({
  endpoint,
  region: LOCAL_REGION,
  credentials: { ...LOCAL_CREDENTIALS },
});

/** kinesis-local rejects the SDK's default HTTP/2 handler ("Protocol error"): force HTTP/1.1. */
export function localKinesisClient(endpoint: string): KinesisClient {
  return new KinesisClient({ ...common(endpoint), requestHandler: new NodeHttpHandler() });
}

export function localDynamoClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({ ...common(endpoint), requestHandler: new NodeHttpHandler() });
}

/** Emulators have no per-bucket DNS names: use path-style addressing. */
export function localS3Client(endpoint: string): S3Client {
  return new S3Client({ ...common(endpoint), forcePathStyle: true, requestHandler: new NodeHttpHandler() });
}

export function localSfnClient(endpoint: string): SFNClient {
  return new SFNClient({ ...common(endpoint), requestHandler: new NodeHttpHandler() });
}
