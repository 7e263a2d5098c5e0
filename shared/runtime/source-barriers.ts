/**
 * Barriers at a source's read position. Appended at the tail of a shard, barrier n waits behind the
 * shard's whole unread backlog, so a checkpoint takes as long as the backlog. Instead the coordinator
 * announces that n is open; a source instance reads the announcement with its lease and forwards
 * barrier n right after the last record of its batch. What keeps that exactly-once (each rule was
 * found necessary in a model of the protocol):
 *
 * - **recorded before forwarded**: where barrier n goes is written, fenced by the lease, before n is
 *   forwarded; an owner after a takeover reads it and replays n after the same record, so every
 *   record keeps its epoch and sequence number on every replay;
 * - **tail barriers too**: a barrier met in the shard is recorded the same way, or an owner that has
 *   not read that far would put it earlier, at its own read position;
 * - **not before what others read**: every batch first records how far it reads (`readThrough`); an
 *   owner puts no barrier before that, since an earlier owner (perhaps a zombie still running) may
 *   have emitted those records' outputs in the previous epoch;
 * - **in order**: a barrier is never put before one still pending, so each goes out exactly where it
 *   was recorded (its snapshot's replay point);
 * - **read under the fence**: an owner drops each placement once it is past it, so the record is
 *   only complete for the snapshot the lease points to; a takeover reads it only while its fence
 *   still holds the lease (`load`), or it would number records past a dropped barrier in its older
 *   epoch (seen in chaos seed 206: a keyed stage counted two records twice).
 *
 * The coordinator announces only with one checkpoint in flight (coordinator.ts): with overlapping
 * checkpoints the sources take their barriers at the tail.
 */
import type { AnnouncedBarrier, SourceBarrier, SourceBarrierRecord, SourceBarrierStore } from './ports.js';
import { FencedError } from '../util/errors.js';
import { compareSeq, laterSeq as later } from './positions.js';

type Placement = SourceBarrierRecord['placed'][number];

/** A placement is due once the source has read through its position (`reaches` and `forwardReached` alike). */
function dueAt(p: Placement, position: string): boolean {
  return compareSeq(p.after, position) <= 0;
}

/** One source instance's placements; `forward` sends barrier n after the record `after` and snapshots. */
export class SourceBarrierPlan {
  private placed: Placement[] = [];
  private readThrough: string | undefined;

  constructor(
    private readonly store: SourceBarrierStore,
    private readonly instanceId: string,
    private readonly forward: (barrier: SourceBarrier, after: string) => Promise<void>,
  ) {}

  private pending(epoch: number): Placement[] {
    return (this.placed = this.placed.filter((p) => p.barrier.checkpointId > epoch));
  }

  /**
   * After a takeover and restore: what earlier owners recorded. Only while `fence` still holds the
   * lease: a later owner drops each placement once it is past it, so a takeover stalled between its
   * restore and this read (a zombie) would find the barriers after its snapshot gone and a read
   * position already covering its batch — no fenced write left before it emits, and its records go
   * out again in its older epoch, under ids the keyed stage has not seen.
   */
  async load(epoch: number, fence: number): Promise<void> {
    const r = await this.store.recorded(this.instanceId);
    if (r.fence !== fence) throw new FencedError(`${this.instanceId}: fence ${fence} no longer holds the lease`);
    this.placed = [...r.placed];
    this.pending(epoch);
    this.readThrough = r.readThrough;
  }

  /**
   * Whether `forwardReached` may have anything to do at `position`: the first placement is due there
   * (or already done and only to be dropped). Synchronous, so that the record path makes no promise
   * for the common case of no barrier due; placements are in order, so the first one decides.
   */
  reaches(epoch: number, position: string): boolean {
    const p = this.placed[0];
    return p !== undefined && (p.barrier.checkpointId <= epoch || dueAt(p, position));
  }

  /** Forwards every pending barrier placed at or before `position` (`epoch()` moves as each snapshots). */
  async forwardReached(epoch: () => number, position: string): Promise<void> {
    for (let p = this.pending(epoch())[0]; p && dueAt(p, position); p = this.pending(epoch())[0]) {
      await this.forward(p.barrier, p.after);
    }
  }

  /** Before a batch emits anything: records, fenced, that it reads through `batchLast`. */
  async readingThrough(epoch: number, fence: number, batchLast: string): Promise<void> {
    const readThrough = later(this.readThrough, batchLast);
    if (readThrough === this.readThrough) return;
    await this.store.record(this.instanceId, fence, { placed: this.pending(epoch), readThrough });
    this.readThrough = readThrough;
  }

  /**
   * After a batch's records: puts every announced checkpoint after `epoch` that is not placed yet
   * right after `readPosition` (or later: see the rules above), recorded before anything forwards it.
   */
  async placeAnnounced(epoch: number, fence: number, readPosition: string | undefined, announced: readonly AnnouncedBarrier[]): Promise<void> {
    const pending = this.pending(epoch);
    const at = later(later(readPosition, this.readThrough), pending.at(-1)?.after);
    if (at === undefined) return;
    const add: Placement[] = [];
    for (let n = (pending.at(-1)?.barrier.checkpointId ?? epoch) + 1; ; n++) {
      const a = announced.find((x) => x.barrier.checkpointId === n);
      if (!a || !a.instances.includes(this.instanceId)) break;
      add.push({ after: at, barrier: a.barrier });
    }
    if (!add.length) return;
    await this.store.record(this.instanceId, fence, { placed: [...pending, ...add], readThrough: this.readThrough });
    this.placed = [...pending, ...add];
  }

  /** A barrier met in the shard at `position`: recorded unless it is placed already (then it goes out at its own place). */
  async tailBarrier(epoch: number, fence: number, barrier: SourceBarrier, position: string): Promise<void> {
    const pending = this.pending(epoch);
    if (pending.some((p) => p.barrier.checkpointId >= barrier.checkpointId)) return;
    const placement = { after: later(position, pending.at(-1)?.after)!, barrier };
    await this.store.record(this.instanceId, fence, { placed: [...pending, placement], readThrough: this.readThrough });
    this.placed = [...pending, placement];
  }
}
