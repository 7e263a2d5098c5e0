/**
 * The one-pass apply of an inner stage's packets: each packet is decoded into reused columns and
 * applied envelope by envelope; a data record is decoded, keyed, looked up and applied through one
 * reused unit. What a unit does (apply a record, a watermark, an end, a tick) and what an alignment
 * does (snapshot, release) are the instance's steps (stage-instance.ts).
 */
import { DATA_KIND, decodePacketColumns, PacketColumns, type DataEnvelope } from '../codec/envelope.js';
import { errorMessage } from '../util/errors.js';
import type { BarrierHandler, HoldOutcome } from './barrier-handler.js';
import type { BarrierSenders } from './barrier-senders.js';
import type { CompiledChain } from './chain.js';
import type { DeadLetterWriter } from './dead-letter-writer.js';
import { controlUnit, DataUnit, type Unit } from './inner-packets.js';
import type { KeyedStateCache } from './keyed-state.js';
import type { StateRowId, StoredRecord } from './ports.js';
import { resolveUnit, type StateLoader } from './state-prefetch.js';

/** The instance's side of the pass. */
export interface PacketSteps {
  /** the current epoch (an alignment advances it) */
  epoch(): number;
  /** set while standing for a resharded parent: the key groups kept (1), the others skipped */
  owned(): Uint8Array | undefined;
  /** applies a data record of the current epoch; a promise only when it must wait (a dead letter) */
  apply(unit: Unit & { env: DataEnvelope }): Promise<void> | undefined;
  /** applies a unit of any kind */
  applyUnit(unit: Unit): Promise<void>;
  /** completes every alignment that can complete */
  align(): Promise<void>;
}

/** What the pass works with besides the instance's steps. */
export interface PacketParts {
  readonly chain: CompiledChain;
  readonly state: KeyedStateCache;
  readonly loader: StateLoader;
  readonly barriers: BarrierHandler;
  /** an inner instance's: whose barriers of a checkpoint are all of them */
  readonly senders: BarrierSenders | undefined;
  readonly deadLetters: DeadLetterWriter;
  readonly stats: { held: number; spills: number };
}

export class PacketApplier {
  /** position of the record being processed (the frontier) */
  current: string | undefined;
  /** per depth of packets being applied (a re-read nests one): the columns and the unit they are decoded into */
  private readonly columns: PacketColumns[] = [];
  private readonly units: DataUnit[] = [];
  private depth = 0;
  /** what a read ahead decoded of the packets it went through, by packet: their pass takes it instead of decoding again */
  private readonly decoded = new Map<Uint8Array, DecodedRows>();

  constructor(
    private readonly steps: PacketSteps,
    private readonly parts: PacketParts,
  ) {}

  /**
   * Decodes inner packet `records[i]` into reused columns and applies it envelope by envelope, in
   * one pass. A record whose key some keyed operator has not cached stops the pass for a read
   * ahead (`readAhead`): the keys of the rest of the batch are read together (a cold cache after a
   * takeover reads its keys in a few concurrent reads instead of one per record); then it goes on.
   */
  async apply(records: readonly StoredRecord[], i: number): Promise<void> {
    const { chain, state, barriers, senders, deadLetters } = this.parts;
    const steps = this.steps;
    const r = records[i]!;
    this.current = r.sequenceNumber;
    // a re-read (alignment) decodes packets while this one is being applied: each depth has its own columns
    const depth = this.depth++;
    const cols = (this.columns[depth] ??= new PacketColumns());
    const unit = (this.units[depth] ??= DataUnit.reusable());
    try {
      try {
        decodePacketColumns(r.data, cols);
      } catch (err) {
        await deadLetters.record(r.sequenceNumber, 0, r.data, `malformed packet: ${errorMessage(err)}`);
        return;
      }
      // other envelopes than data of an epoch already in the snapshot when the packet was read are skipped
      const fromEpoch = barriers.appliesFrom(steps.epoch());
      const owned = steps.owned();
      const ids: StateRowId[] = [];
      // whether a barrier of the next checkpoint waits: only barriers and alignments change it
      let aligning = barriers.waiting(steps.epoch() + 1);
      // the rows a read ahead decoded (one may start in this packet)
      let ahead = this.decoded.get(r.data);
      for (let index = 0; index < cols.count; index++) {
        if (cols.kind[index] === DATA_KIND) {
          if (owned !== undefined && owned[cols.keyGroup[index]!] !== 1) continue;
          // already in the snapshot
          if (cols.epoch[index]! < barriers.appliesFrom(steps.epoch())) continue;
          unit.point(cols, index, r.sequenceNumber);
          if (ahead !== undefined) ahead.take(unit);
          // only a record of a later epoch can be held back; the handler keeps it, so it gets its own unit
          const held = unit.epoch > steps.epoch() ? this.hold(unit.copy()) : undefined;
          if (held === undefined) {
            resolveUnit(unit, ids, chain, state);
            if (ids.length) {
              await this.readAhead(records, i, cols, index, ids);
              ahead = this.decoded.get(r.data);
              resolveUnit(unit, ids, chain, state);
              ids.length = 0;
            }
            // data applies synchronously; only a dead letter makes it wait
            const pending = steps.apply(unit);
            if (pending) await pending;
          }
        } else {
          const env = cols.control[index]!;
          if (env.kind === 'barrier') {
            if (env.checkpointId > steps.epoch() && senders?.unknown(cols.producer)) await senders.learn(cols.producer);
            if (barriers.onBarrier(cols.producer, env, r.sequenceNumber, steps.epoch())) await steps.align();
            aligning = barriers.waiting(steps.epoch() + 1);
            continue;
          }
          if (env.epoch < fromEpoch) continue;
          const u = controlUnit(cols, index, r.sequenceNumber);
          if (this.hold(u) === undefined) await steps.applyUnit(u);
        }
        // a count satisfied by this record can complete an alignment
        if (aligning) {
          await steps.align();
          aligning = barriers.waiting(steps.epoch() + 1);
        }
      }
    } finally {
      this.depth--;
      // what was decoded ahead of this packet and not taken (a duplicate, a record held back) is not kept
      this.decoded.delete(r.data);
    }
  }

  /** Holds back a unit that belongs after the next snapshot (undefined: it applies now). */
  private hold(unit: Unit): HoldOutcome | undefined {
    const held = this.parts.barriers.hold(unit, this.steps.epoch());
    if (held === 'held') this.parts.stats.held++;
    else if (held === 'spilled') this.parts.stats.spills++;
    return held;
  }

  /**
   * Reads the state rows of the keys not cached that the batch's data records from row `from` of
   * packet `records[i]` (decoded in `cols`) to its last record will touch.
   */
  private async readAhead(records: readonly StoredRecord[], i: number, cols: PacketColumns, from: number, ids: StateRowId[]): Promise<void> {
    const { chain, state, barriers, loader } = this.parts;
    const fromEpoch = barriers.appliesFrom(this.steps.epoch());
    const owned = this.steps.owned();
    const unit = DataUnit.reusable();
    const ahead = new PacketColumns();
    // each record is decoded once: what is decoded here is kept for the record's turn in the pass
    const keysOf = (c: PacketColumns, start: number, r: StoredRecord) => {
      let rows = this.decoded.get(r.data);
      if (rows === undefined) this.decoded.set(r.data, (rows = new DecodedRows()));
      for (let index = start; index < c.count; index++) {
        if (c.kind[index] !== DATA_KIND || c.epoch[index]! < fromEpoch) continue;
        if (owned !== undefined && owned[c.keyGroup[index]!] !== 1) continue;
        unit.point(c, index, r.sequenceNumber);
        rows.take(unit);
        resolveUnit(unit, ids, chain, state);
        rows.keep(unit);
      }
    };
    keysOf(cols, from + 1, records[i]!);
    for (let j = i + 1; j < records.length; j++) {
      try {
        decodePacketColumns(records[j]!.data, ahead);
      } catch {
        continue; // dead-lettered when its turn comes
      }
      keysOf(ahead, 0, records[j]!);
    }
    await loader.readMissing(ids);
  }
}

/**
 * The payloads a read ahead decoded of one packet, by row: value, key (or the failure to decode
 * or key it). The packet's pass takes each row once (`take` forgets it): a value goes to one
 * record's functions, which may change it.
 */
class DecodedRows {
  private readonly value: unknown[] = [];
  private readonly key: Array<string | undefined> = [];
  private readonly poison: unknown[] = [];
  /** per row: 1 while a decoded row is kept */
  private kept = new Uint8Array(0);

  /** Keeps what `u` (resolved) holds for its row. */
  keep(u: DataUnit): void {
    const i = u.index;
    if (i >= this.kept.length) {
      const k = new Uint8Array(Math.max(i + 1, 2 * this.kept.length, 16));
      k.set(this.kept);
      this.kept = k;
    }
    this.value[i] = u.value;
    this.key[i] = u.key;
    this.poison[i] = u.poison;
    this.kept[i] = 1;
  }

  /** Gives `u` (just pointed at its row) what was kept of the row, if anything, and forgets it. */
  take(u: DataUnit): void {
    const i = u.index;
    if (i >= this.kept.length || this.kept[i] === 0) return;
    this.kept[i] = 0;
    u.value = this.value[i];
    u.key = this.key[i];
    u.poison = this.poison[i];
    this.value[i] = this.poison[i] = undefined;
  }
}
