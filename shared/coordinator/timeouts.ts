/**
 * When an open checkpoint is given up. A fixed deadline livelocks a loaded job: every checkpoint
 * that needs longer than the deadline is aborted, and the next one starts behind the same queue.
 * So `checkpoint.timeoutMs` is a *progress window*, not a deadline:
 *
 * - a checkpoint is aborted when no instance acknowledged it for a whole window (it is stuck);
 * - every acknowledgement restarts the window, so a checkpoint whose acks keep arriving stays open;
 * - after aborted checkpoints the window doubles for each one in a row (at most 2^6), so a job that
 *   needs longer than `timeoutMs` to get its first acks still completes the next checkpoint;
 * - nothing stays open past the hard ceiling, `CEILING_FACTOR × timeoutMs`.
 *
 * `timeoutVerdict` is the rule, pure (tested without a clock); `progressVerdict` feeds it what the
 * checkpoint store holds and records progress there.
 */
import type { CheckpointStore } from './ports.js';
import type { CheckpointRecord } from './records.js';

/** The hard ceiling, in windows: a checkpoint is never open longer than this many `timeoutMs`. */
export const CEILING_FACTOR = 10;
/** The window grows at most to 2^this × timeoutMs after aborts in a row (and never past the ceiling). */
const MAX_DOUBLINGS = 6;

export interface CheckpointProgress {
  /** ms since the checkpoint started */
  readonly ageMs: number;
  /** ms since its ack count last grew (its age when none came yet) */
  readonly quietMs: number;
  readonly acks: number;
  readonly expected: number;
  /** checkpoints aborted in a row just before this one */
  readonly abortedBefore: number;
}

export type TimeoutVerdict = { readonly abort: false; readonly windowMs: number } | { readonly abort: true; readonly reason: string };

export function ceilingMs(timeoutMs: number): number {
  return CEILING_FACTOR * timeoutMs;
}

/** The progress window of a checkpoint that follows `abortedBefore` aborted ones. */
export function windowMs(timeoutMs: number, abortedBefore: number): number {
  return Math.min(ceilingMs(timeoutMs), timeoutMs * 2 ** Math.min(MAX_DOUBLINGS, Math.max(0, abortedBefore)));
}

export function timeoutVerdict(p: CheckpointProgress, timeoutMs: number): TimeoutVerdict {
  const acks = `${p.acks} of ${p.expected} acks`;
  const ceiling = ceilingMs(timeoutMs);
  if (p.ageMs >= ceiling) return { abort: true, reason: `open ${p.ageMs} ms: reached the ceiling of ${ceiling} ms (${CEILING_FACTOR} × timeoutMs) with ${acks}` };
  const window = windowMs(timeoutMs, p.abortedBefore);
  if (p.quietMs >= window) {
    const since = p.quietMs === p.ageMs ? 'since it started' : 'since the last one';
    return { abort: true, reason: `no acknowledgement for ${p.quietMs} ms ${since} (window ${window} ms) with ${acks}` };
  }
  return { abort: false, windowMs: window };
}

/**
 * Whether an open checkpoint is stuck, as of `now`. Progress is its ack count: the first look that
 * sees it grew records the time on the checkpoint (`progressAcks`, `progressAt`), which restarts the
 * window; the window runs from there, or from the start while no ack came.
 */
export async function progressVerdict(store: Pick<CheckpointStore, 'noteProgress' | 'getCheckpoint'>, ck: CheckpointRecord, timeoutMs: number, now: Date): Promise<TimeoutVerdict> {
  const at = now.getTime();
  const startedAt = Date.parse(ck.startedAt);
  let since = ck.progressAt !== undefined ? Date.parse(ck.progressAt) : startedAt;
  if (ck.acks > (ck.progressAcks ?? 0)) {
    since = at;
    await store.noteProgress(ck.checkpointId, ck.acks, now.toISOString());
  }
  const p = { ageMs: at - startedAt, quietMs: at - since, acks: ck.acks, expected: ck.expected };
  // the window is never shorter than timeoutMs: below it, no need to read the aborts before n
  if (p.quietMs < timeoutMs && p.ageMs < ceilingMs(timeoutMs)) return { abort: false, windowMs: timeoutMs };
  return timeoutVerdict({ ...p, abortedBefore: await abortedBefore(store, ck.checkpointId) }, timeoutMs);
}

/** How many checkpoints right before n were aborted (up to MAX_DOUBLINGS looked at: the window grows no further). */
async function abortedBefore(store: Pick<CheckpointStore, 'getCheckpoint'>, n: number): Promise<number> {
  let k = 0;
  for (let m = n - 1; m >= 1 && k < MAX_DOUBLINGS; m--) {
    if ((await store.getCheckpoint(m))?.status !== 'ABORTED') break;
    k++;
  }
  return k;
}
