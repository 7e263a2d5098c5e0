/**
 * The ports the runtime needs from the outside world. The AWS adapters implement them with the SDK
 * v3 clients; in-memory twins implement them for fast unit tests of the pure core. Only adapters
 * import `@aws-sdk`.
 */
import type { SourceControl } from '../codec/envelope.js';

/** Where replay of an instance's input shard starts. */
export type ReplayPoint =
  /** the shard's oldest record (no snapshot yet) */
  | { readonly from: 'start' }
  /** at this sequence number, inclusive */
  | { readonly from: 'at'; readonly sequenceNumber: string }
  /** just after this sequence number */
  | { readonly from: 'after'; readonly sequenceNumber: string };

/** The pointer to an instance's latest durable snapshot, kept in its lease row. */
export interface SnapshotPointer {
  readonly checkpointId: number;
  readonly replayPoint: ReplayPoint;
  /** where the snapshot's delta lives */
  readonly delta: DeltaRef;
  /** small instance metadata restored with the snapshot (watermarks, timers, operator state) */
  readonly meta: Record<string, unknown>;
}

export type DeltaRef = { readonly store: 'inline'; readonly key: string } | { readonly store: 's3'; readonly key: string };

export interface Lease {
  readonly fence: number;
  /** last input position processed by the owner, as committed at the end of its last batch */
  readonly lastPosition: string | undefined;
  /**
   * the first input position the instance ever processed (set once): a replay with no snapshot
   * starts there, so that records trimmed since are noticed (REPLAY_TRIMMED), never skipped
   */
  readonly firstPosition?: string;
  readonly snapshot: SnapshotPointer | undefined;
  /** the task token of a coordinator parked while the job was quiet, left on a source instance's lease (coordinator/wake.ts) */
  readonly parked?: string;
}

/** Leases, snapshot pointers and deltas of instances; checkpoint acks. */
export interface ControlStore {
  readLease(instanceId: string): Promise<Lease>;
  /**
   * Bumps the fence if it is still `expectedFence` (FencedError otherwise) and returns the lease as
   * it is *after* the bump: its snapshot pointer is the one to restore, since from then on nobody
   * else can publish one (a pointer read before the takeover may already be stale).
   */
  takeOver(instanceId: string, expectedFence: number): Promise<Lease>;
  /** stores the delta durably and returns where */
  writeDelta(instanceId: string, checkpointId: number, delta: Uint8Array): Promise<DeltaRef>;
  readDelta(ref: DeltaRef): Promise<Uint8Array>;
  /** makes a snapshot the instance's current one, if `fence` still holds the lease (FencedError otherwise) */
  publishSnapshot(instanceId: string, fence: number, pointer: SnapshotPointer): Promise<void>;
  /**
   * records the last processed position, if `fence` still holds the lease (FencedError otherwise);
   * returns the parked coordinator's token the lease carries, if any (`Lease.parked`), from the same write
   */
  commitPosition(instanceId: string, fence: number, lastPosition: string, firstPosition?: string): Promise<string | undefined>;
  /** adds the instance to checkpoint n's ack set; `completedBy` is true when the set is now complete (so the caller wakes the coordinator) */
  ack(checkpointId: number, instanceId: string): Promise<{ readonly completedBy: boolean; readonly taskToken?: string }>;
}

/** One state row: all named states of one key of one operator, as of a checkpoint. */
export interface StateRow {
  readonly operatorId: string;
  readonly keyGroup: number;
  readonly key: string;
  /** state name → serialized value; absent = cleared */
  readonly values: Record<string, Uint8Array>;
  /** on reads: the newest checkpoint that wrote the row's item (keys are packed per key group: see runtime/packed-state.ts) */
  readonly checkpointId?: number;
}

export interface StateRowId {
  readonly operatorId: string;
  readonly keyGroup: number;
  readonly key: string;
}

export interface StateStore {
  /** rows that exist for these ids (missing ids have no state) */
  getRows(ids: readonly StateRowId[]): Promise<StateRow[]>;
  /** writes the rows of checkpoint n; a row already written by a later checkpoint is left alone */
  applyRows(checkpointId: number, fence: number, rows: readonly StateRow[]): Promise<void>;
  /** every row of one key group of one operator (savepoints); stores that cannot list a group leave it out */
  readGroup?(operatorId: string, keyGroup: number): Promise<StateRow[]>;
}

export interface ShardInfo {
  readonly shardId: string;
  readonly startingHashKey: string;
  readonly endingHashKey: string;
  readonly parentShardId?: string;
  readonly adjacentParentShardId?: string;
  /** set once the shard is closed (after resharding) */
  readonly endingSequenceNumber?: string;
}

/** Shards of a stream, as ListShards reports them. */
export interface ShardDirectory {
  openShards(stream: string): Promise<readonly ShardInfo[]>;
  /** every shard still listed, closed ones included (a child instance finds its parents here) */
  allShards(stream: string): Promise<readonly ShardInfo[]>;
}

export interface OutgoingRecord {
  /** an ExplicitHashKey inside the destination shard's range */
  readonly hashKey: string;
  readonly data: Uint8Array;
}

/** Writes records to a stream; resolves only when every record was accepted (retrying partial failures). */
export interface StreamWriter {
  putAll(stream: string, records: readonly OutgoingRecord[]): Promise<void>;
}

export interface StoredRecord {
  readonly sequenceNumber: string;
  readonly data: Uint8Array;
  readonly partitionKey: string;
  readonly approximateArrivalTimestamp?: number;
}

/** Reads a shard from a replay point up to (not including) a sequence number. */
export interface ShardReader {
  read(stream: string, shardId: string, from: ReplayPoint, untilExclusive: string | undefined): AsyncIterable<StoredRecord[]>;
}

export interface DeadLetter {
  readonly job: string;
  readonly stage: string;
  readonly shardId: string;
  readonly sequenceNumber: string;
  /** index inside an aggregated record or packet */
  readonly subSequence: number;
  readonly reason: string;
  /** raw bytes of the offending record (base64 in storage) */
  readonly data: Uint8Array;
}

export interface DeadLetterStore {
  put(letter: DeadLetter): Promise<void>;
}

/** Tells the coordinator's waiting task that a checkpoint's ack set is complete. */
export interface TaskNotifier {
  succeed(taskToken: string, output: unknown): Promise<void>;
}

/** Writes of an upsert sink: version-conditioned by the emitting instance's (epoch, seq). */
export interface UpsertWrite {
  readonly key: string;
  readonly item: Record<string, unknown>;
  readonly producer: string;
  readonly epoch: number;
  readonly seq: number;
  /**
   * > 0 in the epoch a child shard's instance took over from its parents (1 + theirs): within that
   * epoch another producer's write of a lower generation (a parent's late zombie) cannot replace it
   */
  readonly generation?: number;
}

export interface UpsertSinkWriter {
  write(table: string, keyAttribute: string, writes: readonly UpsertWrite[]): Promise<void>;
}

/** Outputs of a transactional sink, staged per epoch and published at commit. */
export interface StagedOutput {
  readonly producer: string;
  readonly epoch: number;
  readonly seq: number;
  readonly value: unknown;
}

export interface CollectSinkStore {
  stage(sink: string, outputs: readonly StagedOutput[]): Promise<void>;
}

/**
 * Where an instance short of memory moves dirty keyed state until its next snapshot. Nothing here is
 * committed: parts are scoped by instance and fence, a snapshot takes them in and drops them, and a
 * new owner never reads an old owner's parts (it replays instead).
 */
export interface SpillStore {
  put(instanceId: string, fence: number, part: string, bytes: Uint8Array): Promise<void>;
  get(instanceId: string, fence: number, part: string): Promise<Uint8Array>;
  /** forgets every part of the instance under this fence */
  drop(instanceId: string, fence: number): Promise<void>;
}

/** Counters and timings the runtime reports (EMF metrics in Lambda, plain counters in tests). */
export interface Telemetry {
  count(name: string, value?: number): void;
  timing(name: string, ms: number): void;
  log(level: 'debug' | 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>): void;
}

/** A barrier as the coordinator opens it to the sources (the payload of a barrier control record). */
export type SourceBarrier = Extract<SourceControl, { readonly kind: 'barrier' }>;

/** A checkpoint the coordinator opened, announced to the source instances it was opened to. */
export interface AnnouncedBarrier {
  readonly barrier: SourceBarrier;
  /** the source instances of the shards open then (a parent shard closed by a reshard takes no part) */
  readonly instances: readonly string[];
}

/** Where a source instance puts its barriers, and how far its batches have read (kept with its lease). */
export interface SourceBarrierRecord {
  /** barrier n goes out right after the record `after` of the shard; positions never decrease with n */
  readonly placed: ReadonlyArray<{ readonly after: string; readonly barrier: SourceBarrier }>;
  /** the last record a batch of any owner may have read (and emitted outputs for) */
  readonly readThrough: string | undefined;
}

/** An instance's placements as read with its lease: whose they are is the lease's fence at the read. */
export interface RecordedBarriers extends SourceBarrierRecord {
  /** the lease's fence when the record was read (the record lives in the lease item) */
  readonly fence: number;
}

/**
 * Barriers at a source's read position (runtime/source-barriers.ts): the coordinator announces the
 * checkpoint it opens; a source instance records, fenced, where it puts each barrier before it
 * forwards it, so that every replay puts it after the same record.
 */
export interface SourceBarrierStore {
  /** the checkpoints announced most recently, oldest first (read with the lease, every batch) */
  announced(): Promise<readonly AnnouncedBarrier[]>;
  /** what the instance's owners recorded, with the lease's fence read with it (read after a takeover) */
  recorded(instanceId: string): Promise<RecordedBarriers>;
  /** replaces the instance's record if `fence` still holds the lease (FencedError otherwise) */
  record(instanceId: string, fence: number, record: SourceBarrierRecord): Promise<void>;
  /**
   * whether checkpoint n's barriers crossed the whole pipeline: every instance it expects acked it
   * (or it was committed); false for an aborted or unknown checkpoint (a source's window, source-window.ts)
   */
  crossed(checkpointId: number): Promise<boolean>;
}

export interface RuntimePorts {
  readonly control: ControlStore;
  readonly state: StateStore;
  readonly shards: ShardDirectory;
  readonly writer: StreamWriter;
  readonly reader: ShardReader;
  readonly deadLetters: DeadLetterStore;
  readonly notifier: TaskNotifier;
  readonly upsertSink: UpsertSinkWriter;
  readonly collectSink: CollectSinkStore;
  readonly telemetry: Telemetry;
  /** absent: dirty state stays in memory until the next snapshot */
  readonly spill?: SpillStore;
  /** absent: a source puts barrier n where the coordinator appended it, at its shard's tail */
  readonly sourceBarriers?: SourceBarrierStore;
}
