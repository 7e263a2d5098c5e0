/**
 * The outbox's destinations: a next stage's stream, its shards and the channel (this producer →
 * one shard) each holds, with the channel's open and finished packets; an epoch routed by key group
 * (a reshard's); and what a channel notes at a record's first write to it, so that a record that
 * fails can take back what it wrote (`takeBack`).
 */
import type { Envelope } from '../codec/envelope.js';
import { PacketBuilder } from '../codec/envelope.js';
import { hashKeyOfKeyGroup } from '../plan/key-groups.js';
import type { OutgoingRecord, ShardInfo } from './ports.js';

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

export interface Channel {
  readonly shardIndex: number;
  seq: number;
  builder: PacketBuilder | undefined;
  readonly done: Uint8Array[];
  /** control envelopes held for the flush's second wave (`DestinationBuffer.pushControl`) */
  deferred?: Envelope[];
  /**
   * the record (`Outbox.record`) that last wrote here, and what it found at its first write: the
   * channel's seq, its open packet (marked), its packets done and its destination's round-robin cursor
   */
  rec: number;
  recSeq: number;
  recBuilder: PacketBuilder | undefined;
  recDone: number;
  recRr: number;
}

export const newChannel = (shardIndex: number): Channel => ({ shardIndex, seq: 0, builder: undefined, done: [], rec: 0, recSeq: 0, recBuilder: undefined, recDone: 0, recRr: 0 });

/** Takes back what the record that `enter`ed the channel wrote to it, packets it closed included. */
export function takeBack(ch: Channel): void {
  ch.seq = ch.recSeq;
  const b = ch.recBuilder;
  const open = ch.builder;
  if (open !== undefined && open !== b) open.discard(); // opened by the record
  ch.builder = undefined;
  let done = ch.recDone;
  if (b !== undefined) {
    if (ch.done.length === done) {
      b.rewind();
      ch.builder = b;
    } else {
      // the record filled the packet it found, which was closed: cut back to what it held
      const cut = b.finishedAtMark(ch.done[done]!);
      if (cut !== undefined) ch.done[done++] = cut;
    }
  }
  ch.done.length = done;
}

/** Ends the channel's open packet. */
export function closeChannel(channel: Channel, b: PacketBuilder): void {
  channel.done.push(b.finish());
  channel.builder = undefined;
}

/**
 * Routing of an epoch whose destination stream is about to be resharded: each packet carries one key
 * group and goes to that key group's own hash key, so it lands in the shard owning the key group in
 * the old layout and in the new one alike. Sequence numbers run over the whole destination (a
 * receiver may get several key groups of this producer), and each key group counts its envelopes so
 * that the barrier closing the epoch can tell every shard of the new layout what it should have got.
 */
export class KeyGroupRouting {
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
    this.groups = Array.from({ length: maxParallelism }, (_, g) => newChannel(g));
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

export class DestinationBuffer {
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
    this.channels = dest.shards.map((_, i) => newChannel(i));
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
    this.channels = dest.shards.map((_, i) => newChannel(i));
  }

  push(channel: Channel, e: Envelope): void {
    let b = channel.builder;
    if (!b) channel.builder = b = new PacketBuilder(this.producer);
    b.add(e);
    if (b.size >= MAX_PACKET_BYTES) closeChannel(channel, b);
  }

  /** `push` of a data envelope, from its fields (no envelope object per output). */
  pushData(channel: Channel, epoch: number, seq: number, keyGroup: number, timestamp: number | undefined, payload: Uint8Array, input: number): void {
    let b = channel.builder;
    if (!b) channel.builder = b = new PacketBuilder(this.producer);
    b.addData(epoch, seq, keyGroup, timestamp, payload, input);
    if (b.size >= MAX_PACKET_BYTES) closeChannel(channel, b);
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
