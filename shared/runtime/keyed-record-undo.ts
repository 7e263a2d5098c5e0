/**
 * The undo of one record in the keyed-state cache. Every entry a record touches is saved at its
 * first access in the record (values, TTL times, dirty flag) on the entry itself, so that a record
 * whose function throws can be undone whole (`rollback`); `commit` forgets the saves. Only first
 * accesses cost anything: a few field stores and one push on the list of touched entries.
 */
import type { StateDescriptor } from '../api/state.js';
import { KeyEntry } from './state-handles.js';

export interface OperatorSlots {
  readonly descriptors: ReadonlyArray<StateDescriptor<unknown>>;
  readonly byName: ReadonlyMap<string, number>;
  /** per slot: an object value is saved as its serialized bytes (a function may change it in place) */
  readonly copy: readonly boolean[];
}

/** An entry's slots past the first, as a record found them. */
interface SavedSlots {
  readonly more: unknown[] | undefined;
  readonly moreT: Array<number | undefined> | undefined;
  readonly extra: Map<string, unknown> | undefined;
  readonly extraT: Map<string, number> | undefined;
}

/** A value saved as its bytes: restored by decoding them, as a restore from a checkpoint would. */
class SavedBytes {
  constructor(
    readonly d: StateDescriptor<unknown>,
    readonly bytes: Uint8Array,
  ) {}
  value(): unknown {
    return fromStored(this.d, this.d.serializer.decode(this.bytes));
  }
}

/**
 * The cache's entries (every one is made as this): a KeyEntry with its operator and what the record
 * `saved` found in it. The saved fields mean something only while that record runs (`saved` is the
 * running record's number); a save overwrites them all.
 */
export class UndoableEntry extends KeyEntry {
  savedV0: unknown = undefined;
  savedT0: number | undefined = undefined;
  savedDirty = false;
  savedRest: SavedSlots | undefined = undefined;
  constructor(
    keyGroup: number,
    slots: number,
    key: string,
    /** the operator whose dirty list holds the entry */
    readonly operatorId: string,
  ) {
    super(keyGroup, slots, key);
  }
}

export class RecordUndo {
  /** the record being applied (0: none) */
  record = 0;
  private records = 0;
  // reused: filled up to `touchedLength` (setting an array's length to 0 would drop its storage)
  private readonly touched: UndoableEntry[] = [];
  private touchedLength = 0;
  /** a save of this record holds an object: `commit` lets go of the saves (the values would stay reachable) */
  private holds = false;
  // slots of arrays an engine operator changed in place during the record, with their old values (`changedInPlace`)
  private readonly inPlace: unknown[][] = [];
  private readonly inPlaceAt: number[] = [];
  private readonly inPlaceOld: unknown[] = [];
  private inPlaceLength = 0;

  begin(): void {
    this.record = ++this.records;
  }

  commit(): void {
    this.record = 0;
    if (this.holds) {
      this.holds = false;
      for (let i = 0; i < this.touchedLength; i++) {
        const e = this.touched[i]!;
        e.savedV0 = e.savedRest = undefined;
      }
    }
    this.touchedLength = 0;
    this.inPlaceLength = 0;
  }

  /** Saves what `e` holds now (its first access in the record). */
  save(e: UndoableEntry, slots: OperatorSlots | undefined): void {
    e.saved = this.record;
    this.touched[this.touchedLength++] = e;
    const v0 = e.v0;
    e.savedV0 = typeof v0 === 'object' && v0 !== null ? ((this.holds = true), keepValue(slots, 0, v0)) : v0;
    e.savedT0 = e.t0;
    e.savedDirty = e.dirty;
    if (e.more || e.extra) {
      this.holds = true;
      e.savedRest = {
        more: e.more?.map((v, j) => keepValue(slots, j + 1, v)),
        moreT: e.moreT?.slice(),
        extra: e.extra && new Map(e.extra),
        extraT: e.extraT && new Map(e.extraT),
      };
    } else e.savedRest = undefined;
  }

  /** See KeyedStateCache.changedInPlace. */
  changedInPlace(a: unknown[], i: number, old: unknown): void {
    if (this.record === 0) return;
    const n = this.inPlaceLength++;
    this.inPlace[n] = a;
    this.inPlaceAt[n] = i;
    this.inPlaceOld[n] = old;
  }

  /** Puts back what every touched entry held; unlists from `dirty` the entries the record made dirty. */
  rollback(dirty: ReadonlyMap<string, KeyEntry[]>): void {
    this.record = 0;
    this.holds = false;
    for (let i = this.inPlaceLength - 1; i >= 0; i--) {
      this.inPlace[i]![this.inPlaceAt[i]!] = this.inPlaceOld[i];
      this.inPlace[i] = this.inPlaceOld[i] = undefined as never;
    }
    this.inPlaceLength = 0;
    const touched = this.touched;
    for (let i = this.touchedLength - 1; i >= 0; i--) {
      const e = touched[i]!;
      e.v0 = restored(e.savedV0);
      e.t0 = e.savedT0;
      const rest = e.savedRest;
      if (rest) {
        if (e.more) for (let j = 0; j < e.more.length; j++) e.more[j] = restored(rest.more![j]);
        e.moreT = rest.moreT;
        e.extra = rest.extra;
        e.extraT = rest.extraT;
      } else e.extra = e.extraT = undefined;
      e.savedV0 = e.savedRest = undefined;
      if (e.dirty && !e.savedDirty) {
        // listed by this record: it is at the end of its operator's list
        const list = dirty.get(e.operatorId)!;
        const at = list.lastIndexOf(e);
        if (at >= 0) list.splice(at, 1);
        e.dirty = false;
      }
    }
    this.touchedLength = 0;
  }
}

/** What an undo keeps of slot i's value: the value, or its bytes when a function could change it in place. */
function keepValue(slots: OperatorSlots | undefined, i: number, v: unknown): unknown {
  if (typeof v !== 'object' || v === null || !slots?.copy[i]) return v;
  const d = slots.descriptors[i]!;
  return new SavedBytes(d, d.serializer.encode(toStored(d, v)));
}

const restored = (v: unknown): unknown => (v instanceof SavedBytes ? v.value() : v);

/** Map state lives as a Map in memory and as an array of pairs in storage. */
export function toStored(d: StateDescriptor<unknown>, v: unknown): unknown {
  return d.kind === 'map' ? [...(v as Map<unknown, unknown>).entries()] : v;
}
export function fromStored(d: StateDescriptor<unknown>, v: unknown): unknown {
  return d.kind === 'map' ? new Map(v as Array<[unknown, unknown]>) : v;
}
