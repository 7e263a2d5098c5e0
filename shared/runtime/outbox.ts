/**
 * Everything an instance emits, buffered until it is flushed: data envelopes packed per destination
 * shard, barriers, and sink writes. Sequence numbers are counted per channel (this producer → one
 * shard, or → one sink) within an epoch, so a barrier can say how many data envelopes it closes and
 * a replay gives every output the same id.
 */
import type { Envelope } from '../codec/envelope.js';
import { MAX_WIRE_TIME, PacketBuilder } from '../codec/envelope.js';
import { hashKeyOfKeyGroup } from '../plan/key-groups.js';
import { SluiceError } from '../util/errors.js';
import type { OutgoingRecord, ShardInfo, StagedOutput, UpsertWrite } from './ports.js';

/** Kinesis takes 1 MiB per record; stay well below so a packet never needs splitting on retry. */
export const MAX_PACKET_BYTES = 512 * 1024;

export interface Destination {
  /** stream name */
  readonly stream: string;
  /** open shards of the stream, sorted by starting hash key */
  readonly shards: readonly ShardInfo[];
  /** key group → index into `shards` */
  readonly shardOfKeyGroup: Int32Array;
}

export function makeDestination(stream: string, shards: readonly ShardInfo[], maxParallelism: number): Destination {
  const sorted = [...shards].sort((a, b) => (BigInt(a.startingHashKey) < BigInt(b.startingHashKey) ? -1 : 1));
  const ranges = sorted.map((s) => [BigInt(s.startingHashKey), BigInt(s.endingHashKey)] as const);
  const shardOfKeyGroup = new Int32Array(maxParallelism);
  for (let g = 0; g < maxParallelism; g++) {
    const h = BigInt(hashKeyOfKeyGroup(g, maxParallelism));
    const i = ranges.findIndex(([lo, hi]) => h >= lo && h <= hi);
    if (i < 0) throw new Error(`no open shard of ${stream} covers key group ${g}`);
    shardOfKeyGroup[g] = i;
  }
  return { stream, shards: sorted, shardOfKeyGroup };
}

/** kinds of output a record holds until it succeeds */
const enum Staged {
  Keyed,
  Rebalance,
  Broadcast,
  Control,
  Upsert,
  Collect,
}

/**
 * An output's event time must be an integer the wire carries (MAX_WIRE_TIME). Checked where it is
 * emitted, so a record fails whole (undone, dead-lettered) instead of at its commit, when some of its
 * outputs would already be written, and no write fails on it later.
 */
function checkTimestamp(timestamp: number | undefined): void {
  if (timestamp === undefined || (Number.isInteger(timestamp) && timestamp <= MAX_WIRE_TIME && timestamp >= -MAX_WIRE_TIME)) return;
  throw new RangeError(`an output's event time must be a whole number of ms within ±${MAX_WIRE_TIME}, not ${timestamp}`);
}

interface Channel {
  readonly shardIndex: number;
  seq: number;
  builder: PacketBuilder | undefined;
  readonly done: Uint8Array[];
  /** control envelopes held for the flush's second wave (`DestinationBuffer.pushControl`) */
  deferred?: Envelope[];
}

/**
 * Routing of an epoch whose destination stream is about to be resharded: each packet carries one key
 * group and goes to that key group's own hash key, so it lands in the shard owning the key group in
 * the old layout and in the new one alike. Sequence numbers run over the whole destination (a
 * receiver may get several key groups of this producer), and each key group counts its envelopes so
 * that the barrier closing the epoch can tell every shard of the new layout what it should have got.
 */
class KeyGroupRouting {
  seq = 0;
  /** data envelopes sent to every key group (broadcasts): each shard receives them once */
  everywhere = 0;
  readonly counts: Int32Array;
  readonly groups: Channel[];
  readonly hashKeys: string[];
  /** control envelopes of the epoch, sent to every key group in the flush's second wave */
  readonly control: Envelope[] = [];
  constructor(maxParallelism: number) {
    this.counts = new Int32Array(maxParallelism);
    this.groups = Array.from({ length: maxParallelism }, (_, g) => ({ shardIndex: g, seq: 0, builder: undefined, done: [] }));
    this.hashKeys = Array.from({ length: maxParallelism }, (_, g) => hashKeyOfKeyGroup(g, maxParallelism));
  }
}

/** The routing's packets: the data of every key group, and (for the second wave) its control envelopes for each. */
function drainGroups(r: KeyGroupRouting, producer: string): { data: OutgoingRecord[]; control: OutgoingRecord[] } {
  const data: OutgoingRecord[] = [];
  const control: OutgoingRecord[] = [];
  for (let g = 0; g < r.groups.length; g++) {
    const c = r.groups[g]!;
    if (c.builder) {
      c.done.push(c.builder.finish());
      c.builder = undefined;
    }
    for (const packet of c.done) data.push({ hashKey: r.hashKeys[g]!, data: packet });
    c.done.length = 0;
    if (r.control.length) {
      const b = new PacketBuilder(producer);
      for (const e of r.control) b.add(e);
      control.push({ hashKey: r.hashKeys[g]!, data: b.finish() });
    }
  }
  r.control.length = 0;
  return { data, control };
}

class DestinationBuffer {
  channels: Channel[];
  /** round-robin cursor, reset every epoch so replay routes the same way */
  rr = 0;
  /** set for an epoch whose destination stream is resharded when the epoch's checkpoint completes */
  private routingOfEpoch: KeyGroupRouting | undefined;
  /** packets of a routing that ended with its epoch, not yet written: its data, then its control envelopes */
  private readonly leftoverData: OutgoingRecord[] = [];
  private readonly leftoverControl: OutgoingRecord[] = [];
  constructor(
    public dest: Destination,
    private readonly producer: string,
    /** the destination stage's number in the plan (barriers name resharded stages by number) */
    readonly stageIndex: number,
  ) {
    this.channels = dest.shards.map((_, i) => ({ shardIndex: i, seq: 0, builder: undefined, done: [] }));
  }

  get routing(): KeyGroupRouting | undefined {
    return this.routingOfEpoch;
  }

  set routing(next: KeyGroupRouting | undefined) {
    const r = this.routingOfEpoch;
    if (r) {
      const { data, control } = drainGroups(r, this.producer);
      this.leftoverData.push(...data);
      this.leftoverControl.push(...control);
    }
    this.routingOfEpoch = next;
  }

  /** Switches to the shards of a resharded stream (their channels start empty). */
  replace(dest: Destination): void {
    this.dest = dest;
    this.channels = dest.shards.map((_, i) => ({ shardIndex: i, seq: 0, builder: undefined, done: [] }));
  }

  push(channel: Channel, e: Envelope): void {
    let b = channel.builder;
    if (!b) channel.builder = b = new PacketBuilder(this.producer);
    b.add(e);
    if (b.size >= MAX_PACKET_BYTES) this.close(channel, b);
  }

  /** `push` of a data envelope, from its fields (no envelope object per output); its payload is payload[start, end). */
  pushData(channel: Channel, epoch: number, seq: number, keyGroup: number, timestamp: number | undefined, payload: Uint8Array, input: number, start: number, end: number): void {
    let b = channel.builder;
    if (!b) channel.builder = b = new PacketBuilder(this.producer);
    b.addData(epoch, seq, keyGroup, timestamp, payload, input, start, end);
    if (b.size >= MAX_PACKET_BYTES) this.close(channel, b);
  }

  private close(channel: Channel, b: PacketBuilder): void {
    channel.done.push(b.finish());
    channel.builder = undefined;
  }

  /** Barrier counts of the epoch that ends: per channel, or per shard of the (new) layout when routed by key group. */
  counts(): number[] {
    const r = this.routing;
    if (!r) return this.channels.map((c) => c.seq);
    const out = this.channels.map(() => r.everywhere);
    for (let g = 0; g < r.counts.length; g++) out[this.dest.shardOfKeyGroup[g]!]! += r.counts[g]!;
    return out;
  }

  /**
   * Control envelopes (watermarks, ticks, the end) to every channel. A watermark must not land in a
   * shard before data this producer emitted ahead of it, but a partial PutRecords failure lands the
   * refused entries of a call after the accepted ones. Within one packet order holds, so a control
   * envelope joins its channel's packet unless an earlier packet of the flush went to the same
   * shard: in an epoch routed by key group (a receiver holds several groups of this producer, one
   * watermark per producer) or once a flush outgrew a packet. Then it waits for the flush's second
   * wave, written after the first was accepted whole. Later never hurts: a watermark only holds
   * back less, and the receiver applies one of an older epoch as it comes.
   */
  pushControl(e: Envelope): void {
    const r = this.routingOfEpoch;
    if (r) {
      r.control.push(e);
      return;
    }
    for (const ch of this.channels) {
      if (ch.done.length) (ch.deferred ??= []).push(e);
      else this.push(ch, e);
    }
  }

  /**
   * The pending packets in two waves, the second written once the first was accepted whole: data and
   * barriers (key-group packets first), then the control envelopes held back (`pushControl`).
   * Barriers need no wave of their own: each counts the data it closes.
   */
  drain(): OutgoingRecord[][] {
    const first = this.leftoverData.splice(0);
    const second = this.leftoverControl.splice(0);
    if (this.routingOfEpoch) {
      const r = drainGroups(this.routingOfEpoch, this.producer);
      first.push(...r.data);
      second.push(...r.control);
    }
    for (const c of this.channels) {
      if (c.builder) {
        c.done.push(c.builder.finish());
        c.builder = undefined;
      }
      const hashKey = this.dest.shards[c.shardIndex]!.startingHashKey;
      for (const data of c.done) first.push({ hashKey, data });
      c.done.length = 0;
      if (c.deferred) {
        const b = new PacketBuilder(this.producer);
        for (const e of c.deferred) b.add(e);
        second.push({ hashKey, data: b.finish() });
        c.deferred = undefined;
      }
    }
    return [first, second].filter((w) => w.length > 0);
  }

  get pending(): number {
    let n = this.leftoverData.length + this.leftoverControl.length;
    for (const c of this.channels) n += c.done.length + (c.builder ? 1 : 0) + (c.deferred ? 1 : 0);
    const r = this.routingOfEpoch;
    if (r) for (const c of r.groups) n += c.done.length + (c.builder ? 1 : 0) + (r.control.length ? 1 : 0);
    return n;
  }
}

export interface SinkBuffers {
  upserts: UpsertWrite[];
  collected: StagedOutput[];
}

export class Outbox {
  private readonly dests = new Map<string, DestinationBuffer>();
  private readonly sinkSeq = new Map<string, number>();
  private readonly upserts = new Map<string, { table: string; keyAttribute: string; writes: UpsertWrite[] }>();
  private readonly collected = new Map<string, StagedOutput[]>();
  // the destination of the last emit: a record's outputs mostly go to one
  private lastStage: string | undefined;
  private lastDest: DestinationBuffer | undefined;
  epoch = 0;
  dataOut = 0;
  /** see UpsertWrite.generation; back to 0 at every epoch */
  generation = 0;
  /**
   * While a record is applied, what it emits waits here (flat: a kind, then its arguments) and goes
   * out only when the record succeeds: a record whose function throws emits nothing, and takes no
   * sequence number (a replay that skips it numbers the rest the same).
   */
  private staging = false;
  // reused: filled up to `stagedLength` (setting an array's length to 0 would drop its storage)
  private readonly staged: unknown[] = [];
  private stagedLength = 0;

  private stage8(a: unknown, b: unknown, c: unknown, d: unknown, e: unknown, f: unknown, g: unknown, h: unknown): void {
    const st = this.staged;
    const n = this.stagedLength;
    st[n] = a;
    st[n + 1] = b;
    st[n + 2] = c;
    st[n + 3] = d;
    st[n + 4] = e;
    st[n + 5] = f;
    st[n + 6] = g;
    st[n + 7] = h;
    this.stagedLength = n + 8;
  }

  constructor(readonly producer: string) {}

  /** Starts a record: its outputs are held until `commitRecord`. */
  beginRecord(): void {
    this.staging = true;
  }

  /** The record was applied whole: its outputs go out, in the order it emitted them. */
  commitRecord(): void {
    this.staging = false;
    const st = this.staged;
    const n = this.stagedLength;
    if (n === 0) return;
    this.stagedLength = 0;
    for (let i = 0; i < n; ) {
      switch (st[i] as Staged) {
        case Staged.Keyed:
          this.emitKeyed(st[i + 1] as string, st[i + 2] as number, st[i + 3] as number | undefined, st[i + 4] as Uint8Array, st[i + 5] as number, st[i + 6] as number, st[i + 7] as number);
          i += 8;
          break;
        case Staged.Rebalance:
          this.emitRebalance(st[i + 1] as string, st[i + 2] as number | undefined, st[i + 3] as Uint8Array, st[i + 4] as number, st[i + 5] as number, st[i + 6] as number);
          i += 8;
          break;
        case Staged.Broadcast:
          this.emitBroadcast(st[i + 1] as string, st[i + 2] as number | undefined, st[i + 3] as Uint8Array, st[i + 4] as number);
          i += 8;
          break;
        case Staged.Control:
          this.emitControl(st[i + 1] as Envelope);
          i += 8;
          break;
        case Staged.Upsert:
          this.upsert(st[i + 1] as string, st[i + 2] as string, st[i + 3] as string, st[i + 4] as string, st[i + 5] as Record<string, unknown>);
          i += 8;
          break;
        case Staged.Collect:
          this.collect(st[i + 1] as string, st[i + 2]);
          i += 8;
          break;
      }
    }
  }

  /** The record failed: what it emitted is dropped. */
  rollbackRecord(): void {
    this.staging = false;
    this.stagedLength = 0;
  }

  addDestination(toStage: string, dest: Destination, stageIndex = -1): void {
    this.dests.set(toStage, new DestinationBuffer(dest, this.producer, stageIndex));
    this.lastStage = this.lastDest = undefined;
  }

  private dest(toStage: string): DestinationBuffer {
    if (toStage === this.lastStage) return this.lastDest!;
    const d = this.dests.get(toStage)!;
    this.lastStage = toStage;
    this.lastDest = d;
    return d;
  }

  /**
   * Points a destination at its stream's new shards (after a reshard). Only an epoch routed by key
   * group can switch: its barrier counts do not depend on the layout the records were sent to.
   */
  replaceDestination(toStage: string, dest: Destination): void {
    const d = this.dests.get(toStage);
    if (!d) throw new Error(`${this.producer} has no destination for stage ${toStage}`);
    if (!d.routing && d.channels.some((c) => c.seq > 0)) {
      throw new SluiceError(
        `${this.producer}: the stream of stage ${toStage} was resharded while records were routed by its old shards; reshard inner streams only with \`sluice rescale --in-place\``,
        'RESHARD_UNCOORDINATED',
      );
    }
    d.replace(dest);
  }

  destination(toStage: string): Destination {
    const d = this.dests.get(toStage);
    if (!d) throw new Error(`${this.producer} has no destination for stage ${toStage}`);
    return d.dest;
  }

  /**
   * Emits a data envelope to the shard owning `keyGroup`. Its sequence number and the barrier's
   * counts move only once the envelope is written: one that cannot be (a bad field) leaves no gap a
   * next stage would wait for at the barrier.
   */
  emitKeyed(toStage: string, keyGroup: number, timestamp: number | undefined, payload: Uint8Array, input = 0, start = 0, end = payload.length): void {
    checkTimestamp(timestamp);
    if (this.staging) {
      this.stage8(Staged.Keyed, toStage, keyGroup, timestamp, payload, input, start, end);
      return;
    }
    const d = this.dest(toStage);
    const r = d.routing;
    if (r) {
      d.pushData(r.groups[keyGroup]!, this.epoch, r.seq, keyGroup, timestamp, payload, input, start, end);
      r.counts[keyGroup]!++;
      r.seq++;
      this.dataOut++;
      return;
    }
    const ch = d.channels[d.dest.shardOfKeyGroup[keyGroup]!]!;
    d.pushData(ch, this.epoch, ch.seq, keyGroup, timestamp, payload, input, start, end);
    ch.seq++;
    this.dataOut++;
  }

  /** Emits a data envelope to the next shard in round-robin order. */
  emitRebalance(toStage: string, timestamp: number | undefined, payload: Uint8Array, input = 0, start = 0, end = payload.length): void {
    checkTimestamp(timestamp);
    if (this.staging) {
      this.stage8(Staged.Rebalance, toStage, timestamp, payload, input, start, end, undefined);
      return;
    }
    const d = this.dest(toStage);
    const r = d.routing;
    const i = d.rr;
    if (r) {
      // round robin over key groups: whichever shard owns the group applies the record
      d.pushData(r.groups[i]!, this.epoch, r.seq, i, timestamp, payload, input, start, end);
      d.rr = (i + 1) % r.groups.length;
      r.counts[i]!++;
      r.seq++;
      this.dataOut++;
      return;
    }
    const ch = d.channels[i]!;
    d.pushData(ch, this.epoch, ch.seq, 0, timestamp, payload, input, start, end);
    d.rr = (i + 1) % d.channels.length;
    ch.seq++;
    this.dataOut++;
  }

  /** Emits a data envelope to every shard. */
  emitBroadcast(toStage: string, timestamp: number | undefined, payload: Uint8Array, input = 0): void {
    checkTimestamp(timestamp);
    if (this.staging) {
      this.stage8(Staged.Broadcast, toStage, timestamp, payload, input, undefined, undefined, undefined);
      return;
    }
    const d = this.dest(toStage);
    const r = d.routing;
    if (r) {
      // one sequence number for every copy: a shard holding several key groups applies it once
      const seq = r.seq++;
      r.everywhere++;
      for (let g = 0; g < r.groups.length; g++) d.pushData(r.groups[g]!, this.epoch, seq, g, timestamp, payload, input, 0, payload.length);
      this.dataOut++;
      return;
    }
    for (const ch of d.channels) d.pushData(ch, this.epoch, ch.seq++, 0, timestamp, payload, input, 0, payload.length);
    this.dataOut += d.channels.length;
  }

  /** Sends a control envelope (watermark, tick, end) to every shard of every destination. */
  emitControl(e: Envelope): void {
    if (this.staging) {
      this.stage8(Staged.Control, e, undefined, undefined, undefined, undefined, undefined, undefined);
      return;
    }
    for (const d of this.dests.values()) d.pushControl(e);
  }

  private nextSinkSeq(sink: string): number {
    const s = this.sinkSeq.get(sink) ?? 0;
    this.sinkSeq.set(sink, s + 1);
    return s;
  }

  upsert(sink: string, table: string, keyAttribute: string, key: string, item: Record<string, unknown>): void {
    if (this.staging) {
      this.stage8(Staged.Upsert, sink, table, keyAttribute, key, item, undefined, undefined);
      return;
    }
    let u = this.upserts.get(sink);
    if (!u) this.upserts.set(sink, (u = { table, keyAttribute, writes: [] }));
    const seq = this.nextSinkSeq(sink);
    u.writes.push(this.generation ? { key, item, producer: this.producer, epoch: this.epoch, seq, generation: this.generation } : { key, item, producer: this.producer, epoch: this.epoch, seq });
  }

  collect(sink: string, value: unknown): void {
    if (this.staging) {
      this.stage8(Staged.Collect, sink, value, undefined, undefined, undefined, undefined, undefined);
      return;
    }
    let c = this.collected.get(sink);
    if (!c) this.collected.set(sink, (c = []));
    c.push({ producer: this.producer, epoch: this.epoch, seq: this.nextSinkSeq(sink), value });
  }

  /**
   * Closes the current epoch on every channel with barrier n (carrying each channel's count) and
   * starts epoch n: sequence numbers and round-robin cursors restart. `reshard` names the stages
   * whose streams are resharded after checkpoint n: epoch n routes to them by key group.
   */
  closeEpoch(checkpointId: number, topology: readonly number[], savepoint: boolean, reshard: readonly number[] = []): void {
    for (const d of this.dests.values()) {
      const counts = d.counts();
      d.channels.forEach((ch, i) => d.push(ch, reshard.length ? { kind: 'barrier', checkpointId, count: counts[i]!, topology, savepoint, reshard } : { kind: 'barrier', checkpointId, count: counts[i]!, topology, savepoint }));
    }
    this.startEpoch(checkpointId, reshard);
  }

  /** Sets the epoch after a restore (no barrier is sent: the snapshot's barrier was sent before it was made). */
  startEpoch(epoch: number, reshard: readonly number[] = []): void {
    this.epoch = epoch;
    this.generation = 0;
    this.sinkSeq.clear();
    for (const d of this.dests.values()) {
      d.rr = 0;
      for (const ch of d.channels) ch.seq = 0;
      // a routing's unsent packets were taken by the drain before the barrier
      d.routing = reshard.includes(d.stageIndex) ? new KeyGroupRouting(d.dest.shardOfKeyGroup.length) : undefined;
    }
  }

  /** Drops everything pending (a parent instance replayed only to hand its state to a child emits nothing). */
  discard(): void {
    this.take();
  }

  /** Takes everything pending, grouped for writing; a stream's records come in waves (`DestinationBuffer.drain`). */
  take(): { records: Array<{ stream: string; waves: OutgoingRecord[][] }>; upserts: Array<{ table: string; keyAttribute: string; writes: UpsertWrite[] }>; collected: Array<{ sink: string; outputs: StagedOutput[] }> } {
    const records: Array<{ stream: string; waves: OutgoingRecord[][] }> = [];
    for (const d of this.dests.values()) {
      const waves = d.drain();
      if (waves.length) records.push({ stream: d.dest.stream, waves });
    }
    const upserts = [...this.upserts.values()].filter((u) => u.writes.length);
    this.upserts.clear();
    const collected = [...this.collected].filter(([, o]) => o.length).map(([sink, outputs]) => ({ sink, outputs }));
    this.collected.clear();
    return { records, upserts, collected };
  }

  get pending(): number {
    let n = 0;
    for (const d of this.dests.values()) n += d.pending;
    for (const u of this.upserts.values()) n += u.writes.length;
    for (const c of this.collected.values()) n += c.length;
    return n;
  }
}
