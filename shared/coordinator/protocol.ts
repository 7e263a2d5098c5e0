/**
 * The contract between the coordinator state machine (defined once, in CDK) and the coordinator
 * function that performs its tasks. The state machine passes `CoordinatorTaskInput` as the Lambda
 * payload; the function answers with the matching output or fails with one of the errors below.
 * Commit targets (what publishes staged sink outputs) plug into the commit task.
 */
import { SluiceError } from '../util/errors.js';

export type CoordinatorTaskInput =
  /** allocate the next checkpoint id; fails with CheckpointInFlightError if one is still open */
  | { readonly action: 'allocate'; readonly savepoint?: boolean }
  /** inject barrier n into every open shard of every source stream (idempotent) */
  | { readonly action: 'inject'; readonly checkpointId: number }
  /** register the task token; the instance whose ack completes the set calls SendTaskSuccess */
  | { readonly action: 'await'; readonly checkpointId: number; readonly taskToken: string }
  /** mark n COMPLETED, publish every unpublished sink epoch below n, expire what no retained checkpoint needs */
  | { readonly action: 'commit'; readonly checkpointId: number }
  /** mark n ABORTED and still deliver barrier n to every source shard */
  | { readonly action: 'abort'; readonly checkpointId: number; readonly reason?: unknown }
  /** ask for a savepoint (the next checkpoint becomes one); with `stop`, no checkpoint follows it */
  | { readonly action: 'savepoint'; readonly savepointId?: string; readonly stop?: boolean }
  /** delete deltas no retained checkpoint needs (commit does it too) */
  | { readonly action: 'gc' }
  /** with several checkpoints in flight: commit the complete ones in order, abort the stuck ones */
  | { readonly action: 'settle' }
  /** the progress window passed with n still open: abort n if it is stuck, else wait again (`extend`) */
  | { readonly action: 'overdue'; readonly checkpointId: number };

export interface AllocateOutput {
  readonly checkpointId: number;
}
export interface InjectOutput {
  readonly checkpointId: number;
  readonly shards: number;
}
export interface CommitOutput {
  readonly checkpointId: number;
  /** values the transactional sinks published */
  readonly published: number;
  /** deltas garbage-collected */
  readonly deltasDeleted?: number;
}
export interface SettleOutput {
  /** checkpoints still in flight */
  readonly open: number;
  /** the oldest of them (0 when none) */
  readonly oldest: number;
}
export interface OverdueOutput {
  readonly checkpointId: number;
  /** true: n is still open and progressing (or complete): wait for it again */
  readonly extend: boolean;
  /** why n was aborted, when it was */
  readonly reason?: string;
}
export interface AbortOutput {
  readonly checkpointId: number;
}

/** Name of the error a Lambda task throws when a checkpoint is already in flight (retried by the state machine). */
export const CHECKPOINT_IN_FLIGHT = 'CheckpointInFlightError';

/** A checkpoint is still open (or none may start yet): the state machine retries allocate. */
export class CheckpointInFlightError extends SluiceError {
  override readonly name = CHECKPOINT_IN_FLIGHT;
  constructor(n: number, why?: string) {
    super(why ?? `checkpoint ${n} is still in flight`, 'CHECKPOINT_IN_FLIGHT', true);
  }
}

/** A stop-with-savepoint was taken: the job takes no further checkpoints until it is restored. */
export class JobStoppedError extends SluiceError {
  // the state machine retries this name with backoff (then fails): the operator stops the workflow meanwhile
  override readonly name = CHECKPOINT_IN_FLIGHT;
  constructor(n: number) {
    super(`the job was stopped with a savepoint at checkpoint ${n}: restore it to go on`, 'JOB_STOPPED', true);
  }
}

/** The commit of the last checkpoint is still running: the loop's next allocate waits (retried like a checkpoint in flight). */
export class CommitRunningError extends SluiceError {
  override readonly name = CHECKPOINT_IN_FLIGHT;
  constructor(n: number) {
    super(`the commit of checkpoint ${n} is still running`, 'CHECKPOINT_IN_FLIGHT', true);
  }
}

/** Something that publishes staged sink outputs when a checkpoint commits. */
export interface CommitTarget {
  publish(checkpointId: number): number | Promise<number>;
}
