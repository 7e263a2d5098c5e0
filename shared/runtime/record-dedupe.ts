/**
 * Dedupe of an inner stage's records. A record is identified by (producer, epoch, seq); a channel
 * (producer, epoch) is not ordered, so its records are deduplicated by set membership. The count of
 * distinct records per channel, what a barrier's count is checked against, is its set's size: a
 * record costs one membership test and one insertion, and no counter of its own.
 */
import { SeqSet } from './seq-set.js';

const channelOf = (producer: string, epoch: number) => `${producer}|${epoch}`;
const epochOfChannel = (channel: string) => Number(channel.slice(channel.lastIndexOf('|') + 1));

export class RecordDedupe {
  private readonly seen = new Map<string, Set<number>>();
  // the channel of the last record, remembered while consecutive records share producer and epoch
  // (sets are only dropped for epochs below the instance's, which never apply again)
  private lastProducer: string | undefined;
  private lastEpoch = -1;
  private lastSeen: Set<number> | undefined;

  /** Notes the record; false when it was seen already (a duplicate). */
  admit(producer: string, epoch: number, seq: number): boolean {
    let seen = this.lastSeen;
    if (producer !== this.lastProducer || epoch !== this.lastEpoch || seen === undefined) {
      const ch = channelOf(producer, epoch);
      this.lastProducer = producer;
      this.lastEpoch = epoch;
      seen = this.seen.get(ch);
      if (!seen) this.seen.set(ch, (seen = new SeqSet()));
      this.lastSeen = seen;
    }
    if (seen.has(seq)) return false;
    seen.add(seq);
    return true;
  }

  /** distinct records the producer's channel of `epoch` delivered */
  count(producer: string, epoch: number): number {
    return this.seen.get(channelOf(producer, epoch))?.size ?? 0;
  }

  /** Forgets what only epochs below n needed. */
  forgetBefore(n: number): void {
    for (const k of [...this.seen.keys()]) if (epochOfChannel(k) < n) this.seen.delete(k);
  }

  /** the seen sets, for a child shard's instance */
  handOver(): ReadonlyMap<string, ReadonlySet<number>> {
    return this.seen;
  }

  /** Takes in the seen sets of parent shards' instances: a channel's count is its distinct records. */
  adopt(parents: ReadonlyArray<ReadonlyMap<string, ReadonlySet<number>>>): void {
    for (const seen of parents) {
      for (const [channel, seqs] of seen) {
        let mine = this.seen.get(channel);
        if (!mine) this.seen.set(channel, (mine = new SeqSet()));
        for (const q of seqs) mine.add(q);
      }
    }
    this.lastSeen = undefined;
  }
}
