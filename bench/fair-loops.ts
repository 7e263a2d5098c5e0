/**
 * Hand-written loops that do the work a stage must do, and nothing the engine's generality adds:
 * the same Lambda event (base64 records), the same packet layout parsed inline, the engine's own
 * payload reader (`decodePayloadAt`), key-group hash (checked against the envelope's; once per key
 * where the state is per key), seq-set dedupe per channel and epoch, state
 * in a Map with dirty flags, outputs packed with the engine's `PacketBuilder` and MessagePack
 * writer, and at each barrier the dirty entries serialized into a store that keeps the latest bytes
 * per key. What they leave out: leases, fencing, replay points, deltas, acks, timers as a
 * structure of their own, user functions behind interfaces, dead letters, telemetry.
 */
import type { KinesisStreamEvent } from 'aws-lambda';
import { PacketBuilder } from '../shared/codec/envelope.js';
import { SeqSet } from '../shared/runtime/seq-set.js';
import { decodePayloadAt, encodePayload } from '../shared/codec/payload.js';
import { keyGroupOf, keyString } from '../shared/plan/key-groups.js';
import { WINDOW_MS, type Ev } from './jobs.js';

const F_TS = 0x08;
const F_SAME_EPOCH = 0x10;
const F_NEXT_SEQ = 0x20;
const F_INPUT = 0x40;
const F_RESHARD = 0x10;
const utf8d = new TextDecoder();
const utf8e = new TextEncoder();

export interface FairLoop {
  /** one ESM invocation */
  handle(event: KinesisStreamEvent): void;
  /** data envelopes emitted so far */
  readonly outputs: number;
  /** a figure the engine's run must match (sum of counts, or windows fired) */
  readonly checksum: number;
  /** dirty entries written at barriers so far */
  readonly dirtyWritten: number;
}

/** What a keyed consumer does per record; `barrier` writes the dirty state and closes the epoch. */
abstract class PacketConsumer implements FairLoop {
  outputs = 0;
  dirtyWritten = 0;
  abstract readonly checksum: number;
  protected epoch = 0;
  protected outSeq = 0;
  protected out: PacketBuilder;
  /** the packets "sent" (a real stage hands them to PutRecords) */
  readonly sent: Uint8Array[] = [];
  private readonly seen = new Map<string, SeqSet>();
  protected readonly store = new Map<string, Uint8Array>();

  constructor(
    protected readonly maxParallelism: number,
    private readonly producer = 's1:shardId-000000000000',
  ) {
    this.out = new PacketBuilder(this.producer);
  }

  /** a record; it checks the key's group against the envelope's (`checkGroup`) */
  protected abstract onData(v: Ev, keyGroup: number, ts: number): void;

  protected checkGroup(key: string, keyGroup: number): number {
    const g = keyGroupOf(keyString(key), this.maxParallelism);
    if (g !== keyGroup) throw new Error('fair loop: key group mismatch');
    return g;
  }
  protected abstract onWatermark(wm: number): void;
  protected abstract snapshot(): void;

  protected emit(value: unknown, ts: number): void {
    this.out.add({ kind: 'data', epoch: this.epoch, seq: this.outSeq++, keyGroup: 0, timestamp: ts, payload: encodePayload(value) });
    this.outputs++;
  }

  handle(event: KinesisStreamEvent): void {
    for (const r of event.Records) this.packet(Buffer.from(r.kinesis.data, 'base64'));
    if (this.out.envelopes) {
      this.sent.push(this.out.finish());
      this.out = new PacketBuilder(this.producer);
    }
  }

  private packet(b: Uint8Array): void {
    let p = 2;
    const varint = () => {
      let x = 0;
      let mul = 1;
      for (;;) {
        const c = b[p++]!;
        x += (c & 0x7f) * mul;
        if (c < 0x80) return x;
        mul *= 128;
      }
    };
    const svarint = () => {
      const z = varint();
      return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
    };
    const plen = varint();
    const producer = utf8d.decode(b.subarray(p, p + plen));
    p += plen;
    const count = varint();
    let epoch = -1;
    let seq = -2;
    let ts = 0;
    let seen: SeqSet | undefined;
    let seenEpoch = -1;
    for (let i = 0; i < count; i++) {
      const h = b[p++]!;
      switch (h & 7) {
        case 0: {
          if (!(h & F_SAME_EPOCH)) epoch = varint();
          seq = h & F_NEXT_SEQ ? seq + 1 : varint();
          const kg = varint();
          if (h & F_INPUT) varint();
          if (h & F_TS) ts += svarint();
          const n = varint();
          const start = p;
          p += n;
          if (epoch < this.epoch) continue; // an epoch already snapshotted: a duplicate
          if (seenEpoch !== epoch || !seen) {
            const id = `${producer}\u0000${epoch}`;
            seen = this.seen.get(id);
            if (!seen) this.seen.set(id, (seen = new SeqSet()));
            seenEpoch = epoch;
          }
          if (seen.has(seq)) continue;
          seen.add(seq);
          this.onData(decodePayloadAt<Ev>(b, start, start + n), kg, ts);
          break;
        }
        case 1: {
          varint(); // checkpoint id
          varint(); // count
          const t = varint();
          for (let j = 0; j < t; j++) varint();
          if (h & F_RESHARD) {
            const r = varint();
            for (let j = 0; j < r; j++) varint();
          }
          this.snapshot();
          this.out.add({ kind: 'barrier', checkpointId: this.epoch + 1, count: this.outSeq, topology: [1, 1, 1], savepoint: false });
          for (const k of this.seen.keys()) if (k.endsWith(`\u0000${this.epoch}`)) this.seen.delete(k);
          this.epoch++;
          this.outSeq = 0;
          break;
        }
        case 2: {
          varint();
          this.onWatermark(svarint());
          break;
        }
        case 3:
          varint();
          varint();
          break;
        default:
          varint();
      }
    }
  }
}

/**
 * Keyed count emitting every update `{ k, n }`. A key's group is hashed once, when the key is new
 * (as the engine's state entry keeps it), and checked against each envelope's.
 */
export class FairCount extends PacketConsumer {
  private readonly counts = new Map<string, { n: number; dirty: boolean; readonly kg: number }>();
  private readonly dirty: string[] = [];

  protected onData(v: Ev, kg: number, ts: number): void {
    const k = v.k;
    let e = this.counts.get(k);
    if (!e) this.counts.set(k, (e = { n: 0, dirty: false, kg: this.checkGroup(k, kg) }));
    else if (e.kg !== kg) throw new Error('fair loop: key group mismatch');
    e.n++;
    if (!e.dirty) {
      e.dirty = true;
      this.dirty.push(k);
    }
    this.emit({ k, n: e.n }, ts);
  }

  protected onWatermark(): void {}

  protected snapshot(): void {
    for (const k of this.dirty) {
      const e = this.counts.get(k)!;
      this.store.set(k, utf8e.encode(JSON.stringify(e.n)));
      e.dirty = false;
    }
    this.dirtyWritten += this.dirty.length;
    this.dirty.length = 0;
  }

  get checksum(): number {
    let s = 0;
    for (const e of this.counts.values()) s += e.n;
    return s;
  }
}

/** Tumbling event-time windows per key (count and sum), fired when the watermark passes their end. */
export class FairWindow extends PacketConsumer {
  private readonly windows = new Map<number, Map<string, { n: number; sum: number; dirty: boolean }>>();
  private readonly dirty: Array<[number, string]> = [];
  private readonly cleared: Array<[number, string]> = [];
  private watermark = Number.NEGATIVE_INFINITY;
  private fired = 0;

  protected onData(v: Ev, kg: number, ts: number): void {
    this.checkGroup(v.k, kg);
    const start = ts - (ts % WINDOW_MS);
    if (start + WINDOW_MS - 1 <= this.watermark) return; // late
    let w = this.windows.get(start);
    if (!w) this.windows.set(start, (w = new Map()));
    const k = v.k;
    let a = w.get(k);
    if (!a) w.set(k, (a = { n: 0, sum: 0, dirty: false }));
    a.n++;
    a.sum += v.v;
    if (!a.dirty) {
      a.dirty = true;
      this.dirty.push([start, k]);
    }
  }

  protected onWatermark(wm: number): void {
    if (wm <= this.watermark) return;
    this.watermark = wm;
    for (const [start, w] of this.windows) {
      if (start + WINDOW_MS - 1 > wm) continue;
      for (const [k, a] of w) {
        this.emit({ k, start, n: a.n, sum: a.sum }, start + WINDOW_MS - 1);
        this.cleared.push([start, k]);
        this.fired++;
      }
      this.windows.delete(start);
    }
  }

  protected snapshot(): void {
    for (const [start, k] of this.dirty) {
      const a = this.windows.get(start)?.get(k);
      if (!a) continue;
      this.store.set(`${k}\u0000${start}`, utf8e.encode(JSON.stringify({ n: a.n, sum: a.sum })));
      a.dirty = false;
    }
    for (const [start, k] of this.cleared) this.store.delete(`${k}\u0000${start}`);
    this.dirtyWritten += this.dirty.length + this.cleared.length;
    this.dirty.length = 0;
    this.cleared.length = 0;
  }

  get checksum(): number {
    return this.fired;
  }
}

/**
 * The source stage's work: base64, JSON, the key and its group, the MessagePack payload packed for
 * the destination shard, a watermark every 200 ms of event time; at a barrier control record, the
 * barrier envelope and a new epoch. Control records are told apart by their first byte (NUL).
 */
export class FairSource implements FairLoop {
  outputs = 0;
  dirtyWritten = 0;
  readonly sent: Uint8Array[] = [];
  private out: PacketBuilder;
  private epoch = 0;
  private seq = 0;
  private maxTs = Number.NEGATIVE_INFINITY;
  private emitted = Number.NEGATIVE_INFINITY;
  private lastPosition = '';
  private sum = 0;

  constructor(
    private readonly maxParallelism: number,
    private readonly producer = 's0:shardId-000000000000',
  ) {
    this.out = new PacketBuilder(producer);
  }

  handle(event: KinesisStreamEvent): void {
    for (const r of event.Records) {
      const seqNo = r.kinesis.sequenceNumber;
      if (seqNo.length < this.lastPosition.length || (seqNo.length === this.lastPosition.length && seqNo <= this.lastPosition)) continue; // already processed
      this.lastPosition = seqNo;
      const bytes = Buffer.from(r.kinesis.data, 'base64');
      if (bytes[0] === 0) {
        // a barrier control record (the bench's source streams carry no other kind)
        this.out.add({ kind: 'barrier', checkpointId: this.epoch + 1, count: this.seq, topology: [1, 1, 1], savepoint: false });
        this.epoch++;
        this.seq = 0;
        continue;
      }
      const e = JSON.parse(utf8d.decode(bytes)) as Ev;
      const key = keyString(e.k);
      const ts = e.ts;
      this.out.add({ kind: 'data', epoch: this.epoch, seq: this.seq++, keyGroup: keyGroupOf(key, this.maxParallelism), timestamp: ts, payload: encodePayload(e) });
      this.outputs++;
      this.sum += e.v;
      if (ts > this.maxTs) {
        this.maxTs = ts;
        if (ts - 1 >= this.emitted + 200) {
          this.emitted = ts - 1;
          this.out.add({ kind: 'watermark', epoch: this.epoch, watermark: ts - 1, idle: false });
        }
      }
    }
    if (this.out.envelopes) {
      this.sent.push(this.out.finish());
      this.out = new PacketBuilder(this.producer);
    }
  }

  get checksum(): number {
    return this.sum;
  }
}
