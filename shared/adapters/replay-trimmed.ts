import type { ReplayPoint } from '../runtime/ports.js';
import { SluiceError } from '../util/errors.js';

/**
 * The loud failure of a replay whose starting record is no longer in the shard: the records after
 * it cannot be known to be complete, so replaying from whatever is left would skip some silently.
 */
export function replayTrimmed(stream: string, shardId: string, from: ReplayPoint, firstAvailable: string | undefined, cause?: unknown): SluiceError {
  const wanted = from.from === 'start' ? 'the start' : `${from.from === 'at' ? 'at' : 'just after'} ${from.sequenceNumber}`;
  const found = firstAvailable === undefined ? 'the shard holds no record from there on' : `the first record available is ${firstAvailable}`;
  return new SluiceError(
    `replay of ${stream}/${shardId} from ${wanted} needs records past the stream's retention (${found}): the job was stalled too long; restore from a savepoint`,
    'REPLAY_TRIMMED',
    false,
    cause === undefined ? undefined : { cause },
  );
}
