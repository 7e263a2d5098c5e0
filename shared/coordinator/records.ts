/**
 * What the coordinator records about checkpoints and savepoints, as every reader (CLI, local
 * runner, tests) sees them; the checkpoint store keeps them (shared/coordinator/ports.ts).
 */
import type { SnapshotPointer } from '../runtime/ports.js';

export type CheckpointStatus = 'IN_FLIGHT' | 'COMPLETED' | 'ABORTED';

/** What one instance flushed for a checkpoint (recorded at commit from its snapshot pointer). */
export interface InstanceCheckpointStats {
  readonly bytes?: number;
  readonly keys?: number;
  readonly replayPoint: SnapshotPointer['replayPoint'];
  readonly delta: SnapshotPointer['delta'];
}

export interface CheckpointRecord {
  readonly checkpointId: number;
  readonly status: CheckpointStatus;
  readonly savepoint: boolean;
  /** set when this checkpoint is a savepoint asked for by a user */
  readonly savepointId?: string;
  readonly expected: number;
  readonly acks: number;
  /** every expected instance acked (by identity; by count on records without `members`) */
  readonly complete?: boolean;
  /** expected instances that have not acked (records without `members`: undefined) */
  readonly missing?: readonly string[];
  /** instances per stage: the stages' open shards at allocate, a source's at the first injection */
  readonly topology: readonly number[];
  /** barriers of n may be out: its topology and members are fixed (Coordinator.inject) */
  readonly injected?: boolean;
  readonly startedAt: string;
  readonly endedAt?: string;
  readonly durationMs?: number;
  readonly reason?: string;
  /** the ack count the coordinator last saw grow, and when (the progress window runs from there) */
  readonly progressAcks?: number;
  readonly progressAt?: string;
  /** per instance: bytes and keys flushed, replay point, delta (committed checkpoints) */
  readonly instances?: Readonly<Record<string, InstanceCheckpointStats>>;
  /** total delta bytes and dirty keys flushed by every instance */
  readonly bytes?: number;
  readonly keys?: number;
  /** set on the checkpoint a restore creates */
  readonly restoredFrom?: string;
  /** stages whose input stream is resharded once this checkpoint completes */
  readonly reshard?: readonly number[];
}

/** Every expected instance acked n (by identity; by count on records written before members were kept). */
export function allAcked(ck: Pick<CheckpointRecord, 'complete' | 'acks' | 'expected'>): boolean {
  return ck.complete ?? ck.acks >= ck.expected;
}

export type SavepointStatus = 'REQUESTED' | 'IN_PROGRESS' | 'COMPLETED' | 'FAILED';

export interface SavepointRecord {
  readonly id: string;
  readonly status: SavepointStatus;
  /** stop the job once the savepoint is complete (no further checkpoint is taken) */
  readonly stop: boolean;
  readonly requestedAt: string;
  readonly checkpointId?: number;
  readonly completedAt?: string;
  /** `savepoints/<id>/` in the job's bucket */
  readonly location?: string;
  readonly rows?: number;
  readonly timers?: number;
  readonly bytes?: number;
  readonly reason?: string;
}

export type RescalePhase = 'requested' | 'draining' | 'resharding' | 'done';

export interface RescaleRecord {
  readonly stage: string;
  readonly fromShards: number;
  readonly toShards: number;
  readonly phase: RescalePhase;
  readonly requestedAt: string;
  /** the checkpoint whose barriers announced the reshard */
  readonly checkpointId?: number;
  readonly reshardedAt?: string;
  readonly finishedAt?: string;
}

/** Savepoint ids become object key segments. */
export function validSavepointId(id: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/.test(id);
}
