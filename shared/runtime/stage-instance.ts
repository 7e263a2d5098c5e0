/**
 * One parallel instance of a stage (one shard of its input stream), as cached in an execution
 * environment. It applies input records to its chain and keyed state, aligns checkpoint barriers,
 * and takes snapshots. The protocol it follows:
 *
 * - Epochs. Records a producer emits between forwarding barrier n and barrier n+1 belong to epoch
 *   n. Snapshot n holds exactly the effects of input records of epoch < n.
 * - Alignment (inner stages). Snapshot n is taken once barrier n arrived from every upstream
 *   instance *and* every record each barrier counts was applied (a PutRecords retry can land a
 *   record after its barrier). Records of a later epoch are held back meanwhile, in memory up to a
 *   bound; past it, their position is remembered and they are re-read from the shard afterwards.
 * - Order of a snapshot. Forward barrier n and get every pending output accepted, then make the
 *   snapshot durable (delta, then the lease's pointer, fenced), then apply rows, then ack.
 * - Replay point. Every record not in the snapshot can be re-read from it: for a source shard,
 *   just after barrier n; for an inner shard, the earliest of the held records, of later barriers
 *   seen, and of the record being processed.
 * - Dedupe. Inner records are identified by (producer, epoch, seq) and deduplicated by set
 *   membership (a channel is not ordered); records of an epoch below the instance's are dropped.
 *   Source records are deduplicated by shard position.
 */
import type { Job } from '../api/job.js';
import { decodePacketViews, decodeSourceControl, PacketDataEnvelope, SeqSet, type DataEnvelope, type EndEnvelope, type Envelope, type TickEnvelope, type WatermarkEnvelope } from '../codec/envelope.js';
import { decodePayload, decodePayloadAt } from '../codec/payload.js';
import { decodeDelta, encodeDelta, type SourceClock } from '../codec/snapshot.js';
import { keyString } from '../plan/key-groups.js';
import type { Plan, PlanSource, PlanStage } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import { errorMessage, FencedError, PoisonRecordError, SluiceError } from '../util/errors.js';
import { compileChain, nodesById, type CompiledChain, type RecordMeta } from './chain.js';
import { compareRows, KeyedStateCache, keyGroupOfKey, type KeyEntry } from './keyed-state.js';
import { makeDestination, Outbox } from './outbox.js';
import type { ReplayPoint, RuntimePorts, SnapshotPointer, StateRow, StateRowId, StoredRecord } from './ports.js';
import { compareSeq } from './positions.js';
import { TimerIndex, type TimeDomain } from './timers.js';
import { BroadcastStateStore } from './broadcast-state.js';
import { OperatorStateStore, redistributeOperatorLists, type OperatorListRow } from './operator-state.js';
import { decodeUserRecord, userRecordsOf } from './source-decoding.js';

export interface InstanceOptions {
  /** data envelopes of later epochs held in memory before the shard is re-read instead; @default 50_000 */
  readonly maxHeldRecords?: number;
  /** a source emits a watermark when it has advanced this much event time since the last one; @default 200 */
  readonly watermarkIntervalMs?: number;
}

/** The final watermark, sent at the end of a bounded input: it fires every window. */
export const MAX_WATERMARK = 2 ** 51; // far beyond any event time, and still a safe zig-zag varint

/** One envelope of an inner stage that belongs to an epoch (data, watermark, tick). */
interface Unit {
  readonly position: string;
  readonly index: number;
  readonly producer: string;
  readonly env: DataEnvelope | WatermarkEnvelope | TickEnvelope | EndEnvelope;
  value?: unknown;
  key?: string;
  poison?: unknown;
  /** the first keyed operator's state entry of `key`, as prefetch found it loaded */
  state?: KeyEntry;
}

interface DecodedPacket {
  readonly producer: string;
  readonly envelopes: readonly Envelope[];
  /** data envelopes of the current epoch or later, in packet order */
  readonly units: Unit[];
  /** set when the record is not a readable packet */
  readonly error?: unknown;
}

interface BarrierInfo {
  readonly count: number;
  readonly topology: readonly number[];
  readonly savepoint: boolean;
  readonly reshard: readonly number[] | undefined;
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
  private readonly stageIndex: number;
  private readonly source: PlanSource | undefined;
  private readonly sourceNode: { parse?: (raw: unknown) => unknown; timestamp?: (v: unknown) => number } | undefined;
  private readonly expectedProducers: (topology: readonly number[]) => number;
  private readonly maxHeld: number;

  // inner-stage alignment state
  private readonly barriers = new Map<number, Map<string, BarrierInfo>>();
  private readonly received = new Map<string, number>();
  private readonly seen = new Map<string, Set<number>>();
  private held: Unit[] = [];
  private readonly heldIds = new Set<string>();
  private futureBarriers: Array<{ n: number; position: string }> = [];
  /** last watermark per upstream producer, and whether it said it is idle */
  private readonly channels = new Map<string, { wm: number; idle: boolean }>();
  private readonly timers = new TimerIndex();
  private readonly broadcastState = new BroadcastStateStore();
  /** `mode: 'at-least-once'`: barriers are tracked, not aligned */
  private readonly atLeastOnce: boolean;
  private readonly operatorState = new OperatorStateStore();
  private sourceClock: SourceClock = { maxTs: Number.NEGATIVE_INFINITY, emitted: Number.NEGATIVE_INFINITY, idle: false, lastActive: 0, dataSinceTick: false };
  private readonly watermarkIntervalMs: number;
  private readonly watermarkStrategy: { maxOutOfOrdernessMs: number; idleTimeoutMs?: number } | undefined;
  private readonly expectedCount: () => number;
  private lastTopology: readonly number[] = [];
  private spilledFrom: string | undefined;
  // apply's memory: the channel key of the last record
  private lastChannel = '';
  private lastChannelProducer: string | undefined;
  private lastChannelEpoch = -1;
  private lastChannelSeen: Set<number> | undefined;
  private readonly recordMeta = new InnerRecordMeta();
  /** position of the record being processed (the frontier) */
  private current: string | undefined;
  /** stages whose input stream is resharded after the current epoch's checkpoint */
  private reshard: readonly number[] = [];
  /**
   * Set while this instance stands for a closed parent shard, replayed only to hand a child shard
   * its state: data envelopes of key groups the child does not own (0) are skipped.
   */
  private ownedKeyGroups: Uint8Array | undefined;
  /** failed timers dead-lettered at the current record (their letters' sub-sequences) */
  private timerLetters: { at: string; n: number } = { at: '', n: 0 };
  /** dirty keys moved to the spill store since the last snapshot: operator\0key → part */
  private readonly spilled = new Map<string, string>();
  private spillParts = 0;

  processingTime = 0;
  watermark = Number.NEGATIVE_INFINITY;
  private reportedOut = 0;
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
    this.atLeastOnce = plan.mode === 'at-least-once';
    this.outbox = new Outbox(this.id);
    this.stageIndex = plan.stages.indexOf(stage);
    this.maxHeld = options.maxHeldRecords ?? 50_000;
    this.watermarkIntervalMs = options.watermarkIntervalMs ?? 200;
    this.expectedCount = () => this.expectedProducers(this.lastTopology);
    if (stage.input.kind === 'source') {
      const sourceId = stage.input.sourceId;
      this.source = plan.sources.find((s) => s.id === sourceId);
      const node = nodesById(job).get(sourceId);
      this.sourceNode = node?.kind === 'source' ? (node as never) : undefined;
      this.watermarkStrategy = node?.kind === 'source' ? node.watermarks : undefined;
      this.expectedProducers = () => 1;
    } else {
      this.watermarkStrategy = undefined;
      const from = stage.input.fromStages.map((id) => plan.stages.findIndex((s) => s.id === id));
      const fallback = from.reduce((a, i) => a + plan.stages[i]!.parallelism, 0);
      this.expectedProducers = (topology) => (topology.length ? from.reduce((a, i) => a + (topology[i] ?? 0), 0) : fallback);
    }
  }

  /** Looks up the shards of every stream this instance writes to and compiles the chain. */
  async init(): Promise<void> {
    for (const op of this.stage.operators) {
      if (!op.exchange) continue;
      const target = this.plan.stages.find((s) => s.id === op.exchange!.toStage)!;
      const stream = this.names.streamOf(target);
      const shards = await this.ports.shards.openShards(stream);
      this.outbox.addDestination(target.id, makeDestination(stream, shards, this.plan.maxParallelism), this.plan.stages.indexOf(target));
    }
    this.chain = compileChain(
      this.job,
      this.plan,
      this.stage,
      this.names,
      this.outbox,
      this.state,
      { processingTime: () => this.processingTime, watermark: () => this.watermark },
      this.timers,
      this.broadcastState,
      this.operatorState,
    );
    this.state.now = () => this.processingTime;
  }

  /** Restores the snapshot a lease points to: redo its apply (idempotent), then start its epoch. */
  async restore(pointer: SnapshotPointer | undefined): Promise<void> {
    if (!pointer) return;
    const { rows, extras } = decodeDelta(await this.ports.control.readDelta(pointer.delta));
    // standing for a resharded parent: only the child's key groups (a sibling may have written past it)
    await this.ports.state.applyRows(pointer.checkpointId, this.fence, this.ownedKeyGroups ? rows.filter((r) => this.owns(r.keyGroup)) : rows);
    this.epoch = pointer.checkpointId;
    this.reshard = extras?.reshard ?? [];
    this.outbox.startEpoch(pointer.checkpointId, this.reshard);
    this.skipThrough = pointer.replayPoint;
    if (extras) {
      for (const [domain, operatorId, key, keyGroup, time] of extras.timers) if (this.owns(keyGroup)) this.timers.add({ domain, operatorId, key, keyGroup, time });
      for (const [p, wm, idle] of extras.channels) this.channels.set(p, { wm, idle });
      this.watermark = extras.watermark ?? Number.NEGATIVE_INFINITY;
      this.processingTime = extras.processingTime;
      if (extras.source) this.sourceClock = { ...extras.source };
      for (const p of extras.ended ?? []) this.ended.add(p);
      this.finished = extras.finished ?? false;
      if (extras.broadcast) this.broadcastState.load(extras.broadcast);
      if (extras.operatorLists) this.operatorState.load(extras.operatorLists);
      // without it a restored instance would count producers by the plan's parallelism, which a
      // rescale has made stale: its watermark would advance before every producer spoke
      if (extras.topology) this.lastTopology = extras.topology;
    }
  }

  /** Processes records of the input shard, in shard order. */
  async processRecords(records: readonly StoredRecord[]): Promise<void> {
    if (this.source) {
      for (const r of records) {
        if (this.lastPosition !== undefined && compareSeq(r.sequenceNumber, this.lastPosition) <= 0) continue;
        await this.processSourceRecord(r);
        this.lastPosition = r.sequenceNumber;
      }
      return;
    }
    const fresh: StoredRecord[] = [];
    for (const r of records) if (this.lastPosition === undefined || compareSeq(r.sequenceNumber, this.lastPosition) > 0) fresh.push(r);
    await this.processPackets(fresh, true);
  }

  /**
   * Decodes and applies inner packets in order. While every key a packet touches is cached, the
   * packet is applied right after its decode: its values are still in the CPU's caches and die
   * young. The first packet with a key not cached decodes the rest of the records too, so that the
   * missing rows of all of them are read together, then applies them in order (a cold cache after a
   * takeover reads its keys in a few concurrent reads instead of one per packet).
   */
  private async processPackets(records: readonly StoredRecord[], track: boolean): Promise<void> {
    const ids: StateRowId[] = [];
    for (let i = 0; i < records.length; i++) {
      const r = records[i]!;
      const p = this.decodeInner(r);
      this.resolveUnits(p.units, ids);
      if (!ids.length) {
        await this.processPacket(r, p);
        if (track) this.lastPosition = r.sequenceNumber;
        continue;
      }
      const packets: DecodedPacket[] = [p];
      for (let j = i + 1; j < records.length; j++) {
        const q = this.decodeInner(records[j]!);
        this.resolveUnits(q.units, ids);
        packets.push(q);
      }
      await this.readMissing(ids);
      ids.length = 0;
      for (let j = 0; j < packets.length; j++) {
        const rj = records[i + j]!;
        await this.processPacket(rj, packets[j]!);
        // what a packet decoded is garbage once it is applied (held units are kept by `held`)
        packets[j] = EMPTY_PACKET;
        if (track) this.lastPosition = rj.sequenceNumber;
      }
      return;
    }
  }

  // ---------------------------------------------------------------- source stage

  private async processSourceRecord(r: StoredRecord): Promise<void> {
    const control = decodeSourceControl(r.data);
    if (control) {
      if (control.kind === 'barrier' && control.checkpointId > this.epoch) {
        this.sourceTick(control.time);
        this.emitSourceWatermark(true);
        await this.snapshot(control.checkpointId, control.topology, control.savepoint, { from: 'after', sequenceNumber: r.sequenceNumber }, control.reshard);
      } else if (control.kind === 'tick') {
        this.sourceTick(control.time);
      } else if (control.kind === 'end') {
        this.sourceClock.maxTs = MAX_WATERMARK;
        this.watermark = MAX_WATERMARK;
        this.emitWatermark(MAX_WATERMARK, false);
        this.outbox.emitControl({ kind: 'end', epoch: this.epoch });
        this.finished = true;
      }
      return;
    }
    const src = this.source!;
    let userRecords: Uint8Array[];
    try {
      userRecords = userRecordsOf(r.data, r.sequenceNumber, r.partitionKey, src.deaggregate);
    } catch (err) {
      await this.poison(r.sequenceNumber, 0, r.data, `cannot de-aggregate KPL record: ${errorMessage(err)}`);
      return;
    }
    for (let i = 0; i < userRecords.length; i++) {
      const bytes = userRecords[i]!;
      this.stats.recordsIn++;
      let value: unknown;
      let timestamp: number | undefined;
      try {
        value = decodeUserRecord(bytes, src.format);
        if (this.sourceNode?.parse) value = this.sourceNode.parse(value);
        if (this.sourceNode?.timestamp) {
          const ts = this.sourceNode.timestamp(value);
          if (typeof ts !== 'number' || !Number.isFinite(ts)) throw new Error(`the timestamp function returned ${String(ts)}, not a finite number of ms`);
          timestamp = Math.floor(ts); // event time is whole milliseconds, as in Flink
        } else timestamp = r.approximateArrivalTimestamp;
      } catch (err) {
        await this.poison(r.sequenceNumber, i, bytes, `cannot decode ${src.format} record: ${errorMessage(err)}`);
        continue;
      }
      const meta: RecordMeta = { timestamp, recordId: `${this.shardId}:${r.sequenceNumber}:${i}`, key: undefined, keyGroup: 0 };
      try {
        this.chain.push(value, meta);
      } catch (err) {
        await this.poison(r.sequenceNumber, i, bytes, `user function failed: ${errorMessage(err)}`);
        continue;
      }
      const c = this.sourceClock;
      c.dataSinceTick = true;
      if (c.idle) {
        // active again: rejoin the downstream minimum with the current watermark
        c.idle = false;
        this.emitSourceWatermark(true);
      }
      if (timestamp !== undefined && this.watermarkStrategy && timestamp > c.maxTs) {
        c.maxTs = timestamp;
        this.emitSourceWatermark(false);
      }
    }
  }

  /** Processing time reaches a source through the barriers' coordinator time; it also decides idleness. */
  private sourceTick(time: number): void {
    if (time <= this.processingTime) return;
    this.processingTime = time;
    this.outbox.emitControl({ kind: 'tick', epoch: this.epoch, time });
    const c = this.sourceClock;
    const idleAfter = this.watermarkStrategy?.idleTimeoutMs;
    if (c.dataSinceTick || c.lastActive === 0) c.lastActive = time;
    c.dataSinceTick = false;
    if (idleAfter !== undefined && !c.idle && time - c.lastActive >= idleAfter) {
      c.idle = true;
      this.emitWatermark(this.watermark, true);
    }
  }

  /** Emits the source's watermark if it moved by the interval (or at all, when `force`). */
  private emitSourceWatermark(force: boolean): void {
    const strategy = this.watermarkStrategy;
    const c = this.sourceClock;
    if (!strategy || c.maxTs === Number.NEGATIVE_INFINITY || c.idle) return;
    const wm = c.maxTs === MAX_WATERMARK ? MAX_WATERMARK : c.maxTs - strategy.maxOutOfOrdernessMs - 1;
    if (wm <= c.emitted) return;
    if (!force && wm < c.emitted + this.watermarkIntervalMs) return;
    c.emitted = wm;
    this.watermark = wm;
    this.emitWatermark(wm, false);
  }

  private emitWatermark(wm: number, idle: boolean): void {
    if (!Number.isFinite(wm) && !idle) return;
    this.outbox.emitControl({ kind: 'watermark', epoch: this.epoch, watermark: Number.isFinite(wm) ? wm : 0, idle });
  }

  // ---------------------------------------------------------------- inner stages

  private decodeInner(r: StoredRecord): DecodedPacket {
    try {
      const p = decodePacketViews(r.data, makeDataUnit);
      const units: Unit[] = [];
      const envelopes = p.envelopes;
      const owned = this.ownedKeyGroups;
      for (let index = 0; index < envelopes.length; index++) {
        const env = envelopes[index]!;
        if (owned !== undefined && env.kind === 'data' && owned[env.keyGroup] !== 1) continue;
        if (env.kind !== 'barrier' && (env.epoch >= this.epoch || this.atLeastOnce)) {
          if (env instanceof DataUnit) {
            // a data envelope is its own unit
            env.position = r.sequenceNumber;
            env.index = index;
            env.producer = p.producer;
            units.push(env);
          } else units.push({ position: r.sequenceNumber, index, producer: p.producer, env, value: undefined, key: undefined, poison: undefined, state: undefined });
        }
      }
      return { producer: p.producer, envelopes, units };
    } catch (error) {
      return { producer: '', envelopes: [], units: [], error };
    }
  }

  /** Decodes payloads and keys of units and loads the state rows they will touch. */
  private async prefetch(units: readonly Unit[]): Promise<void> {
    const ids: StateRowId[] = [];
    this.resolveUnits(units, ids);
    if (ids.length) await this.readMissing(ids);
  }

  /**
   * Decodes the payloads and keys of units not decoded yet, points each at its first keyed
   * operator's cached entry, and adds the (operator, key)s not cached to `ids` (some may repeat).
   */
  private resolveUnits(units: readonly Unit[], ids: StateRowId[]): void {
    const selectors = this.chain.keySelectors;
    const ops = this.chain.keyedOperators;
    const state = this.state;
    for (let i = 0; i < units.length; i++) {
      const u = units[i]!;
      const env = u.env;
      if (env.kind !== 'data') continue;
      if (u.value !== undefined || u.poison !== undefined) {
        const key = u.key;
        if (key === undefined) continue;
        u.state = undefined;
        for (let o = 0; o < ops.length; o++) {
          const e = state.lookup(ops[o]!, key);
          if (!e) ids.push({ operatorId: ops[o]!, keyGroup: env.keyGroup, key });
          else if (o === 0) u.state = e;
        }
        continue;
      }
      try {
        u.value = env instanceof PacketDataEnvelope ? decodePayloadAt(env.packet, env.payloadStart, env.payloadEnd) : decodePayload(env.payload);
        const selector = selectors[env.input ?? 0];
        if (selector) {
          const key = (u.key = keyString(selector(u.value)));
          for (let o = 0; o < ops.length; o++) {
            const e = state.lookup(ops[o]!, key);
            if (!e) ids.push({ operatorId: ops[o]!, keyGroup: env.keyGroup, key });
            else if (o === 0) {
              u.state = e;
              // the cache's copy of the key: later lookups of it (state, timers) match by identity
              u.key = e.key;
            }
          }
        }
      } catch (err) {
        u.poison = err;
      }
    }
  }

  /** Reads the rows of `ids` that are still not cached (duplicates are read once). */
  private async readMissing(ids: readonly StateRowId[]): Promise<void> {
    const missing = this.state.missing(ids);
    if (missing.length <= PREFETCH_CHUNK) {
      await this.loadRows(missing);
      return;
    }
    // many keys to read (a cold cache: after a takeover, or a burst of new keys): read them in
    // chunks of a BatchGetItem's size, several at a time, instead of one chunk after another
    const chunks: StateRowId[][] = [];
    for (let i = 0; i < missing.length; i += PREFETCH_CHUNK) chunks.push(missing.slice(i, i + PREFETCH_CHUNK));
    let next = 0;
    const worker = async () => {
      while (next < chunks.length) await this.loadRows(chunks[next++]!);
    };
    await Promise.all(Array.from({ length: Math.min(PREFETCH_CONCURRENCY, chunks.length) }, worker));
  }

  /**
   * Loads state rows into the cache. A row written by a checkpoint above this instance's epoch
   * means another owner has moved on (this invocation is a zombie): computing with it would emit
   * other content under ids already used, so the batch stops here.
   */
  private async loadRows(missing: StateRowId[]): Promise<void> {
    if (this.spilled.size && missing.length) {
      // a key spilled since the last snapshot comes back from the spill, still dirty
      const back = missing.filter((id) => this.spilled.has(rowTag(id)));
      if (back.length) {
        this.state.adoptDirty(await this.readSpilled(back));
        for (const id of back) this.spilled.delete(rowTag(id));
        missing = missing.filter((id) => !this.state.has(id.operatorId, id.key));
      }
    }
    if (!missing.length) return;
    const rows = await this.ports.state.getRows(missing);
    for (const r of rows) {
      if (r.checkpointId !== undefined && r.checkpointId > this.epoch) {
        throw new FencedError(`${this.id}: state row ${r.operatorId}/${r.key} was written by checkpoint ${r.checkpointId}, past this instance's epoch ${this.epoch}`);
      }
    }
    this.state.load(missing, rows);
  }

  private async processPacket(r: StoredRecord, p: DecodedPacket): Promise<void> {
    this.current = r.sequenceNumber;
    if (p.error !== undefined) {
      await this.poison(r.sequenceNumber, 0, r.data, `malformed packet: ${errorMessage(p.error)}`);
      return;
    }
    let u = 0;
    for (let index = 0; index < p.envelopes.length; index++) {
      const env = p.envelopes[index]!;
      if (env.kind === 'barrier') {
        if (env.checkpointId <= this.epoch) continue;
        let bs = this.barriers.get(env.checkpointId);
        if (!bs) this.barriers.set(env.checkpointId, (bs = new Map()));
        if (!bs.has(p.producer)) bs.set(p.producer, { count: env.count, topology: env.topology, savepoint: env.savepoint, reshard: env.reshard });
        if (env.checkpointId > this.epoch + 1) this.futureBarriers.push({ n: env.checkpointId, position: r.sequenceNumber });
        await this.alignLoop();
        continue;
      }
      // already in the snapshot (at-least-once: never drop, a late record is applied after all)
      if (env.kind === 'data' && env.epoch < this.epoch && !this.atLeastOnce) continue;
      // units were built for data envelopes of epoch ≥ the epoch at decode time, in order
      let unit = p.units[u];
      while (unit && unit.index < index) unit = p.units[++u];
      if (!unit || unit.index !== index) continue;
      u++;
      // at-least-once does not align: nothing is held back, so a snapshot may include records of
      // the next epoch, which a restore then replays again (duplicates, never losses)
      if (env.epoch > this.epoch && !this.atLeastOnce) this.hold(unit);
      else if (env.kind === 'data') {
        // data applies synchronously; only a dead letter makes it wait
        const pending = this.apply(unit as Unit & { env: DataEnvelope });
        if (pending) await pending;
      } else await this.applyUnit(unit);
      // a count satisfied by this record can complete an alignment
      if (this.barriers.has(this.epoch + 1)) await this.alignLoop();
    }
  }

  private hold(unit: Unit): void {
    const id = unitId(unit);
    if (this.heldIds.has(id)) return;
    if (this.held.length >= this.maxHeld) {
      // the log is the overflow buffer: re-read from here after the next snapshot
      if (this.spilledFrom === undefined || compareSeq(unit.position, this.spilledFrom) < 0) this.spilledFrom = unit.position;
      this.stats.spills++;
      return;
    }
    this.heldIds.add(id);
    this.held.push(unit);
    this.stats.held++;
  }

  private async applyUnit(unit: Unit): Promise<void> {
    const env = unit.env;
    if (env.kind === 'watermark') {
      this.channels.set(unit.producer, { wm: env.watermark, idle: env.idle });
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

  /** The operator's watermark is the minimum over its active input channels; it never goes back. */
  private async advanceWatermark(): Promise<void> {
    let min = Number.POSITIVE_INFINITY;
    let active = 0;
    for (const c of this.channels.values()) {
      if (c.idle) continue;
      active++;
      if (c.wm < min) min = c.wm;
    }
    const idleAll = active === 0 && this.channels.size >= this.expectedCount();
    if (!idleAll && this.channels.size < this.expectedCount()) return; // some producer has not spoken yet
    if (idleAll) {
      this.emitWatermark(this.watermark, true);
      return;
    }
    if (min <= this.watermark) return;
    this.watermark = min;
    await this.fireTimers('event-time', min);
    this.emitWatermark(min, false);
  }

  private async fireTimers(domain: TimeDomain, upTo: number): Promise<void> {
    const due = this.timers.peekDue(domain, upTo);
    if (!due.length) return;
    // ids only for the keys not cached (a window's timers usually find theirs loaded)
    let ids: StateRowId[] | undefined;
    for (let i = 0; i < due.length; i++) {
      const t = due[i]!;
      if (!this.state.has(t.operatorId, t.key)) (ids ??= []).push({ operatorId: t.operatorId, keyGroup: t.keyGroup, key: t.key });
    }
    if (ids) await this.loadRows(this.state.missing(ids));
    for (let t = this.timers.popDue(domain, upTo); t; t = this.timers.popDue(domain, upTo)) {
      this.stats.timersFired++;
      try {
        this.chain.fireTimer(t);
      } catch (err) {
        if (this.plan.poisonPolicy === 'fail') throw err;
        this.ports.telemetry.count('TimerFailures');
        await this.poisonTimer(t, err);
      }
    }
  }

  /** Applies a data record of the current epoch; returns a promise only when it must wait (a dead letter). */
  private apply(unit: Unit & { env: DataEnvelope }): Promise<void> | undefined {
    const env = unit.env;
    // the channel's key and dedupe set, remembered while consecutive records share producer and
    // epoch (sets are only dropped for epochs below the instance's, which never apply again)
    let ch = this.lastChannel;
    let seen = this.lastChannelSeen;
    if (unit.producer !== this.lastChannelProducer || env.epoch !== this.lastChannelEpoch || seen === undefined) {
      ch = this.lastChannel = `${unit.producer}|${env.epoch}`;
      this.lastChannelProducer = unit.producer;
      this.lastChannelEpoch = env.epoch;
      seen = this.seen.get(ch);
      if (!seen) this.seen.set(ch, (seen = new SeqSet()));
      this.lastChannelSeen = seen;
    }
    if (seen.has(env.seq)) {
      this.stats.duplicates++;
      return undefined;
    }
    seen.add(env.seq);
    this.received.set(ch, (this.received.get(ch) ?? 0) + 1);
    this.stats.recordsIn++;
    if (unit.poison !== undefined) {
      return this.poison(unit.position, unit.index, env.payload, `cannot decode payload from ${unit.producer}: ${errorMessage(unit.poison)}`);
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
      return this.poison(unit.position, unit.index, env.payload, `user function failed: ${errorMessage(err)}`);
    }
    return undefined;
  }

  private canAlign(): boolean {
    const n = this.epoch + 1;
    const bs = this.barriers.get(n);
    if (!bs) return false;
    const first = bs.values().next().value as BarrierInfo;
    this.lastTopology = first.topology;
    if (bs.size < this.expectedProducers(first.topology)) return false;
    if (this.atLeastOnce) return true;
    for (const [producer, b] of bs) if ((this.received.get(`${producer}|${n - 1}`) ?? 0) < b.count) return false;
    return true;
  }

  private async alignLoop(): Promise<void> {
    while (this.canAlign()) {
      const n = this.epoch + 1;
      const bs = this.barriers.get(n)!;
      const info = bs.values().next().value as BarrierInfo;
      let rp = this.current!;
      for (const h of this.held) if (compareSeq(h.position, rp) < 0) rp = h.position;
      for (const f of this.futureBarriers) if (f.n > n && compareSeq(f.position, rp) < 0) rp = f.position;
      if (this.spilledFrom !== undefined && compareSeq(this.spilledFrom, rp) < 0) rp = this.spilledFrom;
      this.barriers.delete(n);
      this.futureBarriers = this.futureBarriers.filter((f) => f.n > n);
      // every producer of the checkpoint's topology sent barrier n: one that did not was a parent
      // shard's instance upstream, retired by a reshard — its last watermark must not hold ours back.
      // Dropped before the barrier goes on, so what it fires belongs to epoch n-1 (and replays alike).
      const retired = [...this.channels.keys()].filter((p) => !bs.has(p));
      for (const p of retired) this.channels.delete(p);
      for (const p of [...this.ended]) if (!bs.has(p)) this.ended.delete(p);
      if (retired.length) await this.advanceWatermark();
      await this.snapshot(n, info.topology, info.savepoint, { from: 'at', sequenceNumber: rp }, info.reshard);
      // forget what only older epochs needed
      for (const k of [...this.seen.keys()]) if (Number(k.slice(k.lastIndexOf('|') + 1)) < n) this.seen.delete(k);
      for (const k of [...this.received.keys()]) if (Number(k.slice(k.lastIndexOf('|') + 1)) < n) this.received.delete(k);
      // release epoch-n records; later epochs stay held (an abort lets epochs overlap)
      const release = this.held.filter((h) => h.env.epoch === n);
      if (release.length) {
        this.held = this.held.filter((h) => h.env.epoch !== n);
        for (const h of release) this.heldIds.delete(unitId(h));
        release.sort((a, b) => compareSeq(a.position, b.position) || a.index - b.index);
        await this.prefetch(release);
        for (const h of release) await this.applyUnit(h);
      }
      if (this.spilledFrom !== undefined) await this.rereadSpilled();
    }
  }

  /** Re-reads the shard from the first spilled record up to the frontier (dedupe drops what was applied). */
  private async rereadSpilled(): Promise<void> {
    const from = this.spilledFrom!;
    const frontier = this.current!;
    const lastPosition = this.lastPosition;
    this.spilledFrom = undefined;
    const stream = this.names.streamOf(this.stage);
    for await (const page of this.ports.reader.read(stream, this.shardId, { from: 'at', sequenceNumber: from }, frontier)) {
      await this.processPackets(page, false);
    }
    this.current = frontier;
    this.lastPosition = lastPosition;
  }

  // ---------------------------------------------------------------- memory

  /**
   * Moves dirty keys beyond `keep` out of memory until the next snapshot (DESIGN: dirty state may
   * outgrow the function's memory). They are not committed anywhere: the snapshot reads them back
   * into its delta, and a key used before that is loaded back from the spill.
   */
  async spillDirty(keep: number): Promise<number> {
    const spill = this.ports.spill;
    if (!spill || this.ownedKeyGroups) return 0;
    const rows = this.state.takeDirty(this.state.dirtyCount - keep);
    if (!rows.length) return 0;
    const part = `${this.epoch}-${this.spillParts++}`;
    await spill.put(this.id, this.fence, part, encodeDelta(rows));
    for (const r of rows) this.spilled.set(rowTag(r), part);
    this.stats.dirtyKeysSpilled += rows.length;
    this.ports.telemetry.count('DirtyKeysSpilled', rows.length);
    return rows.length;
  }

  /** The spilled rows of `ids` (every spilled row when absent), each from the part that holds its latest value. */
  private async readSpilled(ids?: readonly StateRowId[]): Promise<StateRow[]> {
    const wanted = ids ? new Map(ids.map((id) => [rowTag(id), this.spilled.get(rowTag(id))!])) : this.spilled;
    const byPart = new Map<string, Set<string>>();
    for (const [tag, part] of wanted) {
      let tags = byPart.get(part);
      if (!tags) byPart.set(part, (tags = new Set()));
      tags.add(tag);
    }
    const out: StateRow[] = [];
    for (const [part, tags] of byPart) {
      const { rows } = decodeDelta(await this.ports.spill!.get(this.id, this.fence, part));
      for (const r of rows) if (tags.has(rowTag(r))) out.push(r);
    }
    return out;
  }

  // ---------------------------------------------------------------- resharding

  /**
   * A barrier's topology announces a destination stream with another number of shards (it was
   * resharded after the previous checkpoint): forward the barrier to the new shards. The coordinator
   * injects the barrier only once the reshard is done, so ListShards already shows them.
   */
  private async refreshDestinations(topology: readonly number[]): Promise<void> {
    for (const op of this.stage.operators) {
      if (!op.exchange) continue;
      const target = this.plan.stages.find((s) => s.id === op.exchange!.toStage)!;
      const want = topology[this.plan.stages.indexOf(target)];
      if (!want || this.outbox.destination(target.id).shards.length === want) continue;
      const stream = this.names.streamOf(target);
      let shards = await this.ports.shards.openShards(stream);
      for (let attempt = 0; shards.length !== want && attempt < 20; attempt++) {
        await new Promise((r) => setTimeout(r, 250));
        shards = await this.ports.shards.openShards(stream);
      }
      if (shards.length !== want) {
        throw new SluiceError(`${this.id}: ${stream} has ${shards.length} open shards, checkpoint topology says ${want}`, 'TOPOLOGY_MISMATCH', true);
      }
      this.outbox.replaceDestination(target.id, makeDestination(stream, shards, this.plan.maxParallelism));
      this.ports.telemetry.log('info', 'destination resharded: barriers and records go to its new shards', { instance: this.id, stream, shards: shards.length });
    }
  }

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

  /**
   * Starts a child shard's instance from its parents, each restored and replayed to the end of its
   * closed shard (see standForChild). Streams are resharded only at a checkpoint boundary, so every
   * parent is in the same epoch with nothing held back; the child goes on with that epoch as a new
   * producer. Keyed state, timers and dedupe sets come from the key groups the child owns; operator
   * lists are dealt out by their mode; broadcast state is the same everywhere.
   */
  adoptParents(parents: ReadonlyArray<{ readonly instance: StageInstance; readonly childIndex: number; readonly children: number }>): void {
    const first = parents[0]!.instance;
    for (const { instance: p } of parents) {
      if (p.epoch !== first.epoch) {
        throw new SluiceError(`${this.id}: parent shards are in epochs ${first.epoch} and ${p.epoch}; a stream is resharded only at a checkpoint boundary`, 'RESHARD_INVALID');
      }
      if (p.held.length || p.barriers.size || p.spilledFrom !== undefined) {
        throw new SluiceError(`${this.id}: parent ${p.id} was still aligning a checkpoint when its shard closed`, 'RESHARD_INVALID');
      }
    }
    this.epoch = first.epoch;
    this.reshard = first.reshard;
    this.outbox.startEpoch(this.epoch, this.reshard);
    // the rest of this epoch's upserts outrank whatever a parent wrote (or a zombie of it writes late)
    this.outbox.generation = 1 + Math.max(...parents.map((p) => p.instance.outbox.generation));
    this.lastTopology = first.lastTopology;
    this.watermark = Math.min(...parents.map((p) => p.instance.watermark));
    this.processingTime = Math.max(...parents.map((p) => p.instance.processingTime));
    this.finished = parents.every((p) => p.instance.finished);
    this.broadcastState.load(first.broadcastState.toJSON());
    const shares: OperatorListRow[][] = [];
    for (const { instance: p, childIndex, children } of parents) {
      this.state.adoptDirty(p.state.dirtyRows().filter((r) => p.owns(r.keyGroup)));
      for (const [domain, operatorId, key, keyGroup, time] of p.timers.toJSON()) {
        if (p.owns(keyGroup)) this.timers.add({ domain, operatorId, key, keyGroup, time });
      }
      for (const [producer, c] of p.channels) {
        const mine = this.channels.get(producer);
        this.channels.set(producer, mine ? { wm: Math.min(mine.wm, c.wm), idle: mine.idle && c.idle } : { ...c });
      }
      for (const [channel, seqs] of p.seen) {
        let mine = this.seen.get(channel);
        if (!mine) this.seen.set(channel, (mine = new SeqSet()));
        for (const q of seqs) mine.add(q);
      }
      for (const e of p.ended) this.ended.add(e);
      shares.push(redistributeOperatorLists([p.operatorState.toJSON()], children)[childIndex]!);
      if (this.source) {
        // a merged source claims no more event time than the slower parent did
        const c = p.sourceClock;
        const mine = this.sourceClock;
        this.sourceClock =
          p === first
            ? { ...c }
            : { maxTs: Math.min(mine.maxTs, c.maxTs), emitted: Math.min(mine.emitted, c.emitted), idle: mine.idle && c.idle, lastActive: Math.max(mine.lastActive, c.lastActive), dataSinceTick: mine.dataSinceTick || c.dataSinceTick };
      }
    }
    // a channel's count is the number of distinct records it delivered
    for (const [channel, seqs] of this.seen) this.received.set(channel, seqs.size);
    this.operatorState.load(redistributeOperatorLists(shares, 1)[0]!);
    this.lastChannelSeen = undefined;
  }

  // ---------------------------------------------------------------- snapshots

  private async snapshot(n: number, topology: readonly number[], savepoint: boolean, replayPoint: ReplayPoint, reshard: readonly number[] = []): Promise<void> {
    if (this.ownedKeyGroups) throw new SluiceError(`${this.id}: a barrier past the last snapshot of a resharded parent shard`, 'RESHARD_INVALID');
    const started = Date.now();
    await this.refreshDestinations(topology);
    this.outbox.closeEpoch(n, topology, savepoint, reshard);
    this.epoch = n;
    this.reshard = reshard;
    // the barrier and everything before it must be accepted downstream before the snapshot is durable
    await this.drain();
    let rows = this.state.dirtyRows();
    if (this.spilled.size) rows = rows.concat(await this.readSpilled()).sort(compareRows);
    const delta = encodeDelta(rows, {
      timers: this.timers.toJSON(),
      channels: [...this.channels].map(([p, c]) => [p, c.wm, c.idle]),
      watermark: Number.isFinite(this.watermark) ? this.watermark : null,
      processingTime: this.processingTime,
      source: this.source ? { ...this.sourceClock } : null,
      ended: [...this.ended],
      finished: this.finished,
      broadcast: this.broadcastState.toJSON(),
      operatorLists: this.operatorState.toJSON(),
      ...(reshard.length ? { reshard: [...reshard] } : {}),
      topology: [...topology],
    });
    const ref = await this.ports.control.writeDelta(this.id, n, delta);
    await this.ports.control.publishSnapshot(this.id, this.fence, {
      checkpointId: n,
      replayPoint,
      delta: ref,
      // bytes and keys flushed: the coordinator copies them into the checkpoint's record at commit
      meta: { watermark: Number.isFinite(this.watermark) ? this.watermark : null, timers: this.timers.size, bytes: delta.length, keys: rows.length, finished: this.finished },
    });
    await this.ports.state.applyRows(n, this.fence, rows);
    this.state.markClean();
    if (this.spilled.size) {
      this.spilled.clear();
      await this.ports.spill!.drop(this.id, this.fence);
    }
    this.stats.snapshots++;
    const t = this.ports.telemetry;
    t.count('CheckpointKeys', rows.length);
    t.count('CheckpointBytes', delta.length);
    t.timing('CheckpointDurationMs', Date.now() - started);
    const ack = await this.ports.control.ack(n, this.id);
    if (ack.completedBy && ack.taskToken) await this.ports.notifier.succeed(ack.taskToken, { checkpointId: n });
  }

  /** Writes every pending output; resolves when all were accepted. */
  async drain(): Promise<void> {
    if (!this.outbox.pending) return;
    const { records, upserts, collected } = this.outbox.take();
    for (const r of records) this.stats.recordsOut += r.records.length;
    this.ports.telemetry.count('RecordsOut', this.outbox.dataOut - this.reportedOut);
    this.reportedOut = this.outbox.dataOut;
    await Promise.all([
      ...records.map((r) => this.ports.writer.putAll(r.stream, r.records)),
      ...upserts.map((u) => this.ports.upsertSink.write(u.table, u.keyAttribute, u.writes)),
      ...collected.map((c) => this.ports.collectSink.stage(c.sink, c.outputs)),
    ]);
  }

  private async poison(sequenceNumber: string, subSequence: number, data: Uint8Array, reason: string): Promise<void> {
    if (this.plan.poisonPolicy === 'fail') {
      throw new PoisonRecordError(`${this.id} record ${sequenceNumber}#${subSequence}: ${reason}`);
    }
    this.stats.deadLetters++;
    this.ports.telemetry.count('DeadLetters');
    this.ports.telemetry.log('warn', 'record sent to the dead letters', { instance: this.id, sequenceNumber, subSequence, reason });
    await this.ports.deadLetters.put({
      job: this.plan.job,
      stage: this.stage.id,
      shardId: this.shardId,
      sequenceNumber,
      subSequence,
      reason,
      data,
    });
  }

  /**
   * A timer whose callback threw (dead-letter policy) goes to the dead letters like a record: its
   * operator, key, key group, domain and time, filed under the position of the record that made it
   * due (a replay fires it at the same record, so it rewrites the same letter) with a negative
   * sub-sequence (records use theirs from 0 on). The DeadLetters counter (alarmed) counts it.
   */
  private async poisonTimer(t: { domain: TimeDomain; operatorId: string; key: string; keyGroup: number; time: number }, err: unknown): Promise<void> {
    const at = this.current ?? this.lastPosition ?? 'none';
    this.timerLetters = this.timerLetters.at === at ? { at, n: this.timerLetters.n + 1 } : { at, n: 1 };
    const data = new TextEncoder().encode(JSON.stringify({ timer: { domain: t.domain, operatorId: t.operatorId, key: t.key, keyGroup: t.keyGroup, time: t.time } }));
    await this.poison(at, -this.timerLetters.n, data, `timer callback failed (operator ${t.operatorId}, key ${JSON.stringify(t.key)}, ${t.domain} timer at ${t.time}): ${errorMessage(err)}`);
  }

  /** Held records and pending barriers, for diagnostics. */
  describe(): Record<string, unknown> {
    return {
      id: this.id,
      epoch: this.epoch,
      lastPosition: this.lastPosition,
      held: this.held.length,
      waitingBarriers: [...this.barriers].map(([n, m]) => `${n}:${[...m.keys()].join(',')}`),
    };
  }
}

/** An inner record's meta: its id (which seeds `ctx.random()`) is only spelled out when asked for. */
/**
 * The meta of the inner record being applied. One per instance, pointed at each record in turn:
 * the chain uses a meta only while the record is pushed (contexts are valid only during the call;
 * windows and timers copy what they keep). Its id (which seeds `ctx.random()`) is only spelled out
 * when asked for.
 */
class InnerRecordMeta implements RecordMeta {
  timestamp: number | undefined = undefined;
  key: string | undefined = undefined;
  keyGroup = 0;
  input = 0;
  private producer = '';
  private epoch = 0;
  private seq = 0;
  set(timestamp: number | undefined, producer: string, epoch: number, seq: number, key: string | undefined, keyGroup: number, input: number): this {
    this.timestamp = timestamp;
    this.producer = producer;
    this.epoch = epoch;
    this.seq = seq;
    this.key = key;
    this.keyGroup = keyGroup;
    this.input = input;
    return this;
  }
  get recordId(): string {
    return `${this.producer}/${this.epoch}/${this.seq}`;
  }
}

/**
 * A data envelope of an inner packet that is its own unit: decoding makes one object per record
 * instead of an envelope and a unit around it.
 */
class DataUnit extends PacketDataEnvelope implements Unit {
  position = '';
  index = 0;
  producer = '';
  readonly env: DataEnvelope = this;
  value: unknown = undefined;
  key: string | undefined = undefined;
  poison: unknown = undefined;
  state: KeyEntry | undefined = undefined;
}

/** keys per state read (a BatchGetItem takes 100), and reads in flight at once */
const PREFETCH_CHUNK = 100;
const PREFETCH_CONCURRENCY = 8;

const EMPTY_PACKET: DecodedPacket = { producer: '', envelopes: [], units: [] };

const makeDataUnit = (epoch: number, seq: number, keyGroup: number, timestamp: number | undefined, packet: Uint8Array, start: number, end: number, input: number | undefined) =>
  new DataUnit(epoch, seq, keyGroup, timestamp, packet, start, end, input);

const unitId = (u: Unit) => `${u.producer}|${u.env.kind}|${u.env.epoch}|${u.env.kind === 'data' ? u.env.seq : `${u.position}/${u.index}`}`;

const rowTag = (id: StateRowId) => `${id.operatorId}\u0000${id.key}`;
