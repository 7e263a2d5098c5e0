/** The names Kinesis gives streams, checked where a job names an existing one. */
import { UsageError } from '../util/errors.js';

/**
 * Refuses a stream name Kinesis would refuse (1–128 of a-z A-Z 0-9 _ - .): an ARN or a typo fails
 * where the source or sink is declared, naming it, not at deploy or at the first record.
 */
export function checkStreamName(where: string, name: unknown): void {
  if (typeof name === 'string' && /^[A-Za-z0-9_.-]{1,128}$/.test(name)) return;
  throw new UsageError(where, 'streamName', `must be 1 to 128 characters of a-z, A-Z, 0-9, _, - and . (a Kinesis stream's name, not its ARN), got ${JSON.stringify(name)}`);
}
