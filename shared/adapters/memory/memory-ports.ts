/**
 * In-memory twins of every runtime port, for fast tests of the real engine (StageRunner,
 * StageInstance) without emulators. They follow the AWS adapters in `../aws/*` rule for rule:
 *
 * - `MemoryKinesis` (`memory-kinesis.ts`) is the Kinesis service; the engine's writer is the AWS
 *   writers' own logic (`put-records.ts`) over it, so PutRecords' partial failures are faked, not
 *   retried, here.
 * - The control store keeps leases with a fencing counter (a takeover returns the lease as it is
 *   after the bump; pointer and position writes are fenced), deltas inline up to 8 KB and "in S3"
 *   above, and checkpoint records with an ack *set*; any ack that finds the set complete while the
 *   checkpoint is in flight reports completion.
 * - The state store (`memory-state.ts`) is the DynamoDB store's packed layout (`runtime/packed-state.ts`) over a Map
 *   table with the same conditions: items by (operator#keyGroup, sk), writes conditioned on the
 *   item's version, a write of checkpoint n dropped on an item a later checkpoint wrote; like the
 *   DynamoDB store it does not look at the fence.
 * - The upsert sink (`memory-upsert-sink.ts`) collapses writes of a key to the last and applies each
 *   under the emitting instance's (epoch, seq) version condition.
 *
 * Faults: `MemoryFaults` hooks (`memory-faults.ts`) run inside the twin services (a `before` hook that throws an error
 * named like AWS throttling is retried, as `withThrottleRetry` does; any other error reaches the
 * caller; `after` runs once the call took effect, so throwing there is a lost response).
 * `withHooks` wraps a `RuntimePorts` into the view of one execution environment, whose hooks can
 * crash, delay or block that environment at any port call (zombies, crash points).
 *
 * Besides the ports, the twins keep what tests need to check invariants: the history of every state
 * row write, of every published snapshot pointer, of accepted upserts, and counters of
 * non-deterministic rewrites (same id, other bytes), which must stay 0.
 */
import { CheckpointInFlightError } from '../../coordinator/protocol.js';
import type {
  AnnouncedBarrier,
  CollectSinkStore,
  ControlStore,
  DeadLetter,
  DeadLetterStore,
  DeltaRef,
  Lease,
  OutgoingRecord,
  RuntimePorts,
  SnapshotPointer,
  SourceBarrierRecord,
  StateRow,
  StateRowId,
  TaskNotifier,
  Telemetry,
  UpsertWrite,
} from '../../runtime/ports.js';
import { FencedError } from '../../util/errors.js';
import { CountingTelemetry } from '../telemetry.js';
import { CollectRegistry } from './collect-registry.js';
import { awsError, serviceCall, type MemoryFaults, type OpInfo, type PortHooks, type PortOp } from './memory-faults.js';
import { MemoryKinesis, MemoryShardDirectory, MemoryShardReader, MemoryStreamWriter } from './memory-kinesis.js';
import { MemorySpillStore } from './memory-objects.js';
import { bytesEqual, checkItemSize, MemoryStateStore } from './memory-state.js';
import { MemoryUpsertSink } from './memory-upsert-sink.js';

export * from './memory-faults.js';
export * from './memory-kinesis.js';
export * from './memory-objects.js';
export * from './memory-state.js';
export * from './memory-upsert-sink.js';
export type { PutEntry, PutResult } from '../put-records.js';

// ------------------------------------------------------------------------------------------ control store

/** as the DynamoDB control store: inline up to 8 KB, S3 above (cheaper from there on) */
const INLINE_DELTA_LIMIT = 8 * 1024;
const pad = (n: number) => String(n).padStart(12, '0');

export type CheckpointStatus = 'IN_FLIGHT' | 'COMPLETED' | 'ABORTED';

/** A checkpoint item of the control table (the coordinator's checkpoint store reads and writes it: checkpoint-store.ts). */
export interface MemoryCheckpoint {
  readonly checkpointId: number;
  status: CheckpointStatus;
  readonly savepoint: boolean;
  readonly savepointId?: string;
  expected: number;
  /** the instances expected to ack (as the DynamoDB record's `members`); absent: by count */
  members?: ReadonlySet<string>;
  topology: readonly number[];
  /** barriers may be out: topology and members are fixed */
  injected?: boolean;
  /** how many times an injection set topology and members */
  listing?: number;
  readonly acks: Set<string>;
  readonly startedAt?: string;
  readonly reshard?: readonly number[];
  taskToken?: string;
  reason?: string;
  /** the ack count the coordinator last saw grow, and when */
  progressAcks?: number;
  progressAt?: string;
  endedAt?: string;
  durationMs?: number;
  /** what each instance flushed, as JSON (as the DynamoDB item keeps it) */
  instances?: string;
  bytes?: number;
  keys?: number;
}

/** The coordinator's row of the control table. */
export interface MemoryCoordinatorState {
  last: number;
  /** the checkpoints in flight */
  readonly open: Set<number>;
  stopping?: number;
  stoppedAt?: number;
  finishedAt?: number;
  /** the openNext call that last opened a checkpoint */
  openedBy?: symbol;
}

interface LeaseItem {
  fence?: number;
  lastPosition?: string;
  firstPosition?: string;
  /** the pointer as JSON, as the DynamoDB store keeps it */
  snapshot?: string;
  /** the takeover call that last bumped the fence */
  takenBy?: symbol;
  /** a parked coordinator's task token (coordinator/wake.ts) */
  parked?: string;
}

export interface PublishedSnapshot {
  readonly instanceId: string;
  readonly fence: number;
  readonly pointer: SnapshotPointer;
}

/** Leases, deltas, checkpoint records: the control table (and the delta objects of the bucket). */
export class MemoryControlStore implements ControlStore {
  private readonly leases = new Map<string, LeaseItem>();
  private readonly inlineDeltas = new Map<string, Uint8Array>();
  private readonly s3Deltas = new Map<string, Uint8Array>();
  private readonly checkpoints = new Map<number, MemoryCheckpoint>();
  /** the coordinator row: last allocated checkpoint, the open ones */
  readonly coordinatorState: MemoryCoordinatorState = { last: 0, open: new Set() };
  /** the coordinator's announcement of the checkpoints it opened, oldest first (source-barriers.ts) */
  announcedBarriers: AnnouncedBarrier[] = [];
  /** every pointer ever published, in order */
  readonly published: PublishedSnapshot[] = [];
  /** a delta rewritten with other bytes under the same (instance, checkpoint): must stay 0 */
  deltaConflicts = 0;
  readonly stats = { takeOvers: 0, fenced: 0, acks: 0 };

  constructor(private readonly faults: MemoryFaults = {}) {}

  async readLease(instanceId: string): Promise<Lease> {
    return serviceCall(this.faults, 'control.readLease', { instanceId }, () => {
      const item = this.leases.get(instanceId);
      return {
        fence: item?.fence ?? 0,
        lastPosition: item?.lastPosition,
        ...(item?.firstPosition !== undefined ? { firstPosition: item.firstPosition } : {}),
        snapshot: item?.snapshot ? (JSON.parse(item.snapshot) as SnapshotPointer) : undefined,
        ...(item?.parked !== undefined ? { parked: item.parked } : {}),
      };
    });
  }

  async takeOver(instanceId: string, expectedFence: number): Promise<Lease> {
    const token = Symbol('takeOver');
    return serviceCall(this.faults, 'control.takeOver', { instanceId }, () => {
      const item = this.leases.get(instanceId);
      const ok = expectedFence === 0 ? item?.fence === undefined || item.fence === 0 : item?.fence === expectedFence;
      // a failed condition on this call's own earlier write (its response lost) is a success, as in the adapter
      if (!ok && item?.takenBy !== token) {
        this.stats.fenced++;
        throw new FencedError(`${instanceId}: lease moved past fence ${expectedFence} during takeover`);
      }
      const next = expectedFence + 1;
      const bumped = ok ? { ...item, fence: next, takenBy: token } : item!;
      this.leases.set(instanceId, bumped);
      if (ok) this.stats.takeOvers++;
      return {
        fence: bumped.fence ?? next,
        lastPosition: bumped.lastPosition,
        ...(bumped.firstPosition !== undefined ? { firstPosition: bumped.firstPosition } : {}),
        snapshot: bumped.snapshot ? (JSON.parse(bumped.snapshot) as SnapshotPointer) : undefined,
      };
    });
  }

  async writeDelta(instanceId: string, checkpointId: number, delta: Uint8Array): Promise<DeltaRef> {
    return serviceCall(this.faults, 'control.writeDelta', { instanceId, checkpointId, size: delta.length }, (): DeltaRef => {
      const copy = new Uint8Array(delta);
      const inline = delta.length <= INLINE_DELTA_LIMIT;
      const ref: DeltaRef = inline
        ? { store: 'inline', key: `delta#${instanceId}|${pad(checkpointId)}` }
        : { store: 's3', key: `deltas/${instanceId.replace(':', '/')}/${pad(checkpointId)}.bin` };
      const map = inline ? this.inlineDeltas : this.s3Deltas;
      const prev = map.get(ref.key);
      if (prev && !bytesEqual(prev, copy)) this.deltaConflicts++;
      map.set(ref.key, copy);
      return ref;
    });
  }

  async readDelta(ref: DeltaRef): Promise<Uint8Array> {
    return serviceCall(this.faults, 'control.readDelta', {}, () => {
      const d = (ref.store === 'inline' ? this.inlineDeltas : this.s3Deltas).get(ref.key);
      if (!d) {
        if (ref.store === 'inline') throw new Error(`delta ${ref.key} is missing from the control table`);
        throw awsError('NoSuchKey', `The specified key does not exist: ${ref.key}`);
      }
      return new Uint8Array(d);
    });
  }

  async publishSnapshot(instanceId: string, fence: number, pointer: SnapshotPointer): Promise<void> {
    await serviceCall(this.faults, 'control.publishSnapshot', { instanceId, checkpointId: pointer.checkpointId }, () => {
      const json = JSON.stringify(pointer);
      this.fenced(instanceId, fence, (item) => {
        checkItemSize(`lease#${instanceId}`, { ...item, snapshot: json });
        item.snapshot = json;
      });
      this.published.push({ instanceId, fence, pointer: JSON.parse(json) as SnapshotPointer });
    });
  }

  async commitPosition(instanceId: string, fence: number, lastPosition: string, firstPosition?: string): Promise<string | undefined> {
    return serviceCall(this.faults, 'control.commitPosition', { instanceId }, () => {
      this.fenced(instanceId, fence, (item) => {
        item.lastPosition = lastPosition;
        item.firstPosition ??= firstPosition;
      });
      return this.leases.get(instanceId)!.parked;
    });
  }

  /** The park mark on an existing lease item (MemoryCheckpointStore.markParked). */
  setParked(instanceId: string, taskToken: string): void {
    const item = this.leases.get(instanceId);
    if (item) this.leases.set(instanceId, { ...item, parked: taskToken });
  }

  /** Removes the park mark if it is still `taskToken` (MemoryCheckpointStore.clearParked). */
  clearParked(instanceId: string, taskToken: string): void {
    const item = this.leases.get(instanceId);
    if (item?.parked === taskToken) this.leases.set(instanceId, { ...item, parked: undefined });
  }

  private fenced(instanceId: string, fence: number, update: (item: LeaseItem) => void): void {
    const item = this.leases.get(instanceId);
    if (!item || item.fence !== fence) {
      this.stats.fenced++;
      throw new FencedError(`${instanceId}: fence ${fence} no longer holds the lease`);
    }
    const next = { ...item };
    update(next);
    this.leases.set(instanceId, next);
  }

  async ack(checkpointId: number, instanceId: string): Promise<{ completedBy: boolean; taskToken?: string }> {
    return serviceCall(this.faults, 'control.ack', { instanceId, checkpointId }, () => {
      this.stats.acks++;
      const ck = this.checkpoints.get(checkpointId);
      if (!ck) return { completedBy: false }; // nobody waits for this ack
      ck.acks.add(instanceId);
      // as the DynamoDB store: any ack that finds the set complete wakes the coordinator
      const completedBy = ck.status === 'IN_FLIGHT' && ackSetComplete(ck);
      return { completedBy, ...(ck.taskToken ? { taskToken: ck.taskToken } : {}) };
    });
  }

  // ---- inspection and the coordinator's side of the table (not part of the port)

  /** The raw lease row (undefined fields when the instance never ran). */
  lease(instanceId: string): { fence: number | undefined; lastPosition: string | undefined; snapshot: SnapshotPointer | undefined } {
    const item = this.leases.get(instanceId);
    return {
      fence: item?.fence,
      lastPosition: item?.lastPosition,
      snapshot: item?.snapshot ? (JSON.parse(item.snapshot) as SnapshotPointer) : undefined,
    };
  }

  leaseIds(): string[] {
    return [...this.leases.keys()].sort();
  }

  /** Every stored delta by key (inline keys and S3 keys), copies. */
  deltas(): Map<string, Uint8Array> {
    const out = new Map<string, Uint8Array>();
    for (const [k, v] of this.inlineDeltas) out.set(k, new Uint8Array(v));
    for (const [k, v] of this.s3Deltas) out.set(k, new Uint8Array(v));
    return out;
  }

  checkpoint(n: number): MemoryCheckpoint | undefined {
    return this.checkpoints.get(n);
  }

  allCheckpoints(): MemoryCheckpoint[] {
    return [...this.checkpoints.values()].sort((a, b) => a.checkpointId - b.checkpointId);
  }

  putCheckpoint(ck: MemoryCheckpoint): void {
    this.checkpoints.set(ck.checkpointId, ck);
  }

  deleteCheckpoint(n: number): void {
    this.checkpoints.delete(n);
  }

  /** Keys of every stored delta (inline keys and object keys). */
  deltaKeys(): string[] {
    return [...this.inlineDeltas.keys(), ...this.s3Deltas.keys()];
  }

  /** Stores an object under the bucket's delta prefix as is (tests: keys no instance wrote). */
  putDeltaObject(key: string, bytes: Uint8Array): void {
    this.s3Deltas.set(key, new Uint8Array(bytes));
  }

  deleteDelta(key: string): void {
    this.inlineDeltas.delete(key);
    this.s3Deltas.delete(key);
  }

  /**
   * A fixture for tests that drive instances without a coordinator: writes checkpoint n's record
   * and opens it, as an allocate would (one open at a time).
   */
  allocateCheckpoint(topology: readonly number[], savepoint = false, members?: readonly string[]): number {
    const [open] = this.coordinatorState.open;
    if (open !== undefined) throw new CheckpointInFlightError(open);
    const n = this.coordinatorState.last + 1;
    this.coordinatorState.last = n;
    this.coordinatorState.open.add(n);
    this.checkpoints.set(n, {
      checkpointId: n,
      status: 'IN_FLIGHT',
      savepoint,
      expected: members?.length ?? topology.reduce((a, b) => a + b, 0),
      ...(members ? { members: new Set(members) } : {}),
      topology: [...topology],
      acks: new Set(),
    });
    return n;
  }

  /** Stores the task token on n's record; true when every ack is already in. */
  setTaskToken(n: number, taskToken: string): boolean {
    let ck = this.checkpoints.get(n);
    // as an UpdateItem, on a missing record too
    if (!ck) this.checkpoints.set(n, (ck = { checkpointId: n, status: undefined as unknown as CheckpointStatus, savepoint: false, expected: 0, topology: [], acks: new Set() }));
    ck.taskToken = taskToken;
    return ackSetComplete(ck);
  }

  /** A fixture (see allocateCheckpoint): ends an in-flight checkpoint and closes it. */
  finishCheckpoint(n: number, status: 'COMPLETED' | 'ABORTED', reason?: string): void {
    const ck = this.checkpoints.get(n);
    if (ck?.status === 'IN_FLIGHT') {
      ck.status = status;
      delete ck.taskToken;
      if (reason !== undefined) ck.reason = reason;
    }
    this.coordinatorState.open.delete(n);
  }
}

/** As the DynamoDB store's: complete by the identities expected (by count without them). */
export function ackSetComplete(ck: MemoryCheckpoint): boolean {
  return ck.members ? [...ck.members].every((m) => ck.acks.has(m)) : ck.acks.size >= ck.expected;
}

// ------------------------------------------------------------------------------------------ sinks, dead letters, notifier

/** Same key layout as S3DeadLetterStore, so a replay that rejects a record again overwrites it. */
export const memoryDeadLetterKey = (d: Pick<DeadLetter, 'job' | 'stage' | 'shardId' | 'sequenceNumber' | 'subSequence'>) =>
  `dead-letters/${d.job}/${d.stage}/${d.shardId}/${d.sequenceNumber}-${d.subSequence}.json`;

export class MemoryDeadLetterStore implements DeadLetterStore {
  readonly letters = new Map<string, DeadLetter>();
  puts = 0;

  constructor(private readonly faults: MemoryFaults = {}) {}

  async put(letter: DeadLetter): Promise<void> {
    await serviceCall(this.faults, 'deadLetters.put', {}, () => {
      this.puts++;
      this.letters.set(memoryDeadLetterKey(letter), { ...letter, data: new Uint8Array(letter.data) });
    });
  }
}

export class MemoryTaskNotifier implements TaskNotifier {
  /** tokens answered, in order, with their output */
  readonly succeeded: Array<{ taskToken: string; output: unknown }> = [];
  /** calls for a token already answered (SFN says InvalidToken/TaskTimedOut; the adapter ignores it) */
  stale = 0;
  private readonly answered = new Set<string>();

  constructor(
    private readonly faults: MemoryFaults = {},
    /** called once per token when it is first answered */
    public onSucceed?: (taskToken: string, output: unknown) => void,
  ) {}

  async succeed(taskToken: string, output: unknown): Promise<void> {
    await serviceCall(this.faults, 'notifier.succeed', {}, () => {
      if (this.answered.has(taskToken)) {
        this.stale++;
        return;
      }
      this.answered.add(taskToken);
      const out = JSON.parse(JSON.stringify(output)) as unknown;
      this.succeeded.push({ taskToken, output: out });
      this.onSucceed?.(taskToken, out);
    });
  }

  wasAnswered(taskToken: string): boolean {
    return this.answered.has(taskToken);
  }
}

// ------------------------------------------------------------------------------------------ per-environment view

/**
 * The ports as one execution environment sees them: every call first runs `hooks.before` (throw to
 * crash the environment at that point, await to block it) and, once the call returned, `hooks.after`
 * (throw for a crash after the effect). Errors are not retried: they reach the engine.
 */
export function withHooks(ports: RuntimePorts, hooks: PortHooks): RuntimePorts {
  const wrap =
    <A extends unknown[], R>(op: PortOp, fn: (...args: A) => Promise<R>, info: (...args: A) => OpInfo) =>
    async (...args: A): Promise<R> => {
      const i = info(...args);
      await hooks.before?.(op, i);
      const r = await fn(...args);
      await hooks.after?.(op, i);
      return r;
    };
  const { control, state, shards, writer, reader, deadLetters, notifier, upsertSink, collectSink, sourceBarriers } = ports;
  return {
    control: {
      readLease: wrap('control.readLease', (id: string) => control.readLease(id), (instanceId) => ({ instanceId })),
      takeOver: wrap('control.takeOver', (id: string, f: number) => control.takeOver(id, f), (instanceId) => ({ instanceId })),
      writeDelta: wrap('control.writeDelta', (id: string, n: number, d: Uint8Array) => control.writeDelta(id, n, d), (instanceId, checkpointId, d) => ({ instanceId, checkpointId, size: d.length })),
      readDelta: wrap('control.readDelta', (ref: DeltaRef) => control.readDelta(ref), () => ({})),
      publishSnapshot: wrap('control.publishSnapshot', (id: string, f: number, p: SnapshotPointer) => control.publishSnapshot(id, f, p), (instanceId, _f, p) => ({ instanceId, checkpointId: p.checkpointId })),
      commitPosition: wrap('control.commitPosition', (id: string, f: number, p: string, first?: string) => control.commitPosition(id, f, p, first), (instanceId) => ({ instanceId })),
      ack: wrap('control.ack', (n: number, id: string) => control.ack(n, id), (checkpointId, instanceId) => ({ instanceId, checkpointId })),
    },
    state: {
      getRows: wrap('state.getRows', (ids: readonly StateRowId[]) => state.getRows(ids), (ids) => ({ size: ids.length })),
      applyRows: wrap('state.applyRows', (n: number, f: number, rows: readonly StateRow[]) => state.applyRows(n, f, rows), (checkpointId, _f, rows) => ({ checkpointId, size: rows.length })),
    },
    shards: {
      openShards: wrap('shards.openShards', (s: string) => shards.openShards(s), (stream) => ({ stream })),
      allShards: wrap('shards.openShards', (s: string) => shards.allShards(s), (stream) => ({ stream })),
    },
    writer: { putAll: wrap('writer.putAll', (s: string, r: readonly OutgoingRecord[]) => writer.putAll(s, r), (stream, r) => ({ stream, size: r.length })) },
    reader: {
      read(stream, shardId, from, until) {
        const inner = reader.read(stream, shardId, from, until);
        return (async function* () {
          await hooks.before?.('reader.read', { stream, shardId });
          yield* inner;
          await hooks.after?.('reader.read', { stream, shardId });
        })();
      },
    },
    deadLetters: { put: wrap('deadLetters.put', (d: DeadLetter) => deadLetters.put(d), (d) => ({ shardId: d.shardId })) },
    notifier: { succeed: wrap('notifier.succeed', (t: string, o: unknown) => notifier.succeed(t, o), () => ({})) },
    upsertSink: { write: wrap('upsertSink.write', (t: string, k: string, w: readonly UpsertWrite[]) => upsertSink.write(t, k, w), (_t, _k, w) => ({ size: w.length })) },
    collectSink: { stage: wrap('collectSink.stage', (s: string, o: Parameters<CollectSinkStore['stage']>[1]) => collectSink.stage(s, o), (_s, o) => ({ size: o.length })) },
    telemetry: ports.telemetry,
    ...(ports.spill ? { spill: ports.spill } : {}),
    ...(sourceBarriers
      ? {
          sourceBarriers: {
            announced: wrap('sourceBarriers.announced', () => sourceBarriers.announced(), () => ({})),
            recorded: wrap('sourceBarriers.recorded', (id: string) => sourceBarriers.recorded(id), (instanceId) => ({ instanceId })),
            record: wrap('sourceBarriers.record', (id: string, f: number, r: SourceBarrierRecord) => sourceBarriers.record(id, f, r), (instanceId) => ({ instanceId })),
            crossed: wrap('sourceBarriers.crossed', (n: number) => sourceBarriers.crossed(n), (checkpointId) => ({ checkpointId })),
          },
        }
      : {}),
  };
}

// ------------------------------------------------------------------------------------------ assembly

export interface MemoryPortsOptions {
  /** seeds the twins' own choices (sequence number gaps); @default 1 */
  readonly seed?: number;
  /** fault hooks inside the twin services; the object is kept, so tests can change hooks later */
  readonly faults?: MemoryFaults;
  /** records per replay page; @default 1000 (as the AWS reader) */
  readonly pageSize?: number;
  readonly telemetry?: Telemetry;
  readonly collect?: CollectRegistry;
  readonly now?: () => number;
}

export interface MemoryPorts {
  readonly ports: RuntimePorts;
  readonly kinesis: MemoryKinesis;
  readonly control: MemoryControlStore;
  readonly state: MemoryStateStore;
  readonly shards: MemoryShardDirectory;
  readonly writer: MemoryStreamWriter;
  readonly reader: MemoryShardReader;
  readonly deadLetters: MemoryDeadLetterStore;
  readonly notifier: MemoryTaskNotifier;
  readonly upsertSink: MemoryUpsertSink;
  readonly collect: CollectRegistry;
  readonly telemetry: Telemetry;
  /** the live fault hooks (mutate to inject faults) */
  readonly faults: MemoryFaults;
}

export function createMemoryPorts(opts: MemoryPortsOptions = {}): MemoryPorts {
  const faults: MemoryFaults = opts.faults ?? {};
  const telemetry = opts.telemetry ?? new CountingTelemetry();
  const kinesis = new MemoryKinesis({ faults, seed: opts.seed ?? 1, ...(opts.now ? { now: opts.now } : {}) });
  const control = new MemoryControlStore(faults);
  const state = new MemoryStateStore(faults);
  const shards = new MemoryShardDirectory(kinesis);
  const writer = new MemoryStreamWriter(kinesis, telemetry);
  const reader = new MemoryShardReader(kinesis, opts.pageSize ?? 1000);
  const deadLetters = new MemoryDeadLetterStore(faults);
  const notifier = new MemoryTaskNotifier(faults);
  const upsertSink = new MemoryUpsertSink(faults);
  const collect = opts.collect ?? new CollectRegistry();
  const collectSink: CollectSinkStore = {
    stage: (sink, outputs) => serviceCall(faults, 'collectSink.stage', { size: outputs.length }, () => collect.stage(sink, outputs)),
  };
  const ports: RuntimePorts = { control, state, shards, writer, reader, deadLetters, notifier, upsertSink, collectSink, telemetry, spill: new MemorySpillStore() };
  return { ports, kinesis, control, state, shards, writer, reader, deadLetters, notifier, upsertSink, collect, telemetry, faults };
}
