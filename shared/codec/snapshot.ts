/**
 * The snapshot codec: a checkpoint delta is the dirty state rows of one instance plus what its
 * snapshot holds besides rows (timers, watermarks, clocks, operator and broadcast state),
 * MessagePack-encoded. Spill parts use the same encoding with no extras.
 */
import type { BroadcastStateStore } from '../runtime/broadcast-state.js';
import type { OperatorListRow } from '../runtime/operator-state.js';
import type { StateRow } from '../runtime/ports.js';
import type { TimerIndex } from '../runtime/timers.js';
import { SluiceError } from '../util/errors.js';
import { decodePayload, encodePayload } from './payload.js';
import { encodeDeltaFast } from './payload-writer.js';

/** A source instance's event-time clock: what it saw, what it emitted, whether it is idle. */
export interface SourceClock {
  maxTs: number;
  emitted: number;
  idle: boolean;
  lastActive: number;
  dataSinceTick: boolean;
}

/** Everything a snapshot holds besides the state rows. */
export interface SnapshotExtras {
  readonly timers: ReturnType<TimerIndex['toJSON']>;
  readonly channels: Array<[string, number, boolean]>;
  readonly watermark: number | null;
  readonly processingTime: number;
  readonly source: SourceClock | null;
  /** producers whose bounded input ended, and whether this instance finished */
  readonly ended?: string[];
  readonly finished?: boolean;
  /** broadcast state, whole (it is small and identical in every instance) */
  readonly broadcast?: ReturnType<BroadcastStateStore['toJSON']>;
  /** operator list state of this instance (redistributed by its mode when parallelism changes) */
  readonly operatorLists?: OperatorListRow[];
  /** stages whose input stream is resharded after this checkpoint (the epoch routes to them by key group) */
  readonly reshard?: number[];
  /** instances per stage as barrier n said: how many producers to wait for before the next barrier tells */
  readonly topology?: number[];
}

/** What a snapshot's writer gives: the timers may be `TimerIndex.snapshotRows()` (the same bytes as its `toJSON()`). */
export type SnapshotExtrasToWrite = Omit<SnapshotExtras, 'timers'> & { readonly timers: SnapshotExtras['timers'] | ReturnType<TimerIndex['snapshotRows']> };

export function encodeDelta(rows: readonly StateRow[], extras?: SnapshotExtrasToWrite): Uint8Array {
  return encodeDeltaFast(rows, extras ?? null) ?? encodePayload(deltaValue(rows, extras));
}

/** The value a delta's bytes encode (what encodeDeltaFast writes without building it; a `KeptList` encodes as its `toJSON()`). */
export function deltaValue(rows: readonly StateRow[], extras?: SnapshotExtrasToWrite): unknown {
  return { v: 2, rows: rows.map((r) => [r.operatorId, r.keyGroup, r.key, r.values]), extras: extras ?? null };
}

export function decodeDelta(bytes: Uint8Array): { rows: StateRow[]; extras: SnapshotExtras | undefined } {
  const raw = decodePayload<{ v: number; rows: Array<[string, number, string, Record<string, Uint8Array>]>; extras: SnapshotExtras | null }>(bytes);
  if (!raw || raw.v !== 2 || !Array.isArray(raw.rows)) throw new SluiceError('corrupt checkpoint delta', 'DELTA_CORRUPT');
  const rows = raw.rows.map(([operatorId, keyGroup, key, values]) => ({
    operatorId,
    keyGroup,
    key,
    values: Object.fromEntries(Object.entries(values).map(([k, v]) => [k, new Uint8Array(v)])),
  }));
  return { rows, extras: raw.extras ?? undefined };
}
