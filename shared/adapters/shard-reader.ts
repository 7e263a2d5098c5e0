/**
 * The engine's replay reader (`ShardReader`) over the Kinesis calls (`KinesisApi`): the SDK's or
 * the twin's. It pages from a replay point up to (not including) a sequence number, sharing the
 * shard's read limits with the event source mapping (so it backs off when throttled), and fails
 * loudly (REPLAY_TRIMMED) when the record a replay point names is no longer there.
 */
import type { ReplayPoint, ShardReader, StoredRecord } from '../runtime/ports.js';
import { compareSeq } from '../runtime/positions.js';
import { SluiceError } from '../util/errors.js';
import type { IteratorStart, KinesisApi } from './put-records.js';
import { replayTrimmed } from './replay-trimmed.js';
import { backoffMs, isThrottling, sleep, type RetryPause } from './throttling.js';

export interface ShardReaderOptions {
  /** records per GetRecords page; @default 1000 */
  readonly pageSize?: number;
  /** waits after a throttled call (n-th in a row); @default jittered backoff from 200 ms up to 5 s (the ESM reads this shard too: give way) */
  readonly throttlePause?: RetryPause;
  /** waits after the n-th empty page in a row while records are known to lie ahead; @default min(1 s, 20 ms × n) */
  readonly idlePause?: RetryPause;
  /** empty pages in a row before a replay that must reach its bound gives up (REPLAY_STALLED); @default 200 */
  readonly stallPolls?: number;
}

export class KinesisApiShardReader implements ShardReader {
  private readonly pageSize: number;
  private readonly throttlePause: RetryPause;
  private readonly idlePause: RetryPause;
  private readonly stallPolls: number;

  constructor(
    private readonly api: KinesisApi,
    options: ShardReaderOptions = {},
  ) {
    this.pageSize = options.pageSize ?? 1000;
    this.throttlePause = options.throttlePause ?? ((n) => sleep(backoffMs(n, 200, 5_000)));
    this.idlePause = options.idlePause ?? ((n) => sleep(Math.min(1000, 20 * n)));
    this.stallPolls = options.stallPolls ?? 200;
  }

  async *read(stream: string, shardId: string, from: ReplayPoint, untilExclusive: string | undefined): AsyncIterable<StoredRecord[]> {
    // Kinesis does not refuse a trimmed position: an iterator there starts at the oldest record still
    // retained (or walks the trimmed range as empty pages). So a replay point is read AT the record it
    // names, which must come back first; for 'after' it is then skipped.
    let anchor: string | undefined = from.from === 'start' ? undefined : from.sequenceNumber;
    let last: string | undefined;
    const iteratorFor = async (): Promise<string> => {
      const start: IteratorStart =
        last !== undefined
          ? { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: last }
          : anchor !== undefined
            ? { type: 'AT_SEQUENCE_NUMBER', sequenceNumber: anchor }
            : { type: 'TRIM_HORIZON' };
      for (let attempt = 0; ; attempt++) {
        try {
          return await this.api.getShardIterator(stream, shardId, start);
        } catch (err) {
          if (isThrottling(err)) {
            await this.throttlePause(attempt);
            continue;
          }
          // a sequence number this shard gave out and no longer accepts is one it has trimmed
          if (anchor !== undefined && last === undefined && (err as { name?: string }).name === 'InvalidArgumentException') {
            throw replayTrimmed(stream, shardId, from, undefined, err);
          }
          throw err;
        }
      }
    };
    let iterator: string | undefined = await iteratorFor();
    let idle = 0;
    for (let attempt = 0; iterator; ) {
      let r;
      try {
        r = await this.api.getRecords(iterator, this.pageSize);
      } catch (err) {
        if (isThrottling(err)) {
          await this.throttlePause(attempt++);
          continue;
        }
        if ((err as { name?: string }).name === 'ExpiredIteratorException') {
          iterator = await iteratorFor();
          continue;
        }
        throw err;
      }
      attempt = 0;
      const page: StoredRecord[] = [];
      let reached = false;
      for (const rec of r.records) {
        const seq = rec.sequenceNumber;
        if (anchor !== undefined) {
          if (seq !== anchor) throw replayTrimmed(stream, shardId, from, seq);
          anchor = undefined;
          if (from.from === 'after') {
            last = seq;
            continue;
          }
        }
        if (untilExclusive !== undefined && compareSeq(seq, untilExclusive) >= 0) {
          reached = true;
          break;
        }
        page.push(rec);
        last = seq;
      }
      if (page.length) yield page;
      if (reached) return;
      iterator = r.nextIterator;
      if (!r.records.length) {
        const atTip = r.millisBehindLatest === 0;
        if (anchor !== undefined) {
          // nothing yet: an empty page behind the tip is normal, but at the tip (or the end of a
          // closed shard) the record the replay point names is not there
          if (atTip || !iterator) throw replayTrimmed(stream, shardId, from, undefined);
          await this.idlePause(10); // 200 ms with the default pause
          continue;
        }
        if (untilExclusive === undefined && atTip) return;
        // the record we must reach exists (it is in the batch being handled): keep reading
        if (++idle > this.stallPolls) throw new SluiceError(`replay of ${stream}/${shardId} never reached ${untilExclusive}`, 'REPLAY_STALLED', true);
        await this.idlePause(idle);
      } else idle = 0;
    }
    if (anchor !== undefined) throw replayTrimmed(stream, shardId, from, undefined); // a closed shard ended before it
  }
}
