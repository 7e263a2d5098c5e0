/**
 * The coordinator's ports on the in-memory twins, so that the one Coordinator class runs in a
 * process: the checkpoint store (the control table's coordinator items, with DynamoDB's
 * conditional-write answers; checkpoint records and leases shared with MemoryControlStore), barriers
 * through the Kinesis twin, resharding, delta objects and savepoint files as objects in memory.
 * They fake the services; the coordinator's logic stays in shared/coordinator/. The contract suite
 * (shared/adapters/checkpoint-store.contract.test.ts) runs the same tests here and against DynamoDB.
 */
import { Coordinator, type CoordinatorOptions } from '../../coordinator/coordinator.js';
import type { LoopPorts } from '../../coordinator/loop.js';
import {
  ANNOUNCED_KEPT,
  type CheckpointEnd,
  type CheckpointStore,
  type CoordinatorPorts,
  type CoordinatorState,
  type DeltaObjects,
  type LoopState,
  type NewCheckpoint,
  type SavepointWriter,
  type ShardPeek,
  type SourceInjector,
  type StreamScaler,
  type StreamSummary,
  type Workflow,
} from '../../coordinator/ports.js';
import type { CommitTarget } from '../../coordinator/protocol.js';
import type { CheckpointRecord, InstanceCheckpointStats, RescaleRecord, SavepointRecord, SavepointStatus } from '../../coordinator/records.js';
import type { Plan } from '../../plan/plan.js';
import type { ResourceNames } from '../../plan/resources.js';
import { savepointPrefix, writeSavepointFiles } from '../../codec/savepoint.js';
import type { AnnouncedBarrier, ShardInfo, SnapshotPointer, StateRow } from '../../runtime/ports.js';
import { compareSeq } from '../../runtime/positions.js';
import { groupDeltaKeys } from '../delta-keys.js';
import { putRecordsUntilAccepted } from '../put-records.js';
import { serviceCall, type MemoryFaults } from './memory-faults.js';
import { memoryKinesisApi, memoryRetry } from './memory-kinesis.js';
import { ackSetComplete, type MemoryCheckpoint, type MemoryControlStore, type MemoryKinesis, type MemoryPorts, type MemoryTaskNotifier } from './memory-ports.js';

const pad = (n: number) => String(n).padStart(12, '0');
const inlineDeltaKey = (instanceId: string, n: number) => `delta#${instanceId}|${pad(n)}`;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export class MemoryCheckpointStore implements CheckpointStore {
  private readonly savepoints = new Map<string, Mutable<SavepointRecord>>();
  private savepointRequest: { id: string; stop: boolean; requestedAt: string } | undefined;
  private rescale: Mutable<RescaleRecord> | undefined;
  /** the createRescale call that wrote `rescale` */
  private rescaleBy: symbol | undefined;
  private idle: { token: string; since: string; takenBy?: symbol } | undefined;
  private loop: Mutable<LoopState> = {};

  constructor(
    private readonly control: MemoryControlStore,
    private readonly faults: MemoryFaults = {},
  ) {}

  private get state() {
    return this.control.coordinatorState;
  }

  async readState(): Promise<CoordinatorState> {
    const s = this.state;
    return {
      last: s.last,
      open: [...s.open].sort((a, b) => a - b),
      ...(s.stopping !== undefined ? { stopping: s.stopping } : {}),
      ...(s.stoppedAt !== undefined ? { stoppedAt: s.stoppedAt } : {}),
      ...(s.finishedAt !== undefined ? { finishedAt: s.finishedAt } : {}),
    };
  }

  async announceBarrier(announced: AnnouncedBarrier): Promise<void> {
    const n = announced.barrier.checkpointId;
    const list = [...this.control.announcedBarriers.filter((a) => a.barrier.checkpointId !== n), JSON.parse(JSON.stringify(announced)) as AnnouncedBarrier];
    this.control.announcedBarriers = list.sort((a, b) => a.barrier.checkpointId - b.barrier.checkpointId).slice(-ANNOUNCED_KEPT);
  }

  async openNext(n: number, previous: number, maxOpen: number, stop: boolean): Promise<boolean> {
    const token = Symbol('openNext');
    return serviceCall(this.faults, 'checkpoints.openNext', { checkpointId: n }, () => {
      const s = this.state;
      // a failed condition on this call's own earlier write (its response lost) is a success, as in the adapter
      if (s.last !== previous || s.open.size >= maxOpen || s.stoppedAt !== undefined || s.stopping !== undefined) return s.openedBy === token;
      s.last = n;
      s.open.add(n);
      s.openedBy = token;
      if (stop) s.stopping = n;
      return true;
    });
  }

  async closeOpen(n: number): Promise<void> {
    this.state.open.delete(n);
  }

  async liftStop(n: number): Promise<void> {
    if (this.state.stopping === n) delete this.state.stopping;
  }

  async markFinished(n: number): Promise<void> {
    this.state.finishedAt = n;
    this.state.stoppedAt ??= n;
  }

  async markStopped(n: number): Promise<void> {
    this.state.stoppedAt = n;
  }

  async getCheckpoint(n: number): Promise<CheckpointRecord | undefined> {
    const ck = this.control.checkpoint(n);
    return ck ? toRecord(ck) : undefined;
  }

  async listCheckpoints(): Promise<CheckpointRecord[]> {
    return this.control.allCheckpoints().map(toRecord);
  }

  async membersOf(n: number): Promise<readonly string[] | undefined> {
    const m = this.control.checkpoint(n)?.members;
    return m ? [...m] : undefined;
  }

  async acksOf(n: number): Promise<readonly string[]> {
    return [...(this.control.checkpoint(n)?.acks ?? [])].sort();
  }

  async createCheckpoint(c: NewCheckpoint): Promise<boolean> {
    const ck = this.control.checkpoint(c.checkpointId);
    // never over another record; a retry finds its own (same startedAt)
    if (ck) return ck.status === 'IN_FLIGHT' && ck.startedAt === c.startedAt;
    this.control.putCheckpoint({
      checkpointId: c.checkpointId,
      status: 'IN_FLIGHT',
      savepoint: c.savepoint,
      ...(c.savepointId !== undefined ? { savepointId: c.savepointId } : {}),
      expected: c.members.length,
      members: new Set(c.members),
      topology: [...c.topology],
      acks: new Set(),
      startedAt: c.startedAt,
      ...(c.reshard?.length ? { reshard: [...c.reshard] } : {}),
    });
    return true;
  }

  async fixInjection(n: number, listed: { readonly members: readonly string[]; readonly topology: readonly number[] }): Promise<{ readonly topology: readonly number[]; readonly listing: number } | undefined> {
    const ck = this.control.checkpoint(n);
    if (!ck) return undefined;
    if (!ck.injected) {
      ck.listing = (ck.listing ?? 0) + 1;
      ck.members = new Set(listed.members);
      ck.expected = listed.members.length;
      ck.topology = [...listed.topology];
    }
    return { topology: [...ck.topology], listing: ck.listing ?? 0 };
  }

  async markInjected(n: number, listing: number): Promise<boolean> {
    const ck = this.control.checkpoint(n);
    if (!ck || (ck.listing ?? 0) !== listing) return false;
    ck.injected = true;
    return true;
  }

  async createAbortedCheckpoint(c: Omit<NewCheckpoint, 'savepoint' | 'savepointId' | 'reshard'> & { readonly reason: string }): Promise<void> {
    if (this.control.checkpoint(c.checkpointId)) return;
    this.control.putCheckpoint({
      checkpointId: c.checkpointId,
      status: 'ABORTED',
      savepoint: false,
      expected: c.members.length,
      members: new Set(c.members),
      topology: [...c.topology],
      acks: new Set(),
      startedAt: c.startedAt,
      endedAt: c.startedAt,
      durationMs: 0,
      reason: c.reason,
    });
  }

  async finishCheckpoint(n: number, end: CheckpointEnd): Promise<void> {
    const ck = this.control.checkpoint(n);
    if (ck?.status !== 'IN_FLIGHT') return;
    ck.status = end.status;
    ck.endedAt = end.endedAt;
    ck.durationMs = end.durationMs;
    if (end.reason) ck.reason = end.reason;
    delete ck.taskToken;
  }

  async noteProgress(n: number, acks: number, at: string): Promise<void> {
    const ck = this.control.checkpoint(n);
    if (ck?.status !== 'IN_FLIGHT' || (ck.progressAcks ?? -1) >= acks) return;
    ck.progressAcks = acks;
    ck.progressAt = at;
  }

  async setTaskToken(n: number, taskToken: string): Promise<boolean> {
    return this.control.setTaskToken(n, taskToken);
  }

  async recordInstances(n: number, instances: Readonly<Record<string, InstanceCheckpointStats>>, bytes: number, keys: number): Promise<void> {
    const ck = this.control.checkpoint(n);
    if (!ck) return;
    ck.instances = JSON.stringify(instances);
    ck.bytes = bytes;
    ck.keys = keys;
  }

  async deleteCheckpoint(n: number): Promise<void> {
    this.control.deleteCheckpoint(n);
  }

  async getSavepoint(id: string): Promise<SavepointRecord | undefined> {
    const sp = this.savepoints.get(id);
    return sp ? { ...sp } : undefined;
  }

  async listSavepoints(): Promise<SavepointRecord[]> {
    return [...this.savepoints.keys()].sort().map((id) => ({ ...this.savepoints.get(id)! }));
  }

  async createSavepoint(record: SavepointRecord): Promise<boolean> {
    if (this.savepoints.has(record.id)) return false;
    this.savepoints.set(record.id, { ...record });
    return true;
  }

  async updateSavepoint(id: string, fields: Partial<Omit<SavepointRecord, 'id'>>, options: { readonly unless?: SavepointStatus } = {}): Promise<void> {
    const sp = this.savepoints.get(id);
    if (options.unless !== undefined && sp?.status === options.unless) return;
    // as an UpdateItem: on a missing record too
    this.savepoints.set(id, { ...(sp ?? ({ id } as Mutable<SavepointRecord>)), ...fields });
  }

  async dropRequestedSavepoint(id: string): Promise<void> {
    if (this.savepoints.get(id)?.status === 'REQUESTED') this.savepoints.delete(id);
  }

  async getSavepointRequest(): Promise<{ id: string; stop: boolean } | undefined> {
    const r = this.savepointRequest;
    return r ? { id: r.id, stop: r.stop } : undefined;
  }

  async putSavepointRequest(request: { readonly id: string; readonly stop: boolean; readonly requestedAt: string }): Promise<boolean> {
    if (this.savepointRequest && this.savepointRequest.id !== request.id) return false;
    this.savepointRequest = { ...request };
    return true;
  }

  async deleteSavepointRequest(id: string): Promise<void> {
    if (this.savepointRequest?.id === id) this.savepointRequest = undefined;
  }

  async getRescale(): Promise<RescaleRecord | undefined> {
    return this.rescale ? { ...this.rescale } : undefined;
  }

  async createRescale(record: RescaleRecord): Promise<boolean> {
    const token = Symbol('createRescale');
    return serviceCall(this.faults, 'checkpoints.createRescale', {}, () => {
      if (this.rescale && this.rescale.phase !== 'done') return this.rescaleBy === token;
      this.rescale = { ...record };
      this.rescaleBy = token;
      return true;
    });
  }

  async updateRescale(fields: Partial<RescaleRecord>): Promise<void> {
    this.rescale = { ...(this.rescale ?? ({} as Mutable<RescaleRecord>)), ...fields };
  }

  async clearRescale(): Promise<void> {
    this.rescale = undefined;
  }

  async snapshotPointer(instanceId: string): Promise<SnapshotPointer | undefined> {
    return this.control.lease(instanceId).snapshot;
  }

  async snapshotPointers(instanceIds: readonly string[]): Promise<Map<string, SnapshotPointer>> {
    const out = new Map<string, SnapshotPointer>();
    for (const id of instanceIds) {
      const p = this.control.lease(id).snapshot;
      if (p) out.set(id, p);
    }
    return out;
  }

  async inlineDeltas(instanceId: string): Promise<number[]> {
    const prefix = `delta#${instanceId}|`;
    return this.control
      .deltaKeys()
      .filter((k) => k.startsWith(prefix))
      .map((k) => Number(k.slice(prefix.length)))
      .sort((a, b) => a - b);
  }

  async deleteInlineDelta(instanceId: string, checkpointId: number): Promise<void> {
    this.control.deleteDelta(inlineDeltaKey(instanceId, checkpointId));
  }

  async parkIdle(taskToken: string, since: string): Promise<void> {
    await serviceCall(this.faults, 'checkpoints.parkIdle', {}, () => {
      this.idle = { token: taskToken, since };
    });
  }

  async idleToken(): Promise<string | undefined> {
    return serviceCall(this.faults, 'checkpoints.idleToken', {}, () => (this.idle?.takenBy === undefined ? this.idle?.token : undefined));
  }

  async takeIdle(taskToken: string): Promise<boolean> {
    const token = Symbol('takeIdle');
    return serviceCall(this.faults, 'checkpoints.takeIdle', {}, () => {
      const idle = this.idle;
      // a failed condition on this call's own earlier mark (its response lost) is a success, as in the adapter
      if (idle?.token !== taskToken || idle.takenBy !== undefined) return idle?.takenBy === token;
      idle.takenBy = token;
      return true;
    });
  }

  async markParked(instanceIds: readonly string[], taskToken: string): Promise<void> {
    for (const id of instanceIds) await serviceCall(this.faults, 'checkpoints.markParked', { instanceId: id }, () => this.control.setParked(id, taskToken));
  }

  async clearParked(instanceId: string, taskToken: string): Promise<void> {
    await serviceCall(this.faults, 'checkpoints.clearParked', { instanceId }, () => this.control.clearParked(instanceId, taskToken));
  }

  async loopState(): Promise<LoopState> {
    return { ...this.loop };
  }

  async markCommitting(n: number, at: string): Promise<void> {
    this.loop.committing = n;
    this.loop.committingAt = at;
  }

  async clearCommitting(n: number): Promise<void> {
    if (this.loop.committing !== n) return;
    delete this.loop.committing;
    delete this.loop.committingAt;
  }

  async setOperatorStop(at: string | undefined): Promise<void> {
    if (at === undefined) delete this.loop.stopped;
    else this.loop.stopped = at;
  }
}

function toRecord(ck: MemoryCheckpoint): CheckpointRecord {
  const missing = ck.members ? [...ck.members].filter((m) => !ck.acks.has(m)).sort() : undefined;
  return {
    checkpointId: ck.checkpointId,
    status: ck.status,
    savepoint: ck.savepoint,
    ...(ck.savepointId !== undefined ? { savepointId: ck.savepointId } : {}),
    ...(ck.instances !== undefined ? { instances: JSON.parse(ck.instances) as Record<string, InstanceCheckpointStats> } : {}),
    ...(ck.bytes !== undefined ? { bytes: ck.bytes } : {}),
    ...(ck.keys !== undefined ? { keys: ck.keys } : {}),
    ...(ck.reshard?.length ? { reshard: [...ck.reshard] } : {}),
    expected: ck.expected,
    acks: ck.acks.size,
    complete: ackSetComplete(ck),
    ...(missing ? { missing } : {}),
    topology: [...ck.topology],
    ...(ck.injected ? { injected: true } : {}),
    startedAt: ck.startedAt ?? '',
    ...(ck.endedAt ? { endedAt: ck.endedAt } : {}),
    ...(ck.durationMs !== undefined ? { durationMs: ck.durationMs } : {}),
    ...(ck.reason ? { reason: ck.reason } : {}),
    ...(ck.progressAcks !== undefined ? { progressAcks: ck.progressAcks, progressAt: ck.progressAt! } : {}),
  };
}

/** Barriers and ticks into the Kinesis twin; remembers where each landed (tests align on it). */
export class MemorySourceInjector implements SourceInjector {
  /** every control record put, in order */
  readonly injected: Array<{ readonly stream: string; readonly shardId: string; readonly sequenceNumber: string }> = [];

  constructor(private readonly kinesis: MemoryKinesis) {}

  async putControl(stream: string, shard: ShardInfo, data: Uint8Array): Promise<void> {
    // the writers' own retry loop over the twin service (throttles and rejected entries go again)
    const [r] = await putRecordsUntilAccepted(memoryKinesisApi(this.kinesis), stream, [{ data, partitionKey: 'barrier', explicitHashKey: shard.startingHashKey }], memoryRetry);
    this.injected.push({ stream, shardId: r!.shardId, sequenceNumber: r!.sequenceNumber });
  }
}

/** UpdateShardCount on the Kinesis twin (which reshards at once: the stream is ACTIVE again right away). */
export class MemoryStreamScaler implements StreamScaler {
  constructor(private readonly kinesis: MemoryKinesis) {}

  async describe(stream: string): Promise<StreamSummary> {
    return { status: 'ACTIVE', open: this.kinesis.listShards(stream).filter((s) => s.endingSequenceNumber === undefined).length, mode: 'PROVISIONED' };
  }

  async updateShardCount(stream: string, target: number): Promise<void> {
    this.kinesis.reshard(stream, target);
  }
}

/** The twin's delta objects (the bucket's `deltas/`). */
export class MemoryDeltaObjects implements DeltaObjects {
  constructor(
    private readonly control: MemoryControlStore,
    private readonly faults: MemoryFaults = {},
  ) {}

  async listByInstance(instanceIds: readonly string[]): Promise<Map<string, Map<number, string>>> {
    return serviceCall(this.faults, 'deltas.list', { size: instanceIds.length }, () => groupDeltaKeys(this.control.deltaKeys(), instanceIds));
  }

  async delete(key: string): Promise<void> {
    this.control.deleteDelta(key);
  }
}

/** Savepoint files written as objects in memory (the bucket's `savepoints/`), from the twins' deltas and state. */
export class MemorySavepointWriter implements SavepointWriter {
  /** the files by key */
  readonly objects = new Map<string, Uint8Array>();

  constructor(
    private readonly plan: Plan,
    private readonly control: MemoryControlStore,
    /** the state the instances write (with its spilled values resolved) */
    private readonly state: { readGroup(operatorId: string, keyGroup: number): Promise<StateRow[]> },
  ) {}

  async write(id: string, n: number, pointers: ReadonlyMap<string, SnapshotPointer>, at: Date) {
    const m = await writeSavepointFiles(
      this.plan,
      {
        readDelta: (ref) => this.control.readDelta(ref),
        readGroup: (operatorId, keyGroup) => this.state.readGroup(operatorId, keyGroup),
        put: async (key, body) => void this.objects.set(key, typeof body === 'string' ? new TextEncoder().encode(body) : new Uint8Array(body)),
      },
      id,
      n,
      pointers,
      at,
    );
    return { rows: m.rows, timers: m.timers, bytes: m.bytes, location: `memory://${savepointPrefix(id)}` };
  }
}

/** Task tokens and executions on the twin's notifier (no state machine runs in memory). */
export class MemoryWorkflow implements Workflow {
  readonly failed: Array<{ taskToken: string; error: string; cause: string }> = [];
  readonly heartbeats: string[] = [];
  readonly started: Array<{ name: string; input: unknown }> = [];

  constructor(private readonly notifier: MemoryTaskNotifier) {}

  succeed(taskToken: string, output: unknown): Promise<void> {
    return this.notifier.succeed(taskToken, output);
  }

  async fail(taskToken: string, error: string, cause: string): Promise<void> {
    this.failed.push({ taskToken, error, cause });
  }

  async heartbeat(taskToken: string): Promise<void> {
    this.heartbeats.push(taskToken);
  }

  async running(): Promise<boolean> {
    return false;
  }

  async start(stateMachineArn: string, name: string, input: unknown): Promise<string> {
    this.started.push({ name, input });
    return `${stateMachineArn}:${name}`;
  }
}

/** The twin's shards after a position, in pages of 100. */
export class MemoryShardPeek implements ShardPeek {
  constructor(private readonly kinesis: MemoryKinesis) {}

  async *pagesAfter(stream: string, shardId: string, sequenceNumber: string) {
    const after = this.kinesis.records(stream, shardId).filter((r) => compareSeq(r.sequenceNumber, sequenceNumber) > 0);
    for (let i = 0; i < after.length || i === 0; i += 100) {
      yield { records: after.slice(i, i + 100).map((r) => r.data), caughtUp: i + 100 >= after.length };
    }
  }
}

export interface MemoryCoordinatorPorts extends CoordinatorPorts {
  readonly store: MemoryCheckpointStore;
  readonly injector: MemorySourceInjector;
  readonly savepoints: MemorySavepointWriter;
}

/** The coordinator's ports over the twins of `mem`; `state` reads what the instances wrote (@default the twins' state store). */
export function memoryCoordinatorPorts(plan: Plan, mem: MemoryPorts, state: { readGroup(operatorId: string, keyGroup: number): Promise<StateRow[]> } = mem.state): MemoryCoordinatorPorts {
  return {
    store: new MemoryCheckpointStore(mem.control),
    shards: mem.shards,
    injector: new MemorySourceInjector(mem.kinesis),
    notifier: mem.notifier,
    scaler: new MemoryStreamScaler(mem.kinesis),
    deltas: new MemoryDeltaObjects(mem.control),
    savepoints: new MemorySavepointWriter(plan, mem.control, state),
  };
}

/** The loop's ports over the twins (the store shared with the coordinator's). */
export function memoryLoopPorts(mem: MemoryPorts, store: MemoryCheckpointStore): LoopPorts {
  return { store, workflow: new MemoryWorkflow(mem.notifier), shards: mem.shards, peek: new MemoryShardPeek(mem.kinesis) };
}

/** The shipping Coordinator over the twins of `mem`; its ports are `coordinator.ports`. */
export function memoryCoordinator(
  plan: Plan,
  names: ResourceNames,
  mem: MemoryPorts,
  commitTargets: readonly CommitTarget[] = [],
  now?: () => Date,
  options: CoordinatorOptions & { readonly state?: { readGroup(operatorId: string, keyGroup: number): Promise<StateRow[]> } } = {},
): Coordinator & { readonly ports: MemoryCoordinatorPorts } {
  const { state, ...rest } = options;
  return new Coordinator(plan, names, memoryCoordinatorPorts(plan, mem, state), commitTargets, now, rest) as Coordinator & { readonly ports: MemoryCoordinatorPorts };
}
