/**
 * Which deltas of one instance the coordinator may delete. A delta of checkpoint k is needed while
 *
 * - k is the instance's current snapshot pointer, or in the chain the pointer names (base < k ≤
 *   pointer: a restore folds those deltas, runtime/changelog.ts), or
 * - k is one of the retained completed checkpoints (`plan.checkpoint.retained`), or
 * - k is newer than every completed checkpoint (in flight, or written by a snapshot whose
 *   checkpoint has not committed yet).
 *
 * Everything else (older checkpoints, aborted ones the pointer has moved past) goes. Savepoints
 * never need deltas: they are self-contained copies (shared/adapters/aws/savepoints.ts).
 */
export interface DeltaNeeds {
  readonly retained: ReadonlySet<number>;
  /** checkpoint id of the instance's current snapshot pointer, if any */
  readonly pointer: number | undefined;
  /** the last checkpoint applied before the pointer's chain (`chainOf`); absent: pointer − 1 */
  readonly base?: number | undefined;
  /** the newest completed checkpoint */
  readonly latestCompleted: number;
}

export function deltaNeeded(k: number, needs: DeltaNeeds): boolean {
  const { pointer } = needs;
  const inChain = pointer !== undefined && k <= pointer && k > (needs.base ?? pointer - 1);
  return inChain || needs.retained.has(k) || k > needs.latestCompleted;
}

/** The checkpoint ids among `existing` whose deltas can be deleted, ascending, without repeats. */
export function deltasToDelete(existing: readonly number[], needs: DeltaNeeds): number[] {
  return [...new Set(existing)].filter((k) => !deltaNeeded(k, needs)).sort((a, b) => a - b);
}

/** A commit collects garbage at most about this often: each run reads every instance's pointer and deltas. */
export const GC_PERIOD_MS = 60_000;

/**
 * Whether the commit of checkpoint n collects garbage: every `ceil(GC_PERIOD_MS / pauseMs)`-th
 * checkpoint id, so a job pays one LIST (for all its instances) and two reads per instance a
 * minute rather than per checkpoint. Checkpoints that take longer than the pause come far less
 * often than that (a short pause and 10 s checkpoints: one every 200 ids is once in half an hour, and deltas and records
 * pile up meanwhile), so a commit also collects when n was open across a GC_PERIOD_MS boundary
 * (`open`: its start and its commit, ms since the epoch). Collecting less often is safe: a delta no
 * checkpoint needs stays unneeded (the retained window and the pointers only move forward), it is
 * just deleted a little later.
 */
export function collectsGarbage(n: number, pauseMs: number, open?: { readonly startedAt: number; readonly committedAt: number }): boolean {
  const every = Math.max(1, Math.ceil(GC_PERIOD_MS / Math.max(1, pauseMs)));
  if (n % every === 0) return true;
  return open !== undefined && Math.floor(open.startedAt / GC_PERIOD_MS) !== Math.floor(open.committedAt / GC_PERIOD_MS);
}
