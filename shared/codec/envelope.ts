/**
 * The stage-to-stage wire format. Every record between stages is an envelope (data, barrier,
 * watermark, tick or end) identified by (producer, epoch, seq); many envelopes from one producer to
 * one shard are packed into one Kinesis record (a packet), so the 1,000 records/s per-shard limit
 * becomes a bytes limit. Packing may differ between a run and its replay; envelope ids and contents
 * may not.
 *
 * Packet layout: magic 0x53 0x01, producer (varint length + UTF-8), envelope count, envelopes.
 * An envelope starts with one header byte: kind in the low 3 bits, then flags that let a data
 * envelope drop its epoch (same as the previous one) and its seq (previous + 1), so a data
 * envelope costs about 5–7 bytes besides its payload.
 */
import { ByteReader, ByteWriter } from './varint.js';

export type Envelope = DataEnvelope | BarrierEnvelope | WatermarkEnvelope | TickEnvelope | EndEnvelope;

export interface DataEnvelope {
  readonly kind: 'data';
  readonly epoch: number;
  /** sequence number on the channel (producer → this shard) within the epoch */
  readonly seq: number;
  readonly keyGroup: number;
  /** event time, ms since the epoch */
  readonly timestamp: number | undefined;
  readonly payload: Uint8Array;
  /** which input of a multi-input operator (connect, joins) the record feeds; absent = 0 */
  readonly input?: number;
}

export interface BarrierEnvelope {
  readonly kind: 'barrier';
  readonly checkpointId: number;
  /** data envelopes the producer sent on this channel in the epoch the barrier closes */
  readonly count: number;
  /** instances per stage when the checkpoint started (index = stage number) */
  readonly topology: readonly number[];
  readonly savepoint: boolean;
  /**
   * stages (by number) whose input stream will be resharded once this checkpoint completes: from
   * this barrier on, producers route records to those stages one key group per packet, so that a
   * packet lands in the right shard whichever layout the stream has when it arrives
   */
  readonly reshard?: readonly number[];
}

export interface WatermarkEnvelope {
  readonly kind: 'watermark';
  readonly epoch: number;
  readonly watermark: number;
  /** the producer has no input for now: leave it out of the minimum until it speaks again */
  readonly idle: boolean;
}

export interface TickEnvelope {
  readonly kind: 'tick';
  readonly epoch: number;
  /** processing time announced by the coordinator */
  readonly time: number;
}

export interface EndEnvelope {
  readonly kind: 'end';
  readonly epoch: number;
}

export interface Packet {
  readonly producer: string;
  readonly envelopes: Envelope[];
}

const MAGIC = 0x53;
const VERSION = 1;
/**
 * The event times the wire carries: a data envelope's time is written as a zig-zag varint of its
 * difference from the packet's previous one, so two times within ±(2^51 − 1) differ by a zig-zag that
 * is still a safe integer. A time beyond it could fail to be written next to another one.
 */
export const MAX_WIRE_TIME = 2 ** 51 - 1;

const KIND = { data: 0, barrier: 1, watermark: 2, tick: 3, end: 4 } as const;
const F_TS = 0x08;
const F_SAME_EPOCH = 0x10;
const F_NEXT_SEQ = 0x20;
const F_INPUT = 0x40;
const F_SAVEPOINT = 0x08;
const F_RESHARD = 0x10;
const F_IDLE = 0x08;

const utf8 = new TextEncoder();
const utf8d = new TextDecoder();

/**
 * Buffers of finished packets, for the next builders to write into: a packet of a few hundred
 * envelopes grows its buffer from 4 KB by doubling, allocating and copying about three times its
 * size, per packet. A few are kept, none larger than a packet can get.
 */
const spare: Uint8Array[] = [];
const MAX_SPARE = 4;
const MAX_SPARE_BYTES = 1 << 20;

/** Incrementally packs envelopes of one producer for one shard; `finish` ends it. */
export class PacketBuilder {
  private readonly w = new ByteWriter(spare.pop() ?? 4096);
  private finished = false;
  private count = 0;
  private lastEpoch = -1;
  private lastSeq = -2;
  private lastTs = 0;
  private readonly countAt: number;

  constructor(readonly producer: string) {
    // count is written last into a fixed 5-byte slot so the packet can grow incrementally
    this.w.byte(MAGIC);
    this.w.byte(VERSION);
    this.w.bytes(utf8.encode(producer));
    this.countAt = this.w.length;
    for (let i = 0; i < 5; i++) this.w.byte(0);
  }

  get size(): number {
    return this.w.length;
  }

  get envelopes(): number {
    return this.count;
  }

  /** Adds an envelope; on a bad field it throws and leaves the packet as it was. */
  add(e: Envelope): void {
    if (e.kind === 'data') this.addData(e.epoch, e.seq, e.keyGroup, e.timestamp, e.payload, e.input ?? 0);
    else this.addControl(e);
  }

  /**
   * Adds a data envelope from its fields (no envelope object: the outbox adds one per record); the
   * same bytes as `add` of that envelope. On a bad field it throws and leaves the packet as it was.
   */
  addData(epoch: number, seq: number, keyGroup: number, timestamp: number | undefined, payload: Uint8Array, input: number, start = 0, end = payload.length): void {
    // its buffer went back to `spare` and may be another builder's now
    if (this.finished) throw new Error('PacketBuilder: add after finish');
    const w = this.w;
    const mark = w.length;
    // the builder's state changes only once the envelope is written whole
    try {
      let h: number = KIND.data;
      if (timestamp !== undefined) h |= F_TS;
      if (epoch === this.lastEpoch) h |= F_SAME_EPOCH;
      if (seq === this.lastSeq + 1 && epoch === this.lastEpoch) h |= F_NEXT_SEQ;
      if (input) h |= F_INPUT;
      w.byte(h);
      if (!(h & F_SAME_EPOCH)) w.varint(epoch);
      if (!(h & F_NEXT_SEQ)) w.varint(seq);
      w.varint(keyGroup);
      if (input) w.varint(input);
      if (timestamp !== undefined) w.svarint(timestamp - this.lastTs);
      w.bytes(payload, start, end);
    } catch (err) {
      w.length = mark;
      throw err;
    }
    if (timestamp !== undefined) this.lastTs = timestamp;
    this.lastEpoch = epoch;
    this.lastSeq = seq;
    this.count++;
  }

  private addControl(e: Exclude<Envelope, DataEnvelope>): void {
    if (this.finished) throw new Error('PacketBuilder: add after finish');
    const mark = this.w.length;
    try {
      this.write(e);
      this.count++;
    } catch (err) {
      this.w.length = mark;
      throw err;
    }
  }

  private write(e: Exclude<Envelope, DataEnvelope>): void {
    const w = this.w;
    switch (e.kind) {
      case 'barrier':
        w.byte(KIND.barrier | (e.savepoint ? F_SAVEPOINT : 0) | (e.reshard?.length ? F_RESHARD : 0));
        w.varint(e.checkpointId);
        w.varint(e.count);
        writeCounts(w, e.topology);
        if (e.reshard?.length) writeCounts(w, e.reshard);
        return;
      case 'watermark':
        w.byte(KIND.watermark | (e.idle ? F_IDLE : 0));
        w.varint(e.epoch);
        w.svarint(e.watermark);
        return;
      case 'tick':
        w.byte(KIND.tick);
        w.varint(e.epoch);
        w.varint(e.time);
        return;
      case 'end':
        w.byte(KIND.end);
        w.varint(e.epoch);
        return;
    }
  }

  /** The packet (a copy of exactly its bytes). The builder takes nothing more. */
  finish(): Uint8Array {
    if (this.finished) throw new Error('PacketBuilder: finished twice');
    this.finished = true;
    const out = this.w.finish();
    const buf = this.w.release();
    if (spare.length < MAX_SPARE && buf.length <= MAX_SPARE_BYTES) spare.push(buf);
    // fixed-width varint: 5 bytes, continuation bits on the first four
    let n = this.count;
    for (let i = 0; i < 5; i++) {
      out[this.countAt + i] = (n & 0x7f) | (i < 4 ? 0x80 : 0);
      n >>>= 7;
    }
    return out;
  }
}

export function encodePacket(producer: string, envelopes: readonly Envelope[]): Uint8Array {
  const b = new PacketBuilder(producer);
  for (const e of envelopes) b.add(e);
  return b.finish();
}

export function isPacket(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === MAGIC && bytes[1] === VERSION;
}

export function decodePacket(bytes: Uint8Array): Packet {
  return decode(bytes);
}

/**
 * A data envelope that points into its packet instead of copying the payload out: the payload view
 * is made only if asked for, and `decodePayloadAt` reads the value straight from the packet.
 */
export class PacketDataEnvelope implements DataEnvelope {
  readonly kind = 'data' as const;
  protected view: Uint8Array | undefined;
  constructor(
    readonly epoch: number,
    readonly seq: number,
    readonly keyGroup: number,
    readonly timestamp: number | undefined,
    /** the whole packet */
    readonly packet: Uint8Array,
    readonly payloadStart: number,
    readonly payloadEnd: number,
    /** which input of a multi-input operator the record feeds; absent = 0 */
    readonly input: number | undefined,
  ) {}
  get payload(): Uint8Array {
    return (this.view ??= this.packet.subarray(this.payloadStart, this.payloadEnd));
  }
}

/**
 * A packet decoded into columns, one row per envelope: a data envelope's fields in typed arrays
 * (its payload as a range of the packet), any other envelope as its object in `control`. An
 * engine keeps one and decodes every packet into it: no object per data envelope.
 */
export class PacketColumns {
  bytes: Uint8Array = new Uint8Array(0);
  producer = '';
  count = 0;
  /** envelope kind: 0 data, 1 barrier, 2 watermark, 3 tick, 4 end */
  kind = new Uint8Array(0);
  epoch = new Float64Array(0);
  seq = new Float64Array(0);
  keyGroup = new Float64Array(0);
  /** NaN: no timestamp */
  timestamp = new Float64Array(0);
  /** 0 when absent */
  input = new Float64Array(0);
  payloadStart = new Int32Array(0);
  payloadEnd = new Int32Array(0);
  /** the envelope at each row that is not data */
  control: Array<Exclude<Envelope, DataEnvelope> | undefined> = [];
  private producerBytes: Uint8Array = new Uint8Array(0);

  /**
   * The producer's name: the last packet's string when the bytes are the same, so that the
   * engine's comparisons of producers per record (dedupe, channels) match by identity.
   */
  producerOf(b: Uint8Array): string {
    const last = this.producerBytes;
    if (b.length === last.length) {
      let i = 0;
      while (i < b.length && b[i] === last[i]) i++;
      if (i === b.length) return this.producer;
    }
    // both at once: `producer` is always the string of `producerBytes`
    this.producer = utf8d.decode(b);
    this.producerBytes = b.slice();
    return this.producer;
  }

  /** Room for n rows (contents are not kept). */
  reserve(n: number): void {
    if (this.kind.length >= n) return;
    const c = Math.max(n, 2 * this.kind.length, 16);
    this.kind = new Uint8Array(c);
    this.epoch = new Float64Array(c);
    this.seq = new Float64Array(c);
    this.keyGroup = new Float64Array(c);
    this.timestamp = new Float64Array(c);
    this.input = new Float64Array(c);
    this.payloadStart = new Int32Array(c);
    this.payloadEnd = new Int32Array(c);
  }
}

/** `PacketColumns.kind` of a data envelope */
export const DATA_KIND = KIND.data;

/**
 * Decodes a packet into `cols` (overwriting it): the same envelopes and the same errors as
 * `decodePacket`, thrown before `cols` holds a usable packet (a malformed packet has no rows).
 */
export function decodePacketColumns(bytes: Uint8Array, cols: PacketColumns): void {
  cols.count = 0;
  if (!isPacket(bytes)) throw new RangeError('not a Sluice packet (bad magic or version)');
  const r = new ByteReader(bytes);
  r.pos = 2;
  cols.producerOf(r.bytes());
  const count = r.varint();
  // every envelope takes at least a byte: a count beyond that fails below, without a huge allocation first
  cols.reserve(Math.min(count, bytes.length - r.pos));
  const { kind: kinds, control } = cols;
  let lastEpoch = -1;
  let lastSeq = -2;
  let lastTs = 0;
  for (let i = 0; i < count; i++) {
    const h = r.byte();
    if (i >= kinds.length) throw new RangeError('unexpected end of packet');
    const kind = h & 0x07;
    kinds[i] = kind;
    switch (kind) {
      case KIND.data: {
        const epoch = h & F_SAME_EPOCH ? lastEpoch : r.varint();
        const seq = h & F_NEXT_SEQ ? lastSeq + 1 : r.varint();
        cols.epoch[i] = epoch;
        cols.seq[i] = seq;
        cols.keyGroup[i] = r.varint();
        cols.input[i] = h & F_INPUT ? r.varint() : 0;
        if (h & F_TS) {
          lastTs += r.svarint();
          cols.timestamp[i] = lastTs;
        } else cols.timestamp[i] = NaN;
        const n = r.varint();
        const start = r.pos;
        if (start + n > bytes.length) throw new RangeError('unexpected end of packet');
        r.pos = start + n;
        cols.payloadStart[i] = start;
        cols.payloadEnd[i] = start + n;
        lastEpoch = epoch;
        lastSeq = seq;
        break;
      }
      case KIND.barrier: {
        const checkpointId = r.varint();
        const c = r.varint();
        const topology = readCounts(r);
        const savepoint = (h & F_SAVEPOINT) !== 0;
        control[i] = h & F_RESHARD ? { kind: 'barrier', checkpointId, count: c, topology, savepoint, reshard: readCounts(r) } : { kind: 'barrier', checkpointId, count: c, topology, savepoint };
        break;
      }
      case KIND.watermark:
        control[i] = { kind: 'watermark', epoch: r.varint(), watermark: r.svarint(), idle: (h & F_IDLE) !== 0 };
        break;
      case KIND.tick:
        control[i] = { kind: 'tick', epoch: r.varint(), time: r.varint() };
        break;
      case KIND.end:
        control[i] = { kind: 'end', epoch: r.varint() };
        break;
      default:
        throw new RangeError(`unknown envelope kind ${kind}`);
    }
  }
  cols.bytes = bytes;
  cols.count = count;
}

// `decode`'s own columns: it is synchronous and calls nothing that decodes
const scratch = new PacketColumns();

function decode(bytes: Uint8Array): Packet {
  const c = scratch;
  try {
    decodePacketColumns(bytes, c);
    const envelopes: Envelope[] = new Array(c.count);
    for (let i = 0; i < c.count; i++) {
      if (c.kind[i] !== KIND.data) {
        envelopes[i] = c.control[i]!;
        continue;
      }
      const epoch = c.epoch[i]!;
      const seq = c.seq[i]!;
      const keyGroup = c.keyGroup[i]!;
      const t = c.timestamp[i]!;
      const timestamp = Number.isNaN(t) ? undefined : t;
      const input = c.input[i]!;
      const start = c.payloadStart[i]!;
      const end = c.payloadEnd[i]!;
      const payload = bytes.subarray(start, end);
      envelopes[i] = input ? { kind: 'data', epoch, seq, keyGroup, timestamp, payload, input } : { kind: 'data', epoch, seq, keyGroup, timestamp, payload };
    }
    return { producer: c.producer, envelopes };
  } finally {
    c.control.fill(undefined);
    c.bytes = EMPTY_BYTES;
  }
}

const EMPTY_BYTES = new Uint8Array(0);

/**
 * Control records the coordinator writes into *source* streams, between the users' own records.
 * They start with a NUL byte and a fixed tag that JSON, text or KPL records never start with.
 */
const CONTROL_PREFIX = utf8.encode('\u0000SLUICE\u0000');

export type SourceControl =
  | {
      readonly kind: 'barrier';
      readonly checkpointId: number;
      readonly topology: readonly number[];
      readonly savepoint: boolean;
      /** see BarrierEnvelope.reshard */
      readonly reshard?: readonly number[];
      /** the coordinator's clock when it injected the barrier: processing time enters the log here */
      readonly time: number;
    }
  | { readonly kind: 'tick'; readonly time: number }
  | { readonly kind: 'end' };

export function encodeSourceControl(c: SourceControl): Uint8Array {
  const w = new ByteWriter(64);
  w.raw(CONTROL_PREFIX);
  switch (c.kind) {
    case 'barrier':
      w.byte(KIND.barrier | (c.savepoint ? F_SAVEPOINT : 0) | (c.reshard?.length ? F_RESHARD : 0));
      w.varint(c.checkpointId);
      writeCounts(w, c.topology);
      if (c.reshard?.length) writeCounts(w, c.reshard);
      w.varint(c.time);
      break;
    case 'tick':
      w.byte(KIND.tick);
      w.varint(c.time);
      break;
    case 'end':
      w.byte(KIND.end);
      break;
  }
  return w.finish();
}

export function decodeSourceControl(bytes: Uint8Array): SourceControl | undefined {
  if (bytes.length <= CONTROL_PREFIX.length) return undefined;
  for (let i = 0; i < CONTROL_PREFIX.length; i++) if (bytes[i] !== CONTROL_PREFIX[i]) return undefined;
  const r = new ByteReader(bytes);
  r.pos = CONTROL_PREFIX.length;
  const h = r.byte();
  switch (h & 0x07) {
    case KIND.barrier: {
      const checkpointId = r.varint();
      const topology = readCounts(r);
      const savepoint = (h & F_SAVEPOINT) !== 0;
      if (h & F_RESHARD) {
        const reshard = readCounts(r);
        return { kind: 'barrier', checkpointId, topology, savepoint, reshard, time: r.varint() };
      }
      return { kind: 'barrier', checkpointId, topology, savepoint, time: r.varint() };
    }
    case KIND.tick:
      return { kind: 'tick', time: r.varint() };
    case KIND.end:
      return { kind: 'end' };
    default:
      throw new RangeError(`unknown source control kind ${h & 0x07}`);
  }
}

/** A list of small non-negative integers: its length, then each. */
function writeCounts(w: ByteWriter, xs: readonly number[]): void {
  w.varint(xs.length);
  for (const x of xs) w.varint(x);
}

function readCounts(r: ByteReader): number[] {
  const n = r.varint();
  const out: number[] = [];
  for (let j = 0; j < n; j++) out.push(r.varint());
  return out;
}

/**
 * Whether a source record calls for a checkpoint: the users' records do, and so does the end of a
 * bounded input (the job finishes only with a checkpoint after it); the coordinator's own control
 * records (barriers, ticks) do not, or each checkpoint would call for the next.
 */
export function callsForCheckpoint(bytes: Uint8Array): boolean {
  const control = decodeSourceControl(bytes);
  return control === undefined || control.kind === 'end';
}
