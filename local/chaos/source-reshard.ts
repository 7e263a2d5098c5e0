/**
 * `source-resharded-outside`: someone other than the job reshards its source stream while it runs
 * (an operator's UpdateShardCount, on-demand capacity scaling): a source shard is split in two at
 * its hash range's middle, and later the two children are merged back. The job hears of it through
 * no barrier and no drain; it must adopt the new shards by the path of its own rescale (children
 * rebuild their parents' final state, runtime/shard-inheritance.ts).
 */
import { DescribeStreamSummaryCommand, MergeShardsCommand, SplitShardCommand } from '@aws-sdk/client-kinesis';
import type { AwsClients } from '../../shared/adapters/aws/clients.js';
import { listAllShards } from '../../shared/adapters/aws/kinesis.js';
import { sleep } from '../../shared/adapters/throttling.js';
import type { FaultSchedule } from './schedule.js';

export class OutsideReshard {
  /** the shard split by us, while its children are still open (to merge them back) */
  private split: string | undefined;
  private merged = false;
  private busy = false;

  constructor(
    private readonly clients: AwsClients,
    private readonly stream: string,
    private readonly schedule: FaultSchedule,
  ) {}

  /**
   * One opportunity: may split a source shard (once), or merge the two children of that split back
   * (once). Returns at once; the reshard itself runs in the background (`settled` waits for it).
   */
  opportunity(): void {
    if (this.busy || this.merged || !this.schedule.chance('source-resharded-outside')) return;
    this.busy = true;
    this.pending = this.reshard()
      .catch((err: unknown) => this.schedule.observe(`source-reshard-failed:${(err as Error).name ?? String(err)}`))
      .finally(() => (this.busy = false));
  }
  private pending: Promise<unknown> = Promise.resolve();

  /** Waits for a reshard under way. */
  settled(): Promise<unknown> {
    return this.pending;
  }

  private async reshard(): Promise<void> {
    const open = (await listAllShards(this.clients, this.stream)).filter((s) => s.endingSequenceNumber === undefined);
    if (this.split === undefined) {
      const parent = open[this.schedule.int(open.length)];
      if (!parent) return;
      const middle = ((BigInt(parent.startingHashKey) + BigInt(parent.endingHashKey)) / 2n).toString();
      await this.clients.kinesis.send(new SplitShardCommand({ StreamName: this.stream, ShardToSplit: parent.shardId, NewStartingHashKey: middle }));
      this.split = parent.shardId;
      this.schedule.count('source-resharded-outside');
      this.schedule.observe('source-split');
    } else {
      const children = open.filter((s) => s.parentShardId === this.split);
      if (children.length !== 2) return;
      const [a, b] = children.sort((x, y) => (BigInt(x.startingHashKey) < BigInt(y.startingHashKey) ? -1 : 1));
      await this.clients.kinesis.send(new MergeShardsCommand({ StreamName: this.stream, ShardToMerge: a!.shardId, AdjacentShardToMerge: b!.shardId }));
      this.merged = true;
      this.schedule.count('source-resharded-outside');
      this.schedule.observe('source-merge');
    }
    await this.untilActive();
  }

  /** A stream is UPDATING for a moment after a reshard; the next one must wait for ACTIVE. */
  private async untilActive(): Promise<void> {
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      const d = await this.clients.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: this.stream }));
      if (d.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') return;
      await sleep(200);
    }
  }
}
