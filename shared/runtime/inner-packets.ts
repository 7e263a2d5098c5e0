/**
 * An inner stage's input: packets of envelopes from upstream producers, decoded into units (one per
 * envelope that belongs to an epoch), and the meta of the record being applied.
 */
import { decodePacketViews, PacketDataEnvelope, type DataEnvelope, type EndEnvelope, type Envelope, type TickEnvelope, type WatermarkEnvelope } from '../codec/envelope.js';
import type { RecordMeta } from './operator-context.js';
import type { KeyEntry } from './state-handles.js';
import type { StoredRecord } from './ports.js';

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

export interface DecodedPacket {
  readonly producer: string;
  readonly envelopes: readonly Envelope[];
  /** data envelopes of the current epoch or later, in packet order */
  readonly units: Unit[];
  /** set when the record is not a readable packet */
  readonly error?: unknown;
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

export const EMPTY_PACKET: DecodedPacket = { producer: '', envelopes: [], units: [] };

const makeDataUnit = (epoch: number, seq: number, keyGroup: number, timestamp: number | undefined, packet: Uint8Array, start: number, end: number, input: number | undefined) =>
  new DataUnit(epoch, seq, keyGroup, timestamp, packet, start, end, input);

export const unitId = (u: Unit) => `${u.producer}|${u.env.kind}|${u.env.epoch}|${u.env.kind === 'data' ? u.env.seq : `${u.position}/${u.index}`}`;

/**
 * Decodes an inner record into its envelopes and the units of epoch `fromEpoch` or later; data of
 * key groups `owned` marks 0 is skipped (undefined: every key group).
 */
export function decodeInnerPacket(r: StoredRecord, fromEpoch: number, owned: Uint8Array | undefined): DecodedPacket {
  try {
    const p = decodePacketViews(r.data, makeDataUnit);
    const units: Unit[] = [];
    const envelopes = p.envelopes;
    for (let index = 0; index < envelopes.length; index++) {
      const env = envelopes[index]!;
      if (owned !== undefined && env.kind === 'data' && owned[env.keyGroup] !== 1) continue;
      if (env.kind !== 'barrier' && env.epoch >= fromEpoch) {
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
