/**
 * What an inner instance does with the checkpoint barriers of its input channels, split as Flink
 * splits its barrier handlers: exactly-once *aligns* (snapshot n waits for barrier n from every
 * producer and for every record each barrier counts; records of later epochs are held back
 * meanwhile, in memory up to a bound, past it re-read from the shard), at-least-once only
 * *tracks* (snapshot n is taken once every producer's barrier n arrived; nothing is held back,
 * so a snapshot may include records of the next epoch, which a restore replays again —
 * duplicates, never losses). Which one an instance builds is the only place the mode is read.
 */
import type { BarrierEnvelope } from '../codec/envelope.js';
import type { Plan } from '../plan/plan.js';
import type { AllSent } from './barrier-senders.js';
import type { Unit } from './inner-packets.js';
import { unitId } from './inner-packets.js';
import { compareSeq } from './positions.js';
import type { RecordDedupe } from './record-dedupe.js';

export interface BarrierInfo {
  readonly count: number;
  readonly topology: readonly number[];
  readonly savepoint: boolean;
  readonly reshard: readonly number[] | undefined;
}

/** A checkpoint whose barriers are complete: what to snapshot and where replay must start. */
export interface AlignedCheckpoint {
  readonly info: BarrierInfo;
  /** the producers that sent its barrier */
  readonly producers: ReadonlySet<string>;
  /** the earliest input position not in the snapshot */
  readonly replayFrom: string;
}

/** What holding back a unit did with it. */
export type HoldOutcome = 'held' | 'spilled' | 'duplicate';

export interface BarrierHandler {
  /** instances per stage as the last barrier said (how many producers to wait for) */
  topology: readonly number[];
  /** the lowest epoch whose records still apply while the instance is in `epoch` */
  appliesFrom(epoch: number): number;
  /** Holds back a unit that belongs after the next snapshot; undefined when it applies now. */
  hold(unit: Unit, epoch: number): HoldOutcome | undefined;
  /** Notes a barrier; true when it may complete a checkpoint. */
  onBarrier(producer: string, barrier: BarrierEnvelope, position: string, epoch: number): boolean;
  /** whether some barrier of checkpoint n arrived */
  waiting(n: number): boolean;
  /** Checkpoint n's barriers once it can be taken (forgotten then), else undefined; `allSent` tells whose barriers are all of one (barrier-senders.ts). */
  complete(n: number, allSent: AllSent, frontier: string): AlignedCheckpoint | undefined;
  /** The held units of epoch n, in input order, released after its snapshot. */
  release(n: number): Unit[];
  /** Where the shard must be re-read from after a snapshot (records past the hold bound); cleared. */
  takeOverflow(): string | undefined;
  /** true when nothing is held and no barrier waits (a shard may close only then) */
  readonly settled: boolean;
  describe(): Record<string, unknown>;
}

export function createBarrierHandler(mode: Plan['mode'], dedupe: RecordDedupe, maxHeld: number): BarrierHandler {
  return mode === 'at-least-once' ? new BarrierTracker() : new BarrierAligner(dedupe, maxHeld);
}

/** Barriers per checkpoint and producer, and the positions of barriers of later checkpoints. */
abstract class BarrierBook {
  topology: readonly number[] = [];
  protected readonly barriers = new Map<number, Map<string, BarrierInfo>>();
  private futureBarriers: Array<{ n: number; position: string }> = [];

  onBarrier(producer: string, env: BarrierEnvelope, position: string, epoch: number): boolean {
    if (env.checkpointId <= epoch) return false;
    let bs = this.barriers.get(env.checkpointId);
    if (!bs) this.barriers.set(env.checkpointId, (bs = new Map()));
    if (!bs.has(producer)) bs.set(producer, { count: env.count, topology: env.topology, savepoint: env.savepoint, reshard: env.reshard });
    if (env.checkpointId > epoch + 1) this.futureBarriers.push({ n: env.checkpointId, position });
    return true;
  }

  waiting(n: number): boolean {
    return this.barriers.has(n);
  }

  complete(n: number, allSent: AllSent, frontier: string): AlignedCheckpoint | undefined {
    const bs = this.barriers.get(n);
    if (!bs) return undefined;
    const info = bs.values().next().value as BarrierInfo;
    this.topology = info.topology;
    if (!allSent(bs.keys(), info.topology) && !this.superseded(n, allSent)) return undefined;
    if (!this.countsMet(n, bs)) return undefined;
    let rp = this.earliestHeld(frontier);
    for (const f of this.futureBarriers) if (f.n > n && compareSeq(f.position, rp) < 0) rp = f.position;
    this.barriers.delete(n);
    this.futureBarriers = this.futureBarriers.filter((f) => f.n > n);
    return { info, producers: new Set(bs.keys()), replayFrom: rp };
  }

  /**
   * Whether barrier n can get no more producers: a later checkpoint's barrier came from every
   * producer it must come from. A source stream merged outside the job before barrier n reached
   * both parents leaves a parent that never sends n, and the merged child goes on in the later epoch
   * (parent-handover.ts), so n's barriers never cover that parent's hash range. Each producer sends
   * its barriers in order, and a child shard is read only after its parents, so once every producer
   * of a later checkpoint sent it, every barrier n still to come has come: n aligns with the
   * producers that sent it (their counts still checked), as Flink lets a later checkpoint subsume one
   * that cannot complete.
   */
  private superseded(n: number, allSent: AllSent): boolean {
    for (const [m, bs] of this.barriers) {
      if (m <= n) continue;
      const info = bs.values().next().value as BarrierInfo | undefined;
      if (info && allSent(bs.keys(), info.topology)) return true;
    }
    return false;
  }

  /** whether every record each barrier of checkpoint n counts was applied */
  protected abstract countsMet(n: number, barriers: ReadonlyMap<string, BarrierInfo>): boolean;
  /** the earliest of `frontier` and of the positions of held (or overflowed) records */
  protected abstract earliestHeld(frontier: string): string;

  describe(): Record<string, unknown> {
    return { waitingBarriers: [...this.barriers].map(([n, m]) => `${n}:${[...m.keys()].join(',')}`) };
  }
}

/** Exactly-once: aligns barriers, holding back records of later epochs. */
class BarrierAligner extends BarrierBook implements BarrierHandler {
  private held: Unit[] = [];
  private readonly heldIds = new Set<string>();
  private overflowFrom: string | undefined;

  constructor(
    private readonly dedupe: RecordDedupe,
    private readonly maxHeld: number,
  ) {
    super();
  }

  appliesFrom(epoch: number): number {
    // records of an epoch below the instance's are in its snapshot already
    return epoch;
  }

  hold(unit: Unit, epoch: number): HoldOutcome | undefined {
    if (unit.env.epoch <= epoch) return undefined;
    const id = unitId(unit);
    if (this.heldIds.has(id)) return 'duplicate';
    if (this.held.length >= this.maxHeld) {
      // the log is the overflow buffer: re-read from here after the next snapshot
      if (this.overflowFrom === undefined || compareSeq(unit.position, this.overflowFrom) < 0) this.overflowFrom = unit.position;
      return 'spilled';
    }
    this.heldIds.add(id);
    this.held.push(unit);
    return 'held';
  }

  protected countsMet(n: number, bs: ReadonlyMap<string, BarrierInfo>): boolean {
    for (const [producer, b] of bs) if (this.dedupe.count(producer, n - 1) < b.count) return false;
    return true;
  }

  protected earliestHeld(frontier: string): string {
    let rp = frontier;
    for (const h of this.held) if (compareSeq(h.position, rp) < 0) rp = h.position;
    if (this.overflowFrom !== undefined && compareSeq(this.overflowFrom, rp) < 0) rp = this.overflowFrom;
    return rp;
  }

  release(n: number): Unit[] {
    // later epochs stay held (an abort lets epochs overlap)
    const release = this.held.filter((h) => h.env.epoch === n);
    if (!release.length) return release;
    this.held = this.held.filter((h) => h.env.epoch !== n);
    for (const h of release) this.heldIds.delete(unitId(h));
    return release.sort((a, b) => compareSeq(a.position, b.position) || a.index - b.index);
  }

  takeOverflow(): string | undefined {
    const from = this.overflowFrom;
    this.overflowFrom = undefined;
    return from;
  }

  get settled(): boolean {
    return !this.held.length && !this.barriers.size && this.overflowFrom === undefined;
  }

  override describe(): Record<string, unknown> {
    return { held: this.held.length, ...super.describe() };
  }
}

/** At-least-once: tracks barriers; a late record is applied after all, nothing is held back. */
class BarrierTracker extends BarrierBook implements BarrierHandler {
  appliesFrom(): number {
    return Number.NEGATIVE_INFINITY;
  }

  hold(): undefined {
    return undefined;
  }

  protected countsMet(): boolean {
    return true;
  }

  protected earliestHeld(frontier: string): string {
    return frontier;
  }

  release(): Unit[] {
    return [];
  }

  takeOverflow(): undefined {
    return undefined;
  }

  get settled(): boolean {
    return !this.barriers.size;
  }

  override describe(): Record<string, unknown> {
    return { held: 0, ...super.describe() };
  }
}
