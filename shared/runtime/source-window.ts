/**
 * A source instance's credit window: it forwards at most `max` data records beyond its position at
 * the barrier of the last checkpoint known to have crossed the whole pipeline. A checkpoint crossed
 * when every instance it expects acknowledged it, i.e. every stage consumed everything before its
 * barriers; so the records still queued in the inner streams in front of the next barrier come from
 * at most `max` source records per source shard, and a barrier's travel through a stage slower per
 * record than its input is bounded by `max` / that stage's rate instead of growing with the backlog.
 *
 * The window decides only how much of a batch is taken, never where a barrier goes: placements stay
 * recorded before forwarded (source-barriers.ts), so a replay numbers every record alike. While the
 * window is full the instance still reads the announcement and puts barrier n at its (unchanged) read
 * position, which is what frees the window: it cannot hold back the checkpoint that would free it.
 *
 * Counts are kept in memory. An instance rebuilt from snapshot n (a takeover) counts from n's
 * position: what earlier owners forwarded between the last crossed checkpoint and n is not counted,
 * so right after a takeover up to `max` more may be queued than the window says, until a checkpoint
 * crosses again. (Holding everything until n crosses would keep the bound exact, at the price of a
 * read and a stall on every takeover: takeovers are frequent, a window is a flow bound, not a safety
 * rule, so the looser bound was chosen.)
 */

/** data records since the barrier of the last crossed checkpoint, at most this many; @default 50_000 */
export const DEFAULT_MAX_IN_FLIGHT_RECORDS = 50_000;

export class SourceWindow {
  /** data records this instance processed (replays included: they are forwarded again) */
  private taken = 0;
  /** `taken` at each barrier forwarded since the base, oldest first */
  private marks: Array<{ readonly checkpointId: number; readonly taken: number }> = [];
  /** `taken` at the barrier of the last checkpoint known to have crossed (or at a restore) */
  private base = 0;

  constructor(
    readonly max: number,
    /** whether checkpoint n's barriers crossed the whole pipeline (every expected instance acked) */
    private readonly crossed: (checkpointId: number) => Promise<boolean>,
  ) {}

  /** Rebuilt from a snapshot (a takeover): counts from its position. */
  restored(): void {
    this.taken = 0;
    this.marks = [];
    this.base = 0;
  }

  /** One data record forwarded. */
  count(): void {
    this.taken++;
  }

  /** Barrier n forwarded at the current position. */
  barrier(checkpointId: number): void {
    this.marks.push({ checkpointId, taken: this.taken });
  }

  /** Records forwarded since the last crossed checkpoint's barrier. */
  get inFlight(): number {
    return this.taken - this.base;
  }

  /** How many more data records may go out now; asks the store only when the window looks full. */
  async room(): Promise<number> {
    const free = () => Math.max(0, this.max - (this.taken - this.base));
    if (free() > 0) return free();
    // the newest crossed checkpoint frees the most: look from the newest barrier back
    for (let i = this.marks.length - 1; i >= 0; i--) {
      const m = this.marks[i]!;
      if (await this.crossed(m.checkpointId)) {
        this.base = m.taken;
        this.marks = this.marks.slice(i + 1);
        break;
      }
    }
    return free();
  }
}
