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
 * Pure, so the rule is tested without a clock; the coordinator feeds it what it read.
 */

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
