/**
 * What the coordinator needs from the outside world, as ports: its own records (the checkpoint
 * store: the control table on AWS), the source streams it injects barriers into and reshards, the
 * delta objects it garbage-collects, the savepoint files it writes and the workflow whose tokens it
 * answers. The AWS adapters live in shared/adapters/aws/ (coordinator-ports.ts), the in-memory
 * twins in shared/adapters/memory/ (checkpoint-store.ts). The coordinator's logic (coordinator.ts,
 * rescale.ts, loop.ts, wake.ts) speaks only these interfaces.
 *
 * Every write that another task may race is conditional; the methods say which condition, and a
 * `false` (or a silent no-op) is the answer of a failed condition.
 */
import type { AnnouncedBarrier, ShardDirectory, ShardInfo, SnapshotPointer, TaskNotifier } from '../runtime/ports.js';
import type { CheckpointRecord, CheckpointStatus, InstanceCheckpointStats, RescaleRecord, SavepointRecord, SavepointStatus } from './records.js';

/** The coordinator's own row: last allocated checkpoint, the open ones, a stop held or taken. */
export interface CoordinatorState {
  readonly last: number;
  /** the checkpoints in flight, ascending */
  readonly open: readonly number[];
  /** a stop-with-savepoint in flight (its checkpoint) */
  readonly stopping?: number;
  /** the job stopped with a savepoint at this checkpoint */
  readonly stoppedAt?: number;
  /** the job read all of its bounded input by this checkpoint */
  readonly finishedAt?: number;
}

/** A checkpoint record as allocate creates it. */
export interface NewCheckpoint {
  readonly checkpointId: number;
  /** the instances expected to ack */
  readonly members: readonly string[];
  readonly topology: readonly number[];
  readonly startedAt: string;
  readonly savepoint: boolean;
  readonly savepointId?: string;
  readonly reshard?: readonly number[];
}

/** The end of a checkpoint (COMPLETED or ABORTED). */
export interface CheckpointEnd {
  readonly status: Exclude<CheckpointStatus, 'IN_FLIGHT'>;
  readonly endedAt: string;
  readonly durationMs: number;
  readonly reason?: string;
}

/** Checkpoints an announcement keeps: a source further behind takes the older ones at the tail. */
export const ANNOUNCED_KEPT = 8;

export interface CheckpointStore {
  // ---- the coordinator's state
  readState(): Promise<CoordinatorState>;
  /** Opens n: only while `last` is `previous`, fewer than `maxOpen` are open and no stop is held or taken; with `stop`, n holds a stop. */
  openNext(n: number, previous: number, maxOpen: number, stop: boolean): Promise<boolean>;
  /** Takes n out of the open set. */
  closeOpen(n: number): Promise<void>;
  /** Lifts the stop n holds (a no-op unless n holds it). */
  liftStop(n: number): Promise<void>;
  /** The job finished its bounded input at n (and stopped, unless it stopped earlier). */
  markFinished(n: number): Promise<void>;
  /** The job stopped with a savepoint at n. */
  markStopped(n: number): Promise<void>;

  /**
   * Announces that checkpoint n is open to the source instances it names (they put barrier n at
   * their read position). Keeps the last few announced; never drops another writer's checkpoint.
   */
  announceBarrier(announced: AnnouncedBarrier): Promise<void>;

  // ---- checkpoint records
  getCheckpoint(n: number): Promise<CheckpointRecord | undefined>;
  /** Every checkpoint record, oldest first. */
  listCheckpoints(): Promise<CheckpointRecord[]>;
  /** The instances n expects (undefined for records written before identities were kept). */
  membersOf(n: number): Promise<readonly string[] | undefined>;
  /** The instances that acked n, sorted. */
  acksOf(n: number): Promise<readonly string[]>;
  /** Creates n's IN_FLIGHT record; never overwrites another record (true for its own, same startedAt). */
  createCheckpoint(c: NewCheckpoint): Promise<boolean>;
  /**
   * Sets n's topology and expected members to the shards an injection lists (and counts a new
   * `listing` version), unless n is `injected` already (a no-op then). Returns n's topology and
   * listing version as they stand afterwards; undefined when n has no record.
   */
  fixInjection(n: number, listed: { readonly members: readonly string[]; readonly topology: readonly number[] }): Promise<{ readonly topology: readonly number[]; readonly listing: number } | undefined>;
  /** Marks n `injected` (its barriers may be out from now on) while its listing is still `listing`; false otherwise. */
  markInjected(n: number, listing: number): Promise<boolean>;
  /** Creates an ABORTED record for n unless n has one. */
  createAbortedCheckpoint(c: Omit<NewCheckpoint, 'savepoint' | 'savepointId' | 'reshard'> & { readonly reason: string }): Promise<void>;
  /** Ends n if it is IN_FLIGHT (a no-op otherwise) and forgets its task token. */
  finishCheckpoint(n: number, end: CheckpointEnd): Promise<void>;
  /**
   * Records that n, still IN_FLIGHT, was seen with `acks` acks at `at` (the progress window restarts
   * there), unless a look already recorded as many: concurrent looks keep the first time.
   */
  noteProgress(n: number, acks: number, at: string): Promise<void>;
  /** Stores the workflow's task token on n; true when n's ack set is complete. */
  setTaskToken(n: number, taskToken: string): Promise<boolean>;
  /** Records what each instance flushed for n. */
  recordInstances(n: number, instances: Readonly<Record<string, InstanceCheckpointStats>>, bytes: number, keys: number): Promise<void>;
  deleteCheckpoint(n: number): Promise<void>;

  // ---- savepoints
  getSavepoint(id: string): Promise<SavepointRecord | undefined>;
  listSavepoints(): Promise<SavepointRecord[]>;
  /** Creates the savepoint's record unless one with its id exists. */
  createSavepoint(record: SavepointRecord): Promise<boolean>;
  /** Sets fields of a savepoint record; with `unless`, not when its status is that one. */
  updateSavepoint(id: string, fields: Partial<Omit<SavepointRecord, 'id'>>, options?: { readonly unless?: SavepointStatus }): Promise<void>;
  /** Deletes the savepoint's record while it is still REQUESTED. */
  dropRequestedSavepoint(id: string): Promise<void>;
  /** The request the next allocate takes (one at a time). */
  getSavepointRequest(): Promise<{ readonly id: string; readonly stop: boolean } | undefined>;
  /** Writes the request unless another id's request waits. */
  putSavepointRequest(request: { readonly id: string; readonly stop: boolean; readonly requestedAt: string }): Promise<boolean>;
  /** Deletes the request if it is `id`'s. */
  deleteSavepointRequest(id: string): Promise<void>;

  // ---- an in-place rescale (rescale.ts)
  getRescale(): Promise<RescaleRecord | undefined>;
  /** Writes the request unless a rescale is in progress (one not `done`). */
  createRescale(record: RescaleRecord): Promise<boolean>;
  updateRescale(fields: Partial<RescaleRecord>): Promise<void>;
  clearRescale(): Promise<void>;

  // ---- the instances' side, read (and deltas deleted) by commit, GC and the stall verdict
  snapshotPointer(instanceId: string): Promise<SnapshotPointer | undefined>;
  snapshotPointers(instanceIds: readonly string[]): Promise<Map<string, SnapshotPointer>>;
  /** Checkpoint ids of the deltas stored inline for the instance. */
  inlineDeltas(instanceId: string): Promise<number[]>;
  deleteInlineDelta(instanceId: string, checkpointId: number): Promise<void>;

  // ---- the loop (loop.ts, wake.ts)
  /** Parks the `Allocate` task token while the job is quiet. */
  parkIdle(taskToken: string, since: string): Promise<void>;
  idleToken(): Promise<string | undefined>;
  /** Deletes the parked token if it is still `taskToken`; true for the one call that did. */
  takeIdle(taskToken: string): Promise<boolean>;
  /** Leaves the parked token on each instance's lease item (one that exists): its next position write returns it. */
  markParked(instanceIds: readonly string[], taskToken: string): Promise<void>;
  /** Removes the token from the instance's lease item if it is still `taskToken` (a later park's stays). */
  clearParked(instanceId: string, taskToken: string): Promise<void>;
  loopState(): Promise<LoopState>;
  markCommitting(n: number, at: string): Promise<void>;
  /** Clears the commit marker if it is still n's. */
  clearCommitting(n: number): Promise<void>;
  /** Records an operator's stop (`at`) or lifts it (undefined). */
  setOperatorStop(at: string | undefined): Promise<void>;
}

export interface LoopState {
  readonly committing?: number;
  readonly committingAt?: string;
  readonly stopped?: string;
}

/** Puts one control record (barrier, tick) at the start of a shard's hash range. */
export interface SourceInjector {
  putControl(stream: string, shard: ShardInfo, data: Uint8Array): Promise<void>;
}

/** Reading a source shard past a position (does input wait after the last checkpoint?). */
export interface ShardPeek {
  /** Pages of record payloads after the sequence number; `caughtUp` on the page that reaches the shard's tip. Ends with the shard. */
  pagesAfter(stream: string, shardId: string, sequenceNumber: string): AsyncIterable<{ readonly records: readonly Uint8Array[]; readonly caughtUp: boolean }>;
}

/** A Kinesis stream's capacity mode: an on-demand stream reshards itself and cannot be rescaled in place. */
export type StreamCapacityMode = 'PROVISIONED' | 'ON_DEMAND';

export interface StreamSummary {
  readonly status: string;
  readonly open: number;
  readonly mode: StreamCapacityMode;
}

/** Resharding a stream (an in-place rescale). */
export interface StreamScaler {
  describe(stream: string): Promise<StreamSummary>;
  updateShardCount(stream: string, target: number): Promise<void>;
}

/** Deltas too large for the control table, as objects. */
export interface DeltaObjects {
  /**
   * Each of `instanceIds`' delta objects (instance → checkpoint id → object key), from one listing
   * of the job's whole delta prefix (its pages), not one per instance: a key that is not one of
   * these instances' deltas is left out.
   */
  listByInstance(instanceIds: readonly string[]): Promise<Map<string, Map<number, string>>>;
  delete(key: string): Promise<void>;
}

/** Writes a savepoint's portable files from completed checkpoint n. */
export interface SavepointWriter {
  /** Throws SAVEPOINT_INCONSISTENT when state moved past n. */
  write(id: string, n: number, pointers: ReadonlyMap<string, SnapshotPointer>, at: Date): Promise<{ readonly rows: number; readonly timers: number; readonly bytes: number; readonly location: string }>;
}

/** The workflow (Step Functions): task tokens and executions. Errors come through as thrown. */
export interface Workflow {
  succeed(taskToken: string, output: unknown): Promise<void>;
  fail(taskToken: string, error: string, cause: string): Promise<void>;
  heartbeat(taskToken: string): Promise<void>;
  /** Whether an execution of the state machine is running. */
  running(stateMachineArn: string): Promise<boolean>;
  /** Starts an execution; its ARN. */
  start(stateMachineArn: string, name: string, input: unknown): Promise<string>;
}

/** Everything the Coordinator runs on. */
export interface CoordinatorPorts {
  readonly store: CheckpointStore;
  readonly shards: ShardDirectory;
  readonly injector: SourceInjector;
  /** answers the AwaitAcks token when every ack is in already */
  readonly notifier: TaskNotifier;
  readonly scaler: StreamScaler;
  readonly deltas: DeltaObjects;
  readonly savepoints: SavepointWriter;
}
