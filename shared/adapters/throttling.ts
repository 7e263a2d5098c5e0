/**
 * Which AWS errors mean "slow down and try again": the names the SDK gives throttling and
 * transient server errors of Kinesis, DynamoDB, S3 and Step Functions. The AWS adapters retry these
 * forever (data must not be dropped), and the in-memory twins throw them from their fault hooks.
 */
const THROTTLING = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'LimitExceededException',
  'RequestLimitExceeded',
  'TooManyRequestsException',
  'SlowDown',
  'InternalServerError',
  'ServiceUnavailable',
]);

export function isThrottling(err: unknown): boolean {
  const name = (err as { name?: string } | null)?.name;
  return !!name && THROTTLING.has(name);
}

/** Exponential backoff with full jitter, capped. */
export function backoffMs(attempt: number, baseMs = 50, capMs = 5_000): number {
  return Math.random() * Math.min(capMs, baseMs * 2 ** attempt);
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Waits before retry `attempt` (0 first). */
export type RetryPause = (attempt: number) => Promise<void>;

/** The pause against AWS: jittered exponential backoff. */
export const jitteredBackoff: RetryPause = (attempt) => sleep(backoffMs(attempt));
