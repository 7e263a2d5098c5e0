/**
 * How the stage functions are fed by default: batch size, batching window and memory of the event
 * source mappings and functions. Pure numbers (no CDK) so that `sluice cost` prices the same
 * defaults the construct deploys (bench/cost.ts).
 *
 * Much of what a stage costs is paid per batch, not per event: each invocation commits its lease
 * position (one UpdateItem, how an environment knows its cache is still the lease's:
 * docs/guarantees.md), reads its lease, a source batch reads the idle item (wake-up), and the
 * function is billed for the time it waits on those requests. Fewer, larger batches are the way
 * to fewer of them.
 */
import type { CheckpointSettings } from '../shared/plan/plan.js';

export const BATCHING = {
  /**
   * Records per invocation: Kinesis's maximum. A shard takes at most 1,000 records a second, so
   * with the window below the window (not the size) closes a batch; the event source mapping also
   * invokes at 6 MB of payload, so large records cannot overflow an invocation.
   */
  batchSize: 10_000,
  /**
   * The window is this fraction of the checkpoint interval: sinks publish once per checkpoint, so
   * results are already up to an interval late; a barrier crosses each stage after up to one
   * window, so with three stages a checkpoint still completes within about the interval.
   */
  windowOfInterval: 1 / 5,
  /** past this, longer windows save little (per-batch costs fall as 1/window) and add latency to every stage */
  windowCapMs: 5_000,
  /** the default window leaves a checkpoint's progress window (checkpoint.timeoutMs) time for slow batches: at most this fraction of it */
  windowOfTimeout: 1 / 4,
  /**
   * a given window is refused above this fraction of the progress window: the acks of consecutive
   * stages are one window (plus a poll and a batch) apart, and a checkpoint with no ack for a whole
   * progress window is aborted (shared/coordinator/timeouts.ts)
   */
  maxWindowOfTimeout: 1 / 2,
  /**
   * A stage function serves one shard per invocation (a shard takes at most 1 MB/s and 1,000
   * records/s), so it needs little CPU: the bench's keyed job spends about 15 µs of CPU per event
   * over both stages, 1.5 % of a vCPU at 1,000 events/s. Lambda bills the time an invocation waits
   * on DynamoDB, Kinesis and S3 by memory, so memory beyond the need is paid for while waiting. 512 MB
   * (0.29 vCPU) leaves room for a 6 MB batch decoded, the 32 MB state cache and changelog rows
   * pending between materializations; a job with heavy operators or many dirty keys per
   * checkpoint sets `stageSettings.<stage>.memorySize` (1,024–2,048 MB) and watches Duration.
   */
  memorySize: 512,
} as const;

/** Lambda polls each shard about once a second: without a window a shard's batches are about this far apart. */
export const POLL_INTERVAL_MS = 1_000;

/**
 * The default batching window of a job's event source mappings, in whole seconds (Lambda's unit):
 * a fifth of the time between checkpoints, at most 5 s and a quarter of the progress window; none under 1 s.
 */
export function defaultBatchingWindowMs(checkpoint: Pick<CheckpointSettings, 'intervalMs' | 'minPauseMs' | 'timeoutMs'>): number {
  // the time between checkpoints is the interval or the minimum pause, the longer (coordinator/loop.ts pauseMsOf)
  const ms = Math.min(Math.max(checkpoint.intervalMs, checkpoint.minPauseMs) * BATCHING.windowOfInterval, BATCHING.windowCapMs, checkpoint.timeoutMs * BATCHING.windowOfTimeout);
  return Math.floor(ms / 1000) * 1000;
}

/** The longest batching window a stage may be given: past it, a checkpoint's acks may arrive further apart than its progress window. */
export function maxBatchingWindowMs(checkpoint: Pick<CheckpointSettings, 'timeoutMs'>): number {
  return checkpoint.timeoutMs * BATCHING.maxWindowOfTimeout;
}
