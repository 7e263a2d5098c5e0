/**
 * Naming a stall: when the last few checkpoints all ended without completing and some instances
 * acked none of them and have no snapshot at or past the first, the job is stalled on them, and the
 * report says which barrier each one still waits for. Aborts report it (metric `CheckpointStalled`);
 * the chaos harness names a stall with it.
 */
import type { CheckpointStore } from './ports.js';
import type { CheckpointRecord } from './records.js';

/** Checkpoints in a row that end without an instance's ack before the coordinator calls the job stalled. */
export const STALL_AFTER = 3;

/** A stall named: the instances every recent checkpoint waited for in vain. */
export interface StallReport {
  readonly checkpointId: number;
  readonly waiting: ReadonlyArray<{ readonly instance: string; readonly lastSnapshot: number }>;
  /** "stalled at checkpoint n: instance … waits for barrier k (…)" */
  readonly message: string;
}

/**
 * The stall the last `after` of `checkpoints` (every record, oldest first) show: they all ended
 * without completing (or are still in flight), and some instances acked none of them and have no
 * snapshot at or past the first. Undefined when nothing says so.
 */
export async function stallOf(checkpoints: readonly CheckpointRecord[], after: number, store: Pick<CheckpointStore, 'snapshotPointer'>): Promise<StallReport | undefined> {
  const recent = checkpoints.slice(-after);
  if (recent.length < after || recent.some((c) => c.status === 'COMPLETED')) return undefined;
  let common: string[] | undefined;
  for (const c of recent) {
    if (!c.missing) return undefined;
    common = common ? common.filter((m) => c.missing!.includes(m)) : [...c.missing];
  }
  if (!common?.length) return undefined;
  const first = recent[0]!.checkpointId;
  const last = recent[recent.length - 1]!;
  const waiting: Array<{ instance: string; lastSnapshot: number }> = [];
  for (const instance of common) {
    const pointer = await store.snapshotPointer(instance);
    const lastSnapshot = pointer?.checkpointId ?? 0;
    if (lastSnapshot < first) waiting.push({ instance, lastSnapshot });
  }
  if (!waiting.length) return undefined;
  const who = waiting.map((w) => `instance ${w.instance} waits for barrier ${w.lastSnapshot + 1} (last snapshot: ${w.lastSnapshot ? `checkpoint ${w.lastSnapshot}` : 'none'})`).join('; ');
  const span = recent.length > 1 ? `checkpoints ${first}–${last.checkpointId}` : `checkpoint ${first}`;
  return { checkpointId: last.checkpointId, waiting, message: `stalled at checkpoint ${last.checkpointId}: ${who}; ${span} ended without its ack` };
}
