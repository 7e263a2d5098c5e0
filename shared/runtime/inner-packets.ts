/**
 * An inner stage's input: packets of envelopes from upstream producers, decoded into reused
 * columns (codec/envelope.ts's `PacketColumns`), units (one per envelope that belongs to an
 * epoch) pointed at them, and the meta of the record being applied.
 */
import { PacketDataEnvelope, type DataEnvelope, type EndEnvelope, type PacketColumns, type TickEnvelope, type WatermarkEnvelope } from '../codec/envelope.js';
import type { RecordMeta } from './operator-context.js';
import type { KeyEntry } from './state-handles.js';

/** One envelope of an inner stage that belongs to an epoch (data, watermark, tick). */
export interface Unit {
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

/** A data envelope's fields, written only by `DataUnit.point` */
type EnvelopeFields = { epoch: number; seq: number; keyGroup: number; timestamp: number | undefined; packet: Uint8Array; payloadStart: number; payloadEnd: number; input: number | undefined };

const NO_BYTES = new Uint8Array(0);

/**
 * A data envelope of an inner packet that is its own unit. The instance points one at each data
 * record of a packet in turn (`point`): no object per record. A unit kept past its record (held
 * back for a later epoch) is a `copy`.
 */
export class DataUnit extends PacketDataEnvelope implements Unit {
  position = '';
  index = 0;
  producer = '';
  readonly env: DataEnvelope = this;
  value: unknown = undefined;
  key: string | undefined = undefined;
  poison: unknown = undefined;
  state: KeyEntry | undefined = undefined;

  /** A unit to point at records. */
  static reusable(): DataUnit {
    return new DataUnit(0, 0, 0, undefined, NO_BYTES, 0, 0, undefined);
  }

  /** Points this unit at data row i of a packet read from `position`, not resolved yet. */
  point(cols: PacketColumns, i: number, position: string): this {
    const f = this as unknown as EnvelopeFields;
    f.epoch = cols.epoch[i]!;
    f.seq = cols.seq[i]!;
    f.keyGroup = cols.keyGroup[i]!;
    const t = cols.timestamp[i]!;
    f.timestamp = t === t ? t : undefined; // NaN: none
    f.packet = cols.bytes;
    f.payloadStart = cols.payloadStart[i]!;
    f.payloadEnd = cols.payloadEnd[i]!;
    const input = cols.input[i]!;
    f.input = input === 0 ? undefined : input;
    this.view = undefined;
    this.position = position;
    this.index = i;
    this.producer = cols.producer;
    this.value = this.key = this.poison = this.state = undefined;
    return this;
  }

  /** A unit of its own for the record this one points at, not resolved. */
  copy(): DataUnit {
    const u = new DataUnit(this.epoch, this.seq, this.keyGroup, this.timestamp, this.packet, this.payloadStart, this.payloadEnd, this.input);
    u.position = this.position;
    u.index = this.index;
    u.producer = this.producer;
    return u;
  }
}

/** The unit of row i of a packet, an envelope other than data or a barrier. */
export function controlUnit(cols: PacketColumns, i: number, position: string): Unit {
  const env = cols.control[i] as WatermarkEnvelope | TickEnvelope | EndEnvelope;
  return { position, index: i, producer: cols.producer, env, value: undefined, key: undefined, poison: undefined, state: undefined };
}

export const unitId = (u: Unit) => `${u.producer}|${u.env.kind}|${u.env.epoch}|${u.env.kind === 'data' ? u.env.seq : `${u.position}/${u.index}`}`;

/**
 * The meta of the inner record being applied. One per instance, pointed at each record in turn:
 * the chain uses a meta only while the record is pushed (contexts are valid only during the call;
 * windows and timers copy what they keep). Its id (which seeds `ctx.random()`) is only spelled out
 * when asked for.
 */
export class InnerRecordMeta implements RecordMeta {
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
