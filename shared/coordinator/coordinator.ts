/**
 * The coordinator's tasks. The state machine (defined once, in CDK) sequences them; this class does
 * the work of each, and is the only writer of checkpoint status:
 *
 * 1. allocate n — a conditional write on the set of open checkpoints (at most maxConcurrent);
 * 2. inject barrier n into every open shard of every source stream;
 * 3. await — store the task token; the instance whose ack completes the ack set wakes the workflow;
 * 4. commit n — mark it COMPLETED, record what each instance flushed, publish what transactional
 *    sinks staged below n, write the savepoint when n is one, and garbage-collect deltas no
 *    retained checkpoint needs; or abort n — mark it ABORTED and still deliver barrier n everywhere
 *    (a channel that skips a barrier number would stall every later alignment).
 *
 * Checkpoints in flight: `plan.checkpoint.maxConcurrent` (default 1); with more than one, `settle`
 * commits the complete ones in order and aborts the stuck ones (the workflow calls it after every
 * injection and whenever its window is full). Savepoints are checkpoints
 * too: a user asks for one (`requestSavepoint`), the next allocate turns into a savepoint, and its
 * commit writes the portable files (a `SavepointWriter`); requests and completion are in
 * ./savepoints.ts. An abort that leaves the job looking stalled says so (./stall.ts).
 *
 * When an open checkpoint is given up is a progress rule (./timeouts.ts): `timeoutMs` is a window
 * that every new ack restarts, under a hard ceiling; the workflow asks `overdue` each time a window
 * passes, and `settle` and `allocate` apply the same rule.
 *
 * Everything it reads and writes goes through ports (./ports.ts): the same class runs on AWS
 * (shared/adapters/aws/coordinator-ports.ts) and on the in-memory twins.
 */
import { encodeSourceControl } from '../codec/envelope.js';
import type { Plan } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import type { SnapshotPointer, Telemetry } from '../runtime/ports.js';
import { instanceIdOf } from '../runtime/stage-instance.js';
import { SluiceError } from '../util/errors.js';
import { collectGarbage, collectsGarbage } from './gc.js';
import { pauseMsOf } from './loop.js';
import type { CoordinatorPorts, CoordinatorState } from './ports.js';
import { InPlaceRescale } from './rescale.js';
import { progressVerdict, type TimeoutVerdict } from './timeouts.js';
import type { AbortOutput, AllocateOutput, CommitOutput, CoordinatorTaskInput, InjectOutput, OverdueOutput, SettleOutput } from './protocol.js';
import { CheckpointInFlightError, JobStoppedError, type CommitTarget } from './protocol.js';
import { allAcked, type CheckpointRecord, type InstanceCheckpointStats, type SavepointRecord } from './records.js';
import { Savepoints } from './savepoints.js';
import { STALL_AFTER, stallOf, type StallReport } from './stall.js';

export { CheckpointInFlightError, JobStoppedError, type CommitTarget } from './protocol.js';
export type { CheckpointRecord, CheckpointStatus, InstanceCheckpointStats, SavepointRecord, SavepointStatus } from './records.js';
export { STALL_AFTER, type StallReport } from './stall.js';
export { CHECKPOINT_HISTORY } from './gc.js';

export interface CoordinatorOptions {
  readonly telemetry?: Telemetry;
}

export class Coordinator {
  /** in-place rescales of a running stage (see rescale.ts) */
  readonly rescales: InPlaceRescale;
  /** savepoint requests and their completion (see savepoints.ts) */
  private readonly savepoints: Savepoints;

  constructor(
    private readonly plan: Plan,
    private readonly names: ResourceNames,
    readonly ports: CoordinatorPorts,
    private readonly commitTargets: readonly CommitTarget[] = [],
    private readonly now: () => Date = () => new Date(),
    private readonly options: CoordinatorOptions = {},
  ) {
    this.rescales = new InPlaceRescale(plan, names, ports.store, ports.scaler, now);
    this.savepoints = new Savepoints(ports, now, options.telemetry);
  }

  private get store() {
    return this.ports.store;
  }

  async run(input: CoordinatorTaskInput): Promise<unknown> {
    switch (input.action) {
      case 'allocate':
        return this.allocate(input.savepoint ?? false);
      case 'inject':
        return this.inject(input.checkpointId);
      case 'await':
        return this.await(input.checkpointId, input.taskToken);
      case 'commit':
        return this.commit(input.checkpointId);
      case 'abort':
        return this.abort(input.checkpointId, input.reason);
      case 'savepoint':
        return this.requestSavepoint(input.savepointId !== undefined ? { id: input.savepointId, stop: input.stop ?? false } : { stop: input.stop ?? false });
      case 'gc':
        return this.gc();
      case 'settle':
        return this.settle();
      case 'overdue':
        return this.overdue(input.checkpointId);
      default:
        throw new SluiceError(`unknown coordinator action ${JSON.stringify((input as { action?: unknown }).action)}`, 'BAD_INPUT');
    }
  }

  async allocate(savepoint = false): Promise<AllocateOutput> {
    const state = await this.store.readState();
    // a task that died half-way (allocate between its two writes, a commit or an abort after its
    // first write) left its checkpoint open: finish its sequence first
    if (await this.finishLeftOvers(state)) return this.allocate(savepoint);
    const { last, open } = state;
    const maxOpen = this.plan.checkpoint.maxConcurrent ?? 1;
    for (const id of open) {
      const ck = await this.get(id);
      // every ack is in, but the execution that waited for them ended before it committed: commit
      // it (idempotent) instead of aborting finished work a window later; only the oldest, as
      // commits go in order
      if (id === open[0] && ck?.status === 'IN_FLIGHT' && allAcked(ck)) {
        this.options.telemetry?.log('warn', 'committing a checkpoint whose acks were all in when its coordinator execution ended', { checkpointId: id });
        // No commit marker here (loop.ts sets one around its own commits): one left by a task that
        // died mid-commit would hold every next begin back for the marker's lease. None is needed:
        // n stays open until the commit's last write, so n + 1 cannot open meanwhile, and a second
        // execution committing n alongside is harmless (commit is idempotent)
        await this.commit(id);
        return this.allocate(savepoint);
      }
      // a checkpoint open with no ack for a whole progress window (or past the ceiling) was left by
      // an execution that died (or whose allocate lost its answer): nobody waits for it any more, so
      // abort it — which still delivers its barrier everywhere — and go on with the next one; one
      // whose acks are still arriving stays open (timeouts.ts)
      const verdict: TimeoutVerdict = ck ? await progressVerdict(this.store, ck, this.plan.checkpoint.timeoutMs, this.now()) : { abort: true, reason: 'no record' };
      if (verdict.abort) {
        await this.abort(id, `left in flight by a coordinator execution that ended (${verdict.reason})`);
        return this.allocate(savepoint);
      }
      // no ack for a whole timeoutMs: the execution that opened n may have ended before it injected
      // n's barrier (nothing could ack then, and the window, doubled by aborts before, is long).
      // Injecting again is safe (sources ignore a barrier they had) and gives n its chance — once:
      // the progress noted at 0 acks says it was done, and the window runs from there
      if (ck?.status === 'IN_FLIGHT' && ck.acks === 0 && ck.progressAt === undefined && this.now().getTime() - Date.parse(ck.startedAt) >= this.plan.checkpoint.timeoutMs) {
        await this.inject(id);
        await this.store.noteProgress(id, 0, this.now().toISOString());
      }
    }
    if (open.length >= maxOpen) throw new CheckpointInFlightError(open[0]!);
    // a stop-with-savepoint in flight: no checkpoint may follow it
    const { stopping, stoppedAt } = state;
    if (stopping !== undefined) throw new CheckpointInFlightError(stopping, `no checkpoint after the stop-with-savepoint ${stopping}`);
    if (stoppedAt !== undefined) throw new JobStoppedError(stoppedAt);
    const n = last + 1;
    // a stream being resharded takes no checkpoint until its new shards are open
    const step = await this.rescales.beforeAllocate(async (id) => (await this.get(id))?.status);
    if (!step.proceed) throw new CheckpointInFlightError(n, `no checkpoint yet: ${step.why}`);
    // a savepoint asked for by a user turns this checkpoint into one
    const request = await this.store.getSavepointRequest();
    const savepointId = request?.id;
    if (savepointId !== undefined) savepoint = true;
    const stop = savepointId !== undefined && request?.stop === true;
    const { topology, members } = await this.openInstances();
    await this.noticeSourceReshard(last, members);
    // `open` holds the checkpoints in flight (at most maxConcurrent)
    if (!(await this.store.openNext(n, last, maxOpen, stop))) throw new CheckpointInFlightError(n);
    // n is open now; its record may only be created, never overwrite one an abort wrote meanwhile
    // (a later task aborts an open checkpoint without a record: see finishLeftOvers). A retry of
    // this write finds its own record (same startedAt) and succeeds.
    const startedAt = this.now().toISOString();
    const created = await this.store.createCheckpoint({
      checkpointId: n,
      members,
      topology,
      startedAt,
      savepoint,
      ...(savepointId !== undefined ? { savepointId } : {}),
      ...(step.reshard.length ? { reshard: step.reshard } : {}),
    });
    if (!created) throw new CheckpointInFlightError(n, `checkpoint ${n} was aborted before its allocate wrote its record`);
    if (step.reshard.length) await this.rescales.announced(n);
    if (savepointId !== undefined) {
      await this.store.updateSavepoint(savepointId, { status: 'IN_PROGRESS', checkpointId: n });
      await this.store.deleteSavepointRequest(savepointId);
    }
    return { checkpointId: n };
  }

  /**
   * Asks for a savepoint: the next checkpoint the workflow allocates becomes one. With `stop`, the
   * job takes no checkpoint after it (stop-with-savepoint); the caller then stops the workflow and
   * the stage functions. Fails if another request is still waiting.
   */
  async requestSavepoint(options: { id?: string; stop?: boolean } = {}): Promise<SavepointRecord> {
    return this.savepoints.request(options);
  }

  async getSavepoint(id: string): Promise<SavepointRecord | undefined> {
    return this.savepoints.get(id);
  }

  async listSavepoints(): Promise<SavepointRecord[]> {
    return this.savepoints.list();
  }

  /**
   * Opens barrier n to the sources: announces it (a source puts it at its current read position,
   * runtime/source-barriers.ts) and appends it to the tail of every open shard of every source
   * stream (an idle shard's wake-up: there tail and read position coincide). Safe to repeat:
   * sources ignore old barriers. n's topology and members are fixed before its first barrier goes
   * out (see `fixTopology`).
   */
  async inject(n: number): Promise<InjectOutput> {
    let ck = await this.get(n);
    if (!ck) throw new SluiceError(`checkpoint ${n} does not exist`, 'NO_CHECKPOINT');
    const listOpen = () =>
      Promise.all(
        this.plan.stages
          .filter((s) => s.input.kind === 'source')
          .map(async (stage) => ({ stage, stream: this.names.streamOf(stage), open: await this.ports.shards.openShards(this.names.streamOf(stage)) })),
      );
    let sources = await listOpen();
    let topology = ck.topology;
    // another injection of n may re-list at the same time: the one whose listing is still current marks n injected
    for (let attempt = 0; !ck.injected; attempt++) {
      if (attempt >= 5) throw new SluiceError(`checkpoint ${n}: its injections kept listing other source shards`, 'TOPOLOGY_MISMATCH', true);
      const fixed = await this.fixTopology(ck, sources);
      if (await this.store.markInjected(n, fixed.listing)) {
        topology = fixed.topology;
        break;
      }
      ck = await this.get(n);
      if (!ck) throw new SluiceError(`checkpoint ${n} does not exist`, 'NO_CHECKPOINT');
      sources = await listOpen();
      topology = ck.topology;
    }
    const barrier = {
      kind: 'barrier' as const,
      checkpointId: n,
      topology,
      savepoint: ck.savepoint,
      ...(ck.reshard?.length ? { reshard: ck.reshard } : {}),
      time: this.now().getTime(),
    };
    // Only with one checkpoint in flight: the placement rules are proven (in a model of the
    // protocol) for one checkpoint at a time, and with overlapping checkpoints (n+1 placed while n
    // is still pending) a run of the engine lost records. Overlapping checkpoints keep tail barriers.
    if ((this.plan.checkpoint.maxConcurrent ?? 1) === 1) {
      await this.store.announceBarrier({ barrier, instances: sources.flatMap((s) => s.open.map((o) => instanceIdOf(s.stage.id, o.shardId))) });
    }
    const data = encodeSourceControl(barrier);
    let shards = 0;
    for (const { stream, open } of sources) {
      await Promise.all(open.map((s) => this.ports.injector.putControl(stream, s, data)));
      shards += open.length;
    }
    return { checkpointId: n, shards };
  }

  /**
   * Barrier n reaches the source shards open when it is injected, which a source stream resharded
   * by someone else since n's allocate makes others than the shards n counted: a split there sends
   * n from more shards than its topology counts, and an inner instance would align n before every
   * producer sent it, its snapshot missing that producer's last records of the epoch. So an
   * injection takes n's source topology and expected members from the shards it lists (a
   * conditional write), then marks n injected (conditional on that listing being the last) before
   * any barrier goes out. Until that mark an injection that died is redone from a new listing (a
   * split since cannot be miscounted: no barrier is out); after it a later injection (a retry, an
   * abort) keeps them, since barriers carrying them may be out.
   */
  private async fixTopology(ck: CheckpointRecord, sources: ReadonlyArray<{ stage: Plan['stages'][number]; open: readonly { shardId: string }[] }>): Promise<{ topology: readonly number[]; listing: number }> {
    const n = ck.checkpointId;
    const topology = this.plan.stages.map((s, i) => sources.find((x) => x.stage === s)?.open.length ?? ck.topology[i] ?? 0);
    const prefixes = sources.map((s) => `${s.stage.id}:`);
    // a record written before members were kept: the other stages' shards open now
    const before = (await this.store.membersOf(n)) ?? (await this.openInstances()).members;
    const members = [...before.filter((m) => !prefixes.some((p) => m.startsWith(p))), ...sources.flatMap((s) => s.open.map((o) => instanceIdOf(s.stage.id, o.shardId)))];
    if (topology.join() !== ck.topology.join() || [...members].sort().join() !== [...before].sort().join()) {
      this.options.telemetry?.log('warn', `a source stream was resharded between checkpoint ${n}'s allocate and its inject: it counts the shards open now`, {
        checkpointId: n,
        allocated: ck.topology,
        injected: topology,
      });
    }
    const fixed = await this.store.fixInjection(n, { members, topology });
    if (!fixed) throw new SluiceError(`checkpoint ${n} does not exist`, 'NO_CHECKPOINT');
    return fixed;
  }

  /** Stores the task token; if every ack is already in, wakes the workflow itself. */
  async await(n: number, taskToken: string): Promise<{ checkpointId: number }> {
    // an answered or timed-out token is ignored by the notifier
    if (await this.store.setTaskToken(n, taskToken)) await this.ports.notifier.succeed(taskToken, { checkpointId: n });
    return { checkpointId: n };
  }

  async commit(n: number): Promise<CommitOutput> {
    const ck = await this.get(n);
    if (!ck) throw new SluiceError(`checkpoint ${n} does not exist`, 'NO_CHECKPOINT');
    if (ck.status === 'IN_FLIGHT') await this.finish(n, 'COMPLETED', ck);
    else if (ck.status === 'ABORTED') throw new SluiceError(`checkpoint ${n} was aborted and cannot commit`, 'CHECKPOINT_ABORTED');
    const pointers = ck.instances ? undefined : await this.recordInstanceStats(n);
    // publishing is idempotent: a commit retried after a crash publishes what is left
    let published = 0;
    for (const t of this.commitTargets) published += await t.publish(n);
    // only once n's outputs are published: whoever waits for the end finds them there
    await this.finishJobIfDone(n, ck, pointers ?? (await this.pointersOf(n)));
    if (ck.savepointId !== undefined) await this.savepoints.complete(ck.savepointId, n, pointers ?? (await this.pointersOf(n)));
    // about once a minute (and at every savepoint): each run lists every instance's deltas
    const open = { startedAt: Date.parse(ck.startedAt), committedAt: this.now().getTime() };
    const gc = collectsGarbage(n, pauseMsOf(this.plan.checkpoint), open) || ck.savepointId !== undefined ? await this.gc() : { deleted: 0 };
    // the last write: until here n stays open, so a later task finishes a commit that died half-way
    await this.close(n);
    return { checkpointId: n, published, deltasDeleted: gc.deleted };
  }

  /**
   * A bounded job is done when every instance's snapshot n says it saw the end of its input: the
   * commit of n then covers every record, and the job takes no further checkpoints.
   */
  private async finishJobIfDone(n: number, ck: CheckpointRecord, pointers: Map<string, SnapshotPointer>): Promise<void> {
    const mine = [...pointers.values()].filter((p) => p.checkpointId === n);
    if (mine.length < ck.expected || !mine.every((p) => p.meta.finished === true)) return;
    await this.store.markFinished(n);
    this.options.telemetry?.log('info', 'the job read all of its bounded input and finished', { checkpointId: n });
  }

  /** Whether the job stopped (stop-with-savepoint) or finished (end of bounded input), and at which checkpoint. */
  async jobStatus(): Promise<{ stoppedAt?: number; finishedAt?: number }> {
    const s = await this.store.readState();
    return {
      ...(s.stoppedAt !== undefined ? { stoppedAt: s.stoppedAt } : {}),
      ...(s.finishedAt !== undefined ? { finishedAt: s.finishedAt } : {}),
    };
  }

  /** The acked instances' snapshot pointers of checkpoint n (their leases point at n until n+1 starts). */
  private async pointersOf(n: number): Promise<Map<string, SnapshotPointer>> {
    return this.store.snapshotPointers(await this.store.acksOf(n));
  }

  /** Copies each acked instance's bytes, keys, replay point and delta of checkpoint n into its record. */
  private async recordInstanceStats(n: number): Promise<Map<string, SnapshotPointer>> {
    const pointers = await this.pointersOf(n);
    const instances: Record<string, InstanceCheckpointStats> = {};
    let bytes = 0;
    let keys = 0;
    for (const [id, p] of pointers) {
      if (p.checkpointId !== n) continue;
      const b = typeof p.meta.bytes === 'number' ? p.meta.bytes : undefined;
      const k = typeof p.meta.keys === 'number' ? p.meta.keys : undefined;
      instances[id] = { ...(b !== undefined ? { bytes: b } : {}), ...(k !== undefined ? { keys: k } : {}), replayPoint: p.replayPoint, delta: p.delta };
      bytes += b ?? 0;
      keys += k ?? 0;
    }
    await this.store.recordInstances(n, instances, bytes, keys);
    return pointers;
  }

  /** Deletes the deltas no retained checkpoint needs and trims old checkpoint records (gc.ts). */
  async gc(): Promise<{ deleted: number; kept: number }> {
    return collectGarbage(this.plan, this.names, this.ports);
  }

  /**
   * Aborts n: marks it ABORTED, delivers barrier n to every source shard, then takes n out of the
   * open set — in that order, so a crash anywhere leaves n open and any later task (the retry, the
   * next allocate or settle) finishes it. An open n without a record (its allocate died between
   * its two writes) gets an ABORTED record first: barrier n must still reach every shard.
   */
  async abort(n: number, reason?: unknown): Promise<AbortOutput> {
    const why = JSON.stringify(reason ?? 'aborted').slice(0, 1000);
    const ck = (await this.get(n)) ?? (await this.recordAborted(n, why));
    if (!ck) {
      await this.close(n); // not open, no record: nothing to deliver
      return { checkpointId: n };
    }
    if (ck.status === 'IN_FLIGHT') await this.finish(n, 'ABORTED', ck, why);
    if (ck?.savepointId !== undefined) {
      // the savepoint failed with its checkpoint; a stop it asked for does not happen
      await this.store.updateSavepoint(ck.savepointId, { status: 'FAILED', reason: `checkpoint ${n} was aborted` }, { unless: 'COMPLETED' });
    }
    await this.inject(n);
    await this.close(n);
    await this.reportStall(n);
    return { checkpointId: n };
  }

  /**
   * Writes an ABORTED record for an open checkpoint that has none (its allocate died between its
   * two writes), with the topology and members of now, so that inject can deliver its barrier.
   * Undefined when n is not open (nothing to deliver).
   */
  private async recordAborted(n: number, reason: string): Promise<CheckpointRecord | undefined> {
    if (!(await this.store.readState()).open.includes(n)) return undefined;
    const { topology, members } = await this.openInstances();
    // unless its allocate wrote it after all
    await this.store.createAbortedCheckpoint({ checkpointId: n, members, topology, startedAt: this.now().toISOString(), reason });
    return this.get(n);
  }

  /**
   * Finishes what tasks that died half-way left behind: every open checkpoint that is no longer
   * IN_FLIGHT (or has no record) is committed again (COMPLETED) or aborted again (otherwise), and a
   * stop held for a checkpoint no longer open is lifted. True when it did anything.
   */
  private async finishLeftOvers(state: CoordinatorState): Promise<boolean> {
    let did = false;
    for (const n of state.open) {
      const ck = await this.get(n);
      if (ck?.status === 'IN_FLIGHT') continue;
      await this.finishLeftOver(n, ck);
      did = true;
    }
    const stopping = state.stopping;
    if (stopping !== undefined && !state.open.includes(stopping)) {
      await this.liftStop(stopping);
      did = true;
    }
    return did;
  }

  private async finishLeftOver(n: number, ck: CheckpointRecord | undefined): Promise<void> {
    this.options.telemetry?.log('warn', 'finishing a checkpoint a coordinator task left half done', { checkpointId: n, status: ck?.status ?? 'no record' });
    if (ck?.status === 'COMPLETED') await this.commit(n);
    else await this.abort(n, ck?.reason ?? 'opened, but its allocate died before writing its record');
  }

  /**
   * A source stream whose open shards differ from those the previous checkpoint expected was
   * resharded by someone else (an on-demand stream does it by itself): say so loudly. Completion is
   * by the identities each checkpoint expects, so acks of the new shards cannot complete a checkpoint
   * that expected the old ones; the checkpoint that expected a closed shard times out and the next
   * one expects the new shards.
   */
  private async noticeSourceReshard(previous: number, members: readonly string[]): Promise<void> {
    if (previous < 1) return;
    const before = await this.store.membersOf(previous);
    if (!before) return;
    const rescaling = (await this.rescales.get())?.stage;
    for (const stage of this.plan.stages) {
      if (stage.input.kind !== 'source' || stage.id === rescaling) continue;
      const prefix = `${stage.id}:`;
      const was = [...before].filter((m) => m.startsWith(prefix)).sort();
      const now = members.filter((m) => m.startsWith(prefix)).sort();
      if (was.join() === now.join()) continue;
      this.options.telemetry?.count('SourceResharded');
      this.options.telemetry?.log('error', `source stream ${this.names.streamOf(stage)} was resharded outside the job: ${was.length} → ${now.length} open shards`, {
        stage: stage.id,
        before: was,
        now,
        checkpointId: previous + 1,
      });
    }
  }

  /** Open shards of every stage's input stream now: shards per stage, and the instance ids. */
  private async openInstances(): Promise<{ topology: number[]; members: string[] }> {
    const shards = await Promise.all(this.plan.stages.map(async (s) => (await this.ports.shards.openShards(this.names.streamOf(s))).map((x) => instanceIdOf(s.id, x.shardId))));
    return { topology: shards.map((x) => x.length), members: shards.flat() };
  }

  private async finish(n: number, status: 'COMPLETED' | 'ABORTED', ck: CheckpointRecord, reason?: string): Promise<void> {
    const end = this.now();
    // a no-op when an earlier try finished it
    await this.store.finishCheckpoint(n, { status, endedAt: end.toISOString(), durationMs: end.getTime() - Date.parse(ck.startedAt), ...(reason ? { reason } : {}) });
  }

  /**
   * Takes n out of the checkpoints in flight, the last write of a commit or an abort. The stop n held
   * back (if it was one) is lifted first: lifted while n is still open, a crash in between leaves
   * n open and a later task closes it; the other way round a crash left the stop set forever.
   */
  private async close(n: number): Promise<void> {
    await this.liftStop(n);
    await this.store.closeOpen(n);
  }

  private async liftStop(n: number): Promise<void> {
    await this.store.liftStop(n);
  }

  /**
   * With more than one checkpoint in flight: commits, in order, every open checkpoint whose ack set
   * is complete, and aborts the stuck ones (timeouts.ts). Returns what stays open, oldest first.
   */
  async settle(): Promise<SettleOutput> {
    const state = await this.store.readState();
    const still: number[] = [];
    for (const n of state.open) {
      const ck = await this.get(n);
      if (!ck || ck.status !== 'IN_FLIGHT') await this.finishLeftOver(n, ck);
      else if (allAcked(ck)) await this.commit(n);
      else {
        const verdict = await progressVerdict(this.store, ck, this.plan.checkpoint.timeoutMs, this.now());
        if (verdict.abort) await this.abort(n, verdict.reason);
        else still.push(n);
      }
    }
    return { open: still.length, oldest: still[0] ?? 0 };
  }

  /**
   * Names a stall (stall.ts): the last `after` checkpoints all ended without completing (or are
   * still in flight), and some instances acked none of them and have no snapshot at or past the
   * first. Undefined when nothing says so. Abort calls it (an alarm: metric `CheckpointStalled`);
   * the chaos harness names a stall with it.
   */
  async stalled(after = STALL_AFTER): Promise<StallReport | undefined> {
    return stallOf(await this.list(), after, this.store);
  }

  /** After an abort: counts `CheckpointStalled` and logs the stall's words when the job looks stalled. */
  private async reportStall(n: number): Promise<void> {
    const t = this.options.telemetry;
    if (!t) return;
    try {
      const r = await this.stalled();
      if (!r) return;
      t.count('CheckpointStalled');
      t.log('error', r.message, { checkpointId: n, waiting: r.waiting });
    } catch (err) {
      t.log('warn', 'could not tell whether the job is stalled', { checkpointId: n, error: String(err) });
    }
  }

  /**
   * The workflow's progress window passed and checkpoint n is still open: abort it if it is stuck
   * (timeouts.ts), else tell the workflow to wait again. `extend` is false once n is finished.
   */
  async overdue(n: number): Promise<OverdueOutput> {
    const ck = await this.get(n);
    if (!ck || ck.status !== 'IN_FLIGHT') return { checkpointId: n, extend: false };
    // complete meanwhile (its last ack found no task token): waiting again wakes up at once
    if (allAcked(ck)) return { checkpointId: n, extend: true };
    const verdict = await progressVerdict(this.store, ck, this.plan.checkpoint.timeoutMs, this.now());
    if (!verdict.abort) return { checkpointId: n, extend: true };
    this.options.telemetry?.log('warn', 'checkpoint aborted', { checkpointId: n, reason: verdict.reason });
    await this.abort(n, verdict.reason);
    return { checkpointId: n, extend: false, reason: verdict.reason };
  }

  async get(n: number): Promise<CheckpointRecord | undefined> {
    return this.store.getCheckpoint(n);
  }

  /** Every checkpoint record, oldest first. */
  async list(): Promise<CheckpointRecord[]> {
    return this.store.listCheckpoints();
  }
}
