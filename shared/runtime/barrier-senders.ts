/**
 * Whether a checkpoint's barrier came from every producer it must come from, for an inner instance.
 *
 * An inner stage's producers are counted: its input streams are resharded only by the job itself, at
 * a checkpoint boundary, and the barrier's topology says how many instances each upstream stage has.
 *
 * A source stage's producers are the shards of a source stream, which someone outside the job may
 * split or merge at any moment — also after checkpoint n's topology was fixed and before barrier n
 * reached the shard. A parent closed before it met barrier n never sends it; its children do, and
 * there are more of them than the topology counts, so a count is met before the last child's barrier
 * (and its records of epoch n-1) arrived. So a source stage's barrier n is complete when the hash
 * ranges of the shards that sent it cover the stream's whole hash key space: every record of the
 * stream went through one of them, or through an ancestor that a child sending n descends from, and
 * a child shard is read only after its parents. That needs every producer to send every barrier
 * number in order, which a source does (StageInstance.snapshot sends the barriers a child never met).
 * Found in a model of the protocol with source shards split and merged outside the job at any step
 * (docs/guarantees.md, `source-resharded-outside`).
 */
import type { Plan, PlanStage } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import type { ShardDirectory, Telemetry } from './ports.js';

/** Whether barriers of one checkpoint from these producers are all it comes from (its topology at hand). */
export type AllSent = (producers: Iterable<string>, topology: readonly number[]) => boolean;

/** The largest hash key of a Kinesis stream (keys are 128-bit). */
const LAST_HASH_KEY = (1n << 128n) - 1n;

interface Upstream {
  readonly prefix: string;
  readonly stageIndex: number;
  /** the source stream, when the upstream stage reads one */
  readonly stream: string | undefined;
}

/** Whether ranges (inclusive, in any order) cover [0, LAST_HASH_KEY]. */
export function coverHashSpace(ranges: ReadonlyArray<readonly [bigint, bigint]>): boolean {
  const sorted = [...ranges].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  let next = 0n;
  for (const [start, end] of sorted) {
    if (start > next) return false;
    if (end + 1n > next) next = end + 1n;
    if (next > LAST_HASH_KEY) return true;
  }
  return false;
}

export class BarrierSenders {
  private readonly upstream: readonly Upstream[];
  /** hash ranges of source shards by producer id (a shard's range never changes); null: not listed */
  private readonly ranges = new Map<string, readonly [bigint, bigint] | null>();

  constructor(
    private readonly plan: Plan,
    stage: PlanStage,
    names: ResourceNames,
    private readonly shards: ShardDirectory,
    private readonly telemetry: Telemetry,
  ) {
    if (stage.input.kind === 'source') throw new Error(`${stage.id} reads a source: it aligns no barriers`);
    this.upstream = stage.input.fromStages.map((id) => {
      const stageIndex = plan.stages.findIndex((s) => s.id === id);
      const from = plan.stages[stageIndex]!;
      return { prefix: `${id}:`, stageIndex, stream: from.input.kind === 'source' ? names.streamOf(from) : undefined };
    });
  }

  /** Whether the producer is a source shard whose hash range is not known yet (`learn` it first). */
  unknown(producer: string): boolean {
    return !this.ranges.has(producer) && this.sourceOf(producer) !== undefined;
  }

  /** Lists the producer's source stream and keeps the hash range of every shard in it. */
  async learn(producer: string): Promise<void> {
    const up = this.sourceOf(producer);
    if (!up?.stream) return;
    for (const s of await this.shards.allShards(up.stream)) {
      this.ranges.set(`${up.prefix}${s.shardId}`, [BigInt(s.startingHashKey), BigInt(s.endingHashKey)]);
    }
    if (!this.ranges.has(producer)) {
      // a shard past the stream's retention: it covers nothing, and a later checkpoint supersedes the barrier
      this.ranges.set(producer, null);
      this.telemetry.log('warn', 'a barrier came from a source shard the stream no longer lists', { producer });
    }
  }

  /** See `AllSent`: per upstream stage, source shards by hash range, inner instances by count. */
  readonly allSent: AllSent = (producers, topology) => {
    const ids = [...producers];
    for (const up of this.upstream) {
      const mine = ids.filter((p) => p.startsWith(up.prefix));
      if (up.stream !== undefined) {
        const ranges = mine.map((p) => this.ranges.get(p)).filter((r): r is readonly [bigint, bigint] => !!r);
        if (!coverHashSpace(ranges)) return false;
      } else {
        const want = topology.length ? (topology[up.stageIndex] ?? 0) : this.plan.stages[up.stageIndex]!.parallelism;
        if (mine.length < want) return false;
      }
    }
    return true;
  };

  private sourceOf(producer: string): Upstream | undefined {
    return this.upstream.find((u) => u.stream !== undefined && producer.startsWith(u.prefix));
  }
}
