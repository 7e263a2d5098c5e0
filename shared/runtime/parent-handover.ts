/**
 * What the instance of a closed parent shard hands a child shard after a reshard, and how the
 * child starts from one or two parents (a split has one, a merge two). Streams are resharded only
 * at a checkpoint boundary, so every parent is in the same epoch with nothing held back; the child
 * goes on with that epoch as a new producer. Keyed state, timers and dedupe sets come from the key
 * groups the child owns (the parent filters them); operator lists are dealt out by their mode;
 * broadcast state is the same everywhere.
 */
import { SluiceError } from '../util/errors.js';
import type { BroadcastStateStore } from './broadcast-state.js';
import { redistributeOperatorLists, type OperatorListRow } from './operator-state.js';
import type { StateRow } from './ports.js';
import { TimerIndex } from './timers.js';
import type { WatermarkHandover } from './watermark-tracker.js';

type TimerRows = ReturnType<TimerIndex['toJSON']>;

export interface ParentHandover {
  readonly id: string;
  readonly epoch: number;
  /** nothing held back and no barrier waiting */
  readonly settled: boolean;
  readonly reshard: readonly number[];
  /** the upsert generation the parent wrote its epoch's outputs with */
  readonly generation: number;
  readonly topology: readonly number[];
  readonly processingTime: number;
  readonly finished: boolean;
  readonly broadcast: ReturnType<BroadcastStateStore['toJSON']>;
  /** dirty rows and timers of the child's key groups */
  readonly dirtyRows: StateRow[];
  readonly timers: TimerRows;
  readonly watermark: WatermarkHandover;
  readonly seen: ReadonlyMap<string, ReadonlySet<number>>;
  readonly ended: readonly string[];
  readonly operatorLists: OperatorListRow[];
}

/** A parent's handover, and where the child stands among the parent's children (by hash range). */
export interface ParentShare {
  readonly handover: ParentHandover;
  readonly childIndex: number;
  readonly children: number;
}

/** What a child shard's instance starts from. */
export interface InheritedState extends Pick<ParentHandover, 'epoch' | 'reshard' | 'generation' | 'topology' | 'processingTime' | 'finished' | 'broadcast' | 'timers' | 'ended' | 'operatorLists'> {
  /** per parent */
  readonly dirtyRows: readonly StateRow[][];
  readonly watermarks: readonly WatermarkHandover[];
  readonly seen: ReadonlyArray<ReadonlyMap<string, ReadonlySet<number>>>;
}

/**
 * Whether a source stage's parent shards were merged outside the job: the job's own rescale of its
 * source stream (in place) announced it with the checkpoint the parents ended at (`reshard` names
 * the stage), a merge made by someone else did not.
 */
export function mergedOutsideTheJob(parents: readonly ParentShare[], stageIndex: number): boolean {
  return !parents.every((p) => p.handover.reshard.includes(stageIndex));
}

/**
 * `sourceStage`: the child's stage reads a source stream, at this index of the plan. Its parents
 * merged outside the job (`mergedOutsideTheJob`, decided here only) were merged at no checkpoint
 * boundary: one parent may have put barrier n out and the other not (its barrier landed in the
 * child after the merge). The child goes on in the later epoch; downstream, the barrier the other
 * parent never sent is superseded by the next checkpoint's (barrier-handler.ts). Every other merge
 * (an inner stage's, or the job's own of its source) refuses parents in two epochs.
 */
export function mergeParents(childId: string, parents: readonly ParentShare[], options: { sourceStage?: number } = {}): InheritedState {
  const sourceMerge = options.sourceStage !== undefined && mergedOutsideTheJob(parents, options.sourceStage);
  const latest = parents.reduce((a, p) => (p.handover.epoch > a.handover.epoch ? p : a)).handover;
  const first = sourceMerge ? latest : parents[0]!.handover;
  for (const { handover: p } of parents) {
    if (p.epoch !== first.epoch && !sourceMerge) {
      throw new SluiceError(`${childId}: parent shards are in epochs ${first.epoch} and ${p.epoch}; a stream is resharded only at a checkpoint boundary`, 'RESHARD_INVALID');
    }
    if (!p.settled) throw new SluiceError(`${childId}: parent ${p.id} was still aligning a checkpoint when its shard closed`, 'RESHARD_INVALID');
  }
  const handovers = parents.map((p) => p.handover);
  const shares = parents.map(({ handover: p, childIndex, children }) => redistributeOperatorLists([p.operatorLists], children)[childIndex]!);
  return {
    epoch: first.epoch,
    reshard: first.reshard,
    // the rest of this epoch's upserts outrank whatever a parent wrote (or a zombie of it writes late)
    generation: 1 + Math.max(...handovers.map((p) => p.generation)),
    topology: first.topology,
    processingTime: Math.max(...handovers.map((p) => p.processingTime)),
    finished: handovers.every((p) => p.finished),
    broadcast: first.broadcast,
    dirtyRows: handovers.map((p) => p.dirtyRows),
    // each parent's timers in its firing order; together in one that does not depend on the parents' order
    timers: TimerIndex.inKeyOrder(handovers.flatMap((p) => p.timers)),
    watermarks: handovers.map((p) => p.watermark),
    seen: handovers.map((p) => p.seen),
    ended: handovers.flatMap((p) => p.ended),
    operatorLists: redistributeOperatorLists(shares, 1)[0]!,
  };
}
