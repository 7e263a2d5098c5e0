/**
 * One parallel instance of a stage (one shard of its input stream), as cached in an execution
 * environment. Its loop: restore a snapshot → process records → snapshot at each barrier → drain
 * outputs. The protocol it follows:
 *
 * - Epochs. Records a producer emits between forwarding barrier n and barrier n+1 belong to epoch
 *   n. Snapshot n holds exactly the effects of input records of epoch < n.
 * - Alignment (inner stages): see barrier-handler.ts (exactly-once aligns, at-least-once tracks).
 * - Order of a snapshot. Forward barrier n (`snapshot` here), then get every pending output
 *   accepted, make the snapshot durable (delta, then the lease's pointer, fenced), apply rows when
 *   due, ack (snapshot-writer.ts).
 * - Replay point. Every record not in the snapshot can be re-read from it: for a source shard,
 *   just after barrier n; for an inner shard, the earliest of the held records, of later barriers
 *   seen, and of the record being processed.
 * - Dedupe. Inner records are identified by (producer, epoch, seq) and deduplicated by set
 *   membership (record-dedupe.ts); records of an epoch below the instance's are dropped. Source
 *   records are deduplicated by shard position.
 *
 * Its parts: the chain (chain.ts), keyed state (keyed-state.ts), timers, the watermark tracker,
 * the barrier handler, the inner packets' apply pass (packet-apply.ts), dirty-state spill
 * (dirty-spill.ts), the outbox and the snapshot writer; a reshard's child starts from its
 * parents' handovers (shard-inheritance.ts).
 */
import type { Job } from '../api/job.js';
import { decodeSourceControl, type DataEnvelope, type SourceControl } from '../codec/envelope.js';
import type { Plan, PlanSource, PlanStage } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import { errorMessage, SluiceError } from '../util/errors.js';
import { createBarrierHandler, type BarrierHandler } from './barrier-handler.js';
import { BarrierSenders } from './barrier-senders.js';
import { BroadcastStateStore } from './broadcast-state.js';
import { compileChain, nodesById, type CompiledChain } from './chain.js';
import { materializeEvery, PendingRows } from './changelog.js';
import { DeadLetterWriter } from './dead-letter-writer.js';
import { DirtySpill } from './dirty-spill.js';
import { InnerRecordMeta, type Unit } from './inner-packets.js';
import { KeyedStateCache, keyGroupOfKey } from './keyed-state.js';
import { OperatorStateStore } from './operator-state.js';
import { openDestinations, refreshDestinations } from './destinations.js';
import { Outbox } from './outbox.js';
import { PacketApplier, type PacketSteps } from './packet-apply.js';
import { mergeParents, type ParentHandover, type ParentShare } from './parent-handover.js';
import type { ReplayPoint, RuntimePorts, SnapshotPointer, SourceBarrier, StateRowId, StoredRecord } from './ports.js';
import { compareSeq } from './positions.js';
import { SourceBarrierPlan } from './source-barriers.js';
import { DEFAULT_MAX_IN_FLIGHT_RECORDS, SourceWindow } from './source-window.js';
import { RecordDedupe } from './record-dedupe.js';
import { SnapshotWriter, type SnapshotContent } from './snapshot-writer.js';
import { resolveUnits, StateLoader } from './state-prefetch.js';
import type { SourceFunctions } from './source-decoding.js';
import { SourceRecordReader, type SourceRecordFailure } from './source-records.js';
import { TimerIndex, type TimeDomain } from './timers.js';
import { WatermarkTracker } from './watermark-tracker.js';

export interface InstanceOptions {
  /** data envelopes of later epochs held in memory before the shard is re-read instead; @default 50_000 */
  readonly maxHeldRecords?: number;
  /** a source emits a watermark when it has advanced this much event time since the last one; @default 200 */
  readonly watermarkIntervalMs?: number;
}

/** What a stage's instances run on: the job, its plan and stage, the resources' names and the ports. */
export interface StageSpec {
  readonly job: Job;
  readonly plan: Plan;
  readonly stage: PlanStage;
  readonly names: ResourceNames;
  readonly ports: RuntimePorts;
  readonly options?: InstanceOptions;
}

export const instanceIdOf = (stageId: string, shardId: string) => `${stageId}:${shardId}`;

export class StageInstance {
  readonly id: string;
  fence = 0;
  /** last input position fully processed */
  lastPosition: string | undefined;
  /** current epoch = id of the last snapshot taken (0 before the first) */
  epoch = 0;
  /** records before this point are in the restored snapshot */
  skipThrough: ReplayPoint = { from: 'start' };
  readonly outbox: Outbox;
  readonly state = new KeyedStateCache();
  private chain!: CompiledChain;
  private readonly source: PlanSource | undefined;
  private readonly sourceNode: SourceFunctions | undefined;
  private readonly expectedProducers: (topology: readonly number[]) => number;
  /** an inner instance's: whose barriers of a checkpoint are all of them (source shards by hash range) */
  private readonly senders: BarrierSenders | undefined;
  private readonly dedupe = new RecordDedupe();
  private readonly barriers: BarrierHandler;
  private readonly watermarks: WatermarkTracker;
  private readonly timers = new TimerIndex();
  private readonly broadcastState = new BroadcastStateStore();
  private readonly operatorState = new OperatorStateStore();
  private readonly spill: DirtySpill;
  private readonly loader: StateLoader;
  private readonly pending: PendingRows; // rows snapshotted, not applied to the table yet (changelog.ts)
  private readonly snapshots: SnapshotWriter;
  private readonly deadLetters: DeadLetterWriter;
  private readonly recordMeta = new InnerRecordMeta();
  /** the inner packets' apply pass (packet-apply.ts); it keeps the frontier */
  private packets!: PacketApplier;
  /** stages whose input stream is resharded after the current epoch's checkpoint */
  private reshard: readonly number[] = [];
  /**
   * Set while this instance stands for a closed parent shard, replayed only to hand a child shard
   * its state: data envelopes of key groups the child does not own (0) are skipped.
   */
  private ownedKeyGroups: Uint8Array | undefined;
  private sourceWindow: SourceWindow | undefined;
  private sourceReader: SourceRecordReader | undefined;

  processingTime = 0;
  private readonly ended = new Set<string>();
  /** every input of this instance reached the end of a bounded input */
  finished = false;
  readonly stats = { recordsIn: 0, recordsOut: 0, duplicates: 0, held: 0, deadLetters: 0, snapshots: 0, spills: 0, timersFired: 0, dirtyKeysSpilled: 0 };

  constructor(
    private readonly job: Job,
    private readonly plan: Plan,
    private readonly stage: PlanStage,
    readonly shardId: string,
    private readonly names: ResourceNames,
    private readonly ports: RuntimePorts,
    options: InstanceOptions = {},
  ) {
    this.id = instanceIdOf(stage.id, shardId);
    this.outbox = new Outbox(this.id);
    this.barriers = createBarrierHandler(plan.mode, this.dedupe, options.maxHeldRecords ?? 50_000);
    this.spill = new DirtySpill(this.id, ports.spill);
    this.pending = new PendingRows(ports.state, materializeEvery(plan.checkpoint));
    this.loader = new StateLoader(this, this.state, this.pending, this.spill);
    this.snapshots = new SnapshotWriter(this.id, ports, this.outbox, this.state, this.spill, this.pending, this.stats);
    this.deadLetters = new DeadLetterWriter(this.id, plan, stage, shardId, ports, this.stats);
    let strategy: { maxOutOfOrdernessMs: number; idleTimeoutMs?: number } | undefined;
    if (stage.input.kind === 'source') {
      const sourceId = stage.input.sourceId;
      this.source = plan.sources.find((s) => s.id === sourceId);
      const node = nodesById(job).get(sourceId);
      this.sourceNode = node?.kind === 'source' ? (node as never) : undefined;
      strategy = node?.kind === 'source' ? node.watermarks : undefined;
      this.expectedProducers = () => 1;
      // only with barriers at the read position: a source holding back input never reads a tail barrier
      const barriers = ports.sourceBarriers;
      if (barriers && (plan.checkpoint.maxConcurrent ?? 1) === 1) {
        this.sourceWindow = new SourceWindow(plan.checkpoint.maxInFlightRecords ?? DEFAULT_MAX_IN_FLIGHT_RECORDS, (n) => barriers.crossed(n));
      }
    } else {
      const from = stage.input.fromStages.map((id) => plan.stages.findIndex((s) => s.id === id));
      const fallback = from.reduce((a, i) => a + plan.stages[i]!.parallelism, 0);
      this.expectedProducers = (topology) => (topology.length ? from.reduce((a, i) => a + (topology[i] ?? 0), 0) : fallback);
      this.senders = new BarrierSenders(plan, stage, names, ports.shards, ports.telemetry);
    }
    const send = (watermark: number, idle: boolean) => this.outbox.emitControl({ kind: 'watermark', epoch: this.epoch, watermark, idle });
    this.watermarks = new WatermarkTracker(send, strategy, options.watermarkIntervalMs ?? 200);
  }

  /** the instance's event-time watermark */
  get watermark(): number {
    return this.watermarks.watermark;
  }

  private expectedCount(): number {
    return this.expectedProducers(this.barriers.topology);
  }

  /** Looks up the shards of every stream this instance writes to and compiles the chain. */
  async init(): Promise<void> {
    await openDestinations(this.plan, this.stage, this.names, this.ports.shards, this.outbox);
    this.chain = compileChain(
      this.job,
      this.plan,
      this.stage,
      this.names,
      this.outbox,
      this.state,
      { processingTime: () => this.processingTime, watermark: () => this.watermarks.watermark },
      this.timers,
      this.broadcastState,
      this.operatorState,
    );
    this.state.now = () => this.processingTime;
    const steps: PacketSteps = {
      epoch: () => this.epoch,
      owned: () => this.ownedKeyGroups,
      apply: (unit) => this.apply(unit),
      applyUnit: (unit) => this.applyUnit(unit),
      align: () => this.alignLoop(),
    };
    const { chain, state, loader, barriers, senders, deadLetters, stats } = this;
    this.packets = new PacketApplier(steps, { chain, state, loader, barriers, senders, deadLetters, stats });
    if (this.source) this.sourceReader = new SourceRecordReader(this.shardId, this.source, this.sourceNode, this.chain.push, this.watermarks, this.stats);
  }

  /** Restores the snapshot a lease points to: redo its apply, chain folded in (idempotent), then start its epoch. */
  async restore(pointer: SnapshotPointer | undefined): Promise<void> {
    if (!pointer) return;
    // standing for a resharded parent: only the child's key groups (a sibling may have written past it)
    const extras = await this.pending.restore(this.ports.control, pointer, this.fence, this.ownedKeyGroups && ((g) => this.owns(g)));
    this.epoch = pointer.checkpointId;
    this.reshard = extras?.reshard ?? [];
    this.outbox.startEpoch(pointer.checkpointId, this.reshard);
    this.skipThrough = pointer.replayPoint;
    if (extras) {
      for (const [domain, operatorId, key, keyGroup, time] of extras.timers) if (this.owns(keyGroup)) this.timers.add({ domain, operatorId, key, keyGroup, time });
      this.watermarks.restore(extras);
      this.processingTime = extras.processingTime;
      for (const p of extras.ended ?? []) this.ended.add(p);
      this.finished = extras.finished ?? false;
      if (extras.broadcast) this.broadcastState.load(extras.broadcast);
      if (extras.operatorLists) this.operatorState.load(extras.operatorLists);
      // without it a restored instance would count producers by the plan's parallelism, which a
      // rescale has made stale: its watermark would advance before every producer spoke
      if (extras.topology) this.barriers.topology = extras.topology;
    }
  }

  /** Processes records of the input shard, in shard order. */
  async processRecords(records: readonly StoredRecord[]): Promise<void> {
    if (this.source) {
      // JSON or text decoded for the whole batch at once (records already read included: cheaper than picking them out)
      const texts = this.sourceReader!.texts(records);
      for (let i = 0; i < records.length; i++) {
        const r = records[i]!;
        if (this.lastPosition !== undefined && compareSeq(r.sequenceNumber, this.lastPosition) <= 0) continue;
        // a data record that needs no dead letter is read without a promise (source-records.ts)
        const failing = this.processSourceRecord(r, texts?.[i]);
        if (failing) await failing;
        this.lastPosition = r.sequenceNumber;
        const plan = this.barrierPlan;
        if (plan?.reaches(this.epoch, r.sequenceNumber)) await plan.forwardReached(() => this.epoch, r.sequenceNumber);
      }
      return;
    }
    const fresh: StoredRecord[] = [];
    for (const r of records) if (this.lastPosition === undefined || compareSeq(r.sequenceNumber, this.lastPosition) > 0) fresh.push(r);
    await this.processPackets(fresh, true);
  }

  /** Decodes and applies inner packets in order. */
  private async processPackets(records: readonly StoredRecord[], track: boolean): Promise<void> {
    for (let i = 0; i < records.length; i++) {
      await this.packets.apply(records, i);
      if (track) this.lastPosition = records[i]!.sequenceNumber;
    }
  }

  // ---------------------------------------------------------------- source stage

  private processSourceRecord(r: StoredRecord, text: string | undefined): Promise<void> | undefined {
    const control = decodeSourceControl(r.data);
    if (control) return this.processSourceControl(control, r.sequenceNumber);
    this.sourceWindow?.count();
    const failure = this.sourceReader!.read(r, undefined, text);
    return failure && this.deadLetterSourceRecords(r, failure);
  }

  /** Writes each failing user record's dead letter, resuming the record's reading after each. */
  private async deadLetterSourceRecords(r: StoredRecord, first: SourceRecordFailure): Promise<void> {
    for (let f: SourceRecordFailure | undefined = first; f; f = this.sourceReader!.read(r, f.resume)) {
      await this.deadLetters.record(r.sequenceNumber, f.index, f.bytes, f.reason);
    }
  }

  private async processSourceControl(control: SourceControl, sequenceNumber: string): Promise<void> {
    if (control.kind === 'barrier' && control.checkpointId > this.epoch) {
      // recorded first, then forwarded right after this record (processRecords) or at its earlier place
      if (this.barrierPlan) await this.barrierPlan.tailBarrier(this.epoch, this.fence, control, sequenceNumber);
      else await this.sourceBarrier(control, sequenceNumber);
    } else if (control.kind === 'tick') {
      this.sourceTick(control.time);
    } else if (control.kind === 'end') {
      this.watermarks.sourceEnded();
      this.outbox.emitControl({ kind: 'end', epoch: this.epoch });
      this.finished = true;
    }
  }

  /** Forwards barrier n right after the record `after` and snapshots. */
  private async sourceBarrier(b: SourceBarrier, after: string): Promise<void> {
    this.sourceTick(b.time);
    this.watermarks.emitSource(true);
    await this.snapshot(b.checkpointId, b.topology, b.savepoint, { from: 'after', sequenceNumber: after }, b.reshard);
    this.sourceWindow?.barrier(b.checkpointId);
  }

  /** The source's credit window (source-window.ts); not for a parent shard rebuilt for its child. */
  get window(): SourceWindow | undefined {
    return this.ownedKeyGroups === undefined ? this.sourceWindow : undefined;
  }

  /** Barriers at the read position (source-barriers.ts); not for a parent shard rebuilt for its child. */
  get barrierPlan(): SourceBarrierPlan | undefined {
    if (!this.source || !this.ports.sourceBarriers || this.ownedKeyGroups !== undefined) return undefined;
    return (this.placements ??= new SourceBarrierPlan(this.ports.sourceBarriers, this.id, (b, after) => this.sourceBarrier(b, after)));
  }
  private placements: SourceBarrierPlan | undefined;

  /** Where the source has read to: its last record, else the restored snapshot's position. */
  get readPosition(): string | undefined {
    return this.lastPosition ?? (this.skipThrough.from === 'after' ? this.skipThrough.sequenceNumber : undefined);
  }

  /** Processing time reaches a source through the barriers' coordinator time; it also decides idleness. */
  private sourceTick(time: number): void {
    if (time <= this.processingTime) return;
    this.processingTime = time;
    this.outbox.emitControl({ kind: 'tick', epoch: this.epoch, time });
    this.watermarks.sourceTick(time);
  }

  // ---------------------------------------------------------------- inner stages

  /** Decodes payloads and keys of units and loads the state rows they will touch. */
  private async prefetch(units: readonly Unit[]): Promise<void> {
    const ids: StateRowId[] = [];
    resolveUnits(units, ids, this.chain, this.state);
    if (ids.length) await this.loader.readMissing(ids);
  }

  private async applyUnit(unit: Unit): Promise<void> {
    const env = unit.env;
    if (env.kind === 'watermark') {
      this.watermarks.channel(unit.producer, env.watermark, env.idle);
      await this.advanceWatermark();
    } else if (env.kind === 'end') {
      // a bounded input ended upstream; once every producer ended, so does this instance
      this.ended.add(unit.producer);
      if (!this.finished && this.ended.size >= this.expectedCount()) {
        this.finished = true;
        this.outbox.emitControl({ kind: 'end', epoch: this.epoch });
      }
    } else if (env.kind === 'tick') {
      if (env.time > this.processingTime) {
        this.processingTime = env.time;
        await this.fireTimers('processing-time', env.time);
        this.outbox.emitControl({ kind: 'tick', epoch: this.epoch, time: env.time });
      }
    } else await this.apply(unit as Unit & { env: DataEnvelope });
  }

  private advanceWatermark(): Promise<void> {
    return this.watermarks.advance(this.expectedCount(), (wm) => this.fireTimers('event-time', wm));
  }

  private async fireTimers(domain: TimeDomain, upTo: number): Promise<void> {
    const due = this.timers.peekDue(domain, upTo);
    if (!due.length) return;
    // ids only for the keys not cached (a window's timers usually find theirs loaded)
    let ids: StateRowId[] | undefined;
    for (let i = 0; i < due.length; i++) {
      const t = due[i]!;
      // a timer that kept its key's entry (a window's) finds it cached while it is not dropped
      if (t.state !== undefined && !t.state.dropped) continue;
      if (!this.state.has(t.operatorId, t.key)) (ids ??= []).push({ operatorId: t.operatorId, keyGroup: t.keyGroup, key: t.key });
    }
    if (ids) await this.loader.load(this.state.missing(ids));
    for (let t = this.timers.popDue(domain, upTo); t; t = this.timers.popDue(domain, upTo)) {
      this.stats.timersFired++;
      // its key's state without a lookup (nothing drops entries while timers fire)
      const e = t.state;
      if (e !== undefined && !e.dropped) this.state.prime(t.operatorId, t.key, e);
      try {
        this.chain.fireTimer(t);
      } catch (err) {
        if (this.plan.poisonPolicy === 'fail') throw err;
        this.ports.telemetry.count('TimerFailures');
        await this.deadLetters.timer(t, err, this.packets.current ?? this.lastPosition ?? 'none');
      }
    }
  }

  /** Applies a data record of the current epoch; returns a promise only when it must wait (a dead letter). */
  private apply(unit: Unit & { env: DataEnvelope }): Promise<void> | undefined {
    const env = unit.env;
    if (!this.dedupe.admit(unit.producer, env.epoch, env.seq)) {
      this.stats.duplicates++;
      return undefined;
    }
    this.stats.recordsIn++;
    if (unit.poison !== undefined) {
      return this.deadLetters.record(unit.position, unit.index, env.payload, `cannot decode payload from ${unit.producer}: ${errorMessage(unit.poison)}`);
    }
    const key = unit.key;
    if (unit.state !== undefined) this.state.prime(this.chain.keyedOperators[0]!, key!, unit.state);
    const meta = this.recordMeta.set(
      env.timestamp,
      unit.producer,
      env.epoch,
      env.seq,
      key,
      key === undefined ? env.keyGroup : unit.state !== undefined ? unit.state.groupOfKey(key, this.plan.maxParallelism) : keyGroupOfKey(key, this.plan.maxParallelism),
      env.input ?? 0,
    );
    try {
      this.chain.push(unit.value, meta);
    } catch (err) {
      return this.deadLetters.record(unit.position, unit.index, env.payload, `user function failed: ${errorMessage(err)}`);
    }
    return undefined;
  }

  private async alignLoop(): Promise<void> {
    for (;;) {
      const n = this.epoch + 1;
      const cp = this.barriers.complete(n, this.senders!.allSent, this.packets.current!);
      if (!cp) return;
      // every producer barrier n must come from sent it: one that did not was a parent shard's
      // instance upstream, retired by a reshard — its last watermark must not hold ours back.
      // Dropped before the barrier goes on, so what it fires belongs to epoch n-1 (and replays alike).
      const retired = this.watermarks.retainChannels((p) => cp.producers.has(p));
      for (const p of [...this.ended]) if (!cp.producers.has(p)) this.ended.delete(p);
      if (retired) await this.advanceWatermark();
      const { info } = cp;
      await this.snapshot(n, info.topology, info.savepoint, { from: 'at', sequenceNumber: cp.replayFrom }, info.reshard);
      // forget what only older epochs needed
      this.dedupe.forgetBefore(n);
      // release epoch-n records held back
      const release = this.barriers.release(n);
      if (release.length) {
        await this.prefetch(release);
        for (const h of release) await this.applyUnit(h);
      }
      const overflow = this.barriers.takeOverflow();
      if (overflow !== undefined) await this.reread(overflow);
    }
  }

  /** Re-reads the shard from the first record past the hold bound up to the frontier (dedupe drops what was applied). */
  private async reread(from: string): Promise<void> {
    const frontier = this.packets.current!;
    const lastPosition = this.lastPosition;
    const stream = this.names.streamOf(this.stage);
    for await (const page of this.ports.reader.read(stream, this.shardId, { from: 'at', sequenceNumber: from }, frontier)) {
      await this.processPackets(page, false);
    }
    this.packets.current = frontier;
    this.lastPosition = lastPosition;
  }

  // ---------------------------------------------------------------- memory

  /**
   * Moves dirty keys beyond `keep` out of memory until the next snapshot (dirty state may
   * outgrow the function's memory). They are not committed anywhere: the snapshot reads them back
   * into its delta, and a key used before that is loaded back from the spill.
   */
  async spillDirty(keep: number): Promise<number> {
    if (!this.spill.enabled || this.ownedKeyGroups) return 0;
    const rows = this.state.takeDirty(this.state.dirtyCount - keep);
    if (!rows.length) return 0;
    await this.spill.put(rows, this.epoch, this.fence);
    this.stats.dirtyKeysSpilled += rows.length;
    this.ports.telemetry.count('DirtyKeysSpilled', rows.length);
    return rows.length;
  }

  // ---------------------------------------------------------------- resharding

  /**
   * Makes this instance stand for a closed parent shard, replayed only so that a child shard can take
   * over its state: data of key groups the child does not own is skipped, what it emits is dropped
   * by the caller (the parent wrote all of it before its shard closed), and it never snapshots.
   */
  standForChild(ownedKeyGroups: readonly number[]): void {
    const mask = new Uint8Array(this.plan.maxParallelism);
    for (const g of ownedKeyGroups) mask[g] = 1;
    this.ownedKeyGroups = mask;
  }

  /**
   * Whether this instance keeps key group g: always, unless it stands for a resharded parent. Then a
   * sibling child may already have snapshotted past the reshard, so a timer of the sibling's key
   * groups, fired in the parent's tail, would read rows written past this instance's epoch (and
   * fail every retry): the parent restores only the timers and rows of the child's key groups.
   */
  private owns(g: number): boolean {
    return !this.ownedKeyGroups || this.ownedKeyGroups[g] === 1;
  }

  /** What this instance, standing for a closed parent shard, hands its child (of the child's key groups). */
  handOver(): ParentHandover {
    return {
      id: this.id,
      epoch: this.epoch,
      settled: this.barriers.settled,
      reshard: this.reshard,
      generation: this.outbox.generation,
      topology: this.barriers.topology,
      processingTime: this.processingTime,
      finished: this.finished,
      broadcast: this.broadcastState.toJSON(),
      dirtyRows: this.state.dirtyRows().filter((r) => this.owns(r.keyGroup)),
      timers: this.timers.toJSON().filter(([, , , keyGroup]) => this.owns(keyGroup)),
      watermark: this.watermarks.handOver(this.source !== undefined),
      seen: this.dedupe.handOver(),
      ended: [...this.ended],
      operatorLists: this.operatorState.toJSON(),
    };
  }

  /** Starts a child shard's instance from its parents' handovers (see shard-inheritance.ts). */
  inherit(parents: readonly ParentShare[]): void {
    const s = mergeParents(this.id, parents, this.source ? { sourceStage: this.plan.stages.indexOf(this.stage) } : {});
    this.epoch = s.epoch;
    this.reshard = s.reshard;
    this.outbox.startEpoch(this.epoch, this.reshard);
    this.outbox.generation = s.generation;
    this.barriers.topology = s.topology;
    this.watermarks.adopt(s.watermarks);
    this.processingTime = s.processingTime;
    this.finished = s.finished;
    this.broadcastState.load(s.broadcast);
    for (const rows of s.dirtyRows) this.state.adoptDirty(rows);
    for (const [domain, operatorId, key, keyGroup, time] of s.timers) this.timers.add({ domain, operatorId, key, keyGroup, time });
    this.dedupe.adopt(s.seen);
    for (const e of s.ended) this.ended.add(e);
    this.operatorState.load(s.operatorLists);
  }

  // ---------------------------------------------------------------- snapshots

  private async snapshot(n: number, topology: readonly number[], savepoint: boolean, replayPoint: ReplayPoint, reshard: readonly number[] = []): Promise<void> {
    if (this.ownedKeyGroups) throw new SluiceError(`${this.id}: a barrier past the last snapshot of a resharded parent shard`, 'RESHARD_INVALID');
    const started = Date.now();
    // Every producer sends every barrier number, in order. A source child shard split off (outside
    // the job) after checkpoint k's barriers were put may never meet barrier k; it inherited epoch
    // k-1 from its parent and sends k here, counting its records of that epoch, before n (which
    // then counts none). An inner instance waits for k from it (barrier-senders.ts); k itself cannot
    // complete (the parent it expects never acks it), so k's flags here are n's topology and no more.
    for (let k = this.epoch + 1; k < n; k++) this.outbox.closeEpoch(k, topology, false);
    await refreshDestinations(this.id, this.plan, this.stage, this.names, this.ports, this.outbox, topology);
    this.outbox.closeEpoch(n, topology, savepoint, reshard);
    this.epoch = n;
    this.reshard = reshard;
    const cut = { checkpointId: n, fence: this.fence, replayPoint, readsTable: savepoint || reshard.length > 0 };
    await this.snapshots.write(cut, this.snapshotContent(topology, reshard), started);
  }

  /** What snapshot n holds besides the rows (snapshot-writer.ts reads it after the drain). */
  private snapshotContent(topology: readonly number[], reshard: readonly number[]): SnapshotContent {
    return {
      extras: () => {
        const time = this.watermarks.snapshot(this.source !== undefined);
        return {
          timers: this.timers.snapshotRows(),
          channels: time.channels,
          watermark: time.watermark,
          processingTime: this.processingTime,
          source: time.source,
          ended: [...this.ended],
          finished: this.finished,
          broadcast: this.broadcastState.toJSON(),
          operatorLists: this.operatorState.toJSON(),
          ...(reshard.length ? { reshard: [...reshard] } : {}),
          topology: [...topology],
        };
      },
      meta: () => ({ watermark: Number.isFinite(this.watermark) ? this.watermark : null, timers: this.timers.size, finished: this.finished }),
    };
  }

  /** Writes every pending output; resolves when all were accepted. */
  drain(): Promise<void> {
    return this.snapshots.drain();
  }

  /** Held records and pending barriers, for diagnostics. */
  describe(): Record<string, unknown> {
    return { id: this.id, epoch: this.epoch, lastPosition: this.lastPosition, ...this.barriers.describe() };
  }
}
