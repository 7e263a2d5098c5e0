/**
 * Changelog state: a checkpoint makes only its delta durable; the rows of the snapshots since the
 * last materialization (the chain) are applied to the state table together, every k-th snapshot
 * and whenever something else reads the table (a savepoint, a reshard, the end of a bounded input).
 *
 * - The chain. The pointer of snapshot n names the deltas of the earlier snapshots not applied yet
 *   (`chain`, oldest first) and the last checkpoint applied before them (`base`). The pointer, not
 *   the delta, carries them: a delta is written unfenced (a zombie rewrites it with the same rows),
 *   while the chain depends on the owner's history (a restore applies everything and starts a new
 *   one), and only the owner publishes a pointer.
 * - Pending rows. Until they are applied, an instance answers reads of the chain's keys from memory
 *   (`PendingRows.getRows`): a key evicted from the cache after its snapshot would otherwise be read
 *   back from the table as it was before the chain.
 * - Restore. A new owner reads the chain's deltas and n's, folds them (later wins: a row holds a
 *   key's whole state) and applies them as checkpoint n, so it starts with an empty chain.
 * - Garbage collection keeps every delta of an instance's current chain (coordinator/gc.ts).
 */
import { MAX_MATERIALIZE_EVERY, type CheckpointSettings } from '../plan/plan.js';
import { decodeDelta, type SnapshotExtras } from '../codec/snapshot.js';
import { SluiceError } from '../util/errors.js';
import { compareRows } from './keyed-state.js';
import type { ControlStore, DeltaRef, SnapshotPointer, StateRow, StateRowId, StateStore } from './ports.js';

/**
 * The table is written about this often when the plan does not say. Each application writes the
 * whole dirty state's packed items (most of a keyed stage's write units at 1 k events/s: docs/cost.md),
 * while a longer chain costs only a restore's parallel delta reads and the pending rows' memory
 * (bounded by MAX_PENDING_BYTES) — two minutes, well below the ten a changelog state backend
 * usually materializes at, keeps the table (and queryable state) fresh.
 */
export const MATERIALIZE_PERIOD_MS = 120_000;
/** pending rows beyond this many bytes are applied at the next snapshot, however soon */
export const MAX_PENDING_BYTES = 4 * 1024 * 1024;
/** deltas a chain may name: the pointer (in the lease item) grows by one reference per snapshot */
const MAX_CHAIN = MAX_MATERIALIZE_EVERY;

/** Every how many snapshots an instance applies its rows: the plan's `materializeEvery`, else about every two minutes. */
export function materializeEvery(c: Pick<CheckpointSettings, 'intervalMs' | 'minPauseMs' | 'materializeEvery'>): number {
  if (c.materializeEvery !== undefined) return c.materializeEvery;
  return Math.min(MAX_CHAIN, Math.max(1, Math.ceil(MATERIALIZE_PERIOD_MS / Math.max(1, c.intervalMs, c.minPauseMs))));
}

/** What a snapshot pointer's meta says about its chain: nothing when it has none. */
export interface ChainMeta {
  /** the last checkpoint whose rows this instance applied to the table before the chain */
  readonly base?: number;
  /**
   * the deltas of the snapshots after `base` and before the pointer's, oldest first, each as
   * `chainEntry` writes it (a pointer written before that holds DeltaRef objects: still read)
   */
  readonly chain?: ReadonlyArray<string | DeltaRef>;
}

/**
 * A chain's delta as the pointer keeps it: `i` or `s` (its store), then, when it shares a prefix with
 * the pointer's own delta in the same store (an instance's deltas differ only in their checkpoint
 * number), that prefix's length and `:`, then the rest of its key. The pointer lives in the lease
 * item, which every batch's position write rewrites: DynamoDB bills an update by the whole item's
 * size (a unit per KB), and a dozen refs spelled out put the item past 1 KB.
 */
export function chainEntry(ref: DeltaRef, own: DeltaRef): string {
  const store = ref.store === 'inline' ? 'i' : 's';
  if (ref.store !== own.store) return `${store}:${ref.key}`;
  let p = 0;
  while (p < ref.key.length && ref.key.charCodeAt(p) === own.key.charCodeAt(p)) p++;
  return `${store}${p}:${ref.key.slice(p)}`;
}

function chainRef(e: unknown, pointer: SnapshotPointer): DeltaRef {
  const m = typeof e === 'string' ? /^([is])(\d*):/.exec(e) : null;
  if (m) {
    const store = m[1] === 'i' ? 'inline' : 's3';
    const p = m[2] ? Number(m[2]) : 0;
    if (p === 0 || (store === pointer.delta.store && p <= pointer.delta.key.length)) return { store, key: pointer.delta.key.slice(0, p) + (e as string).slice(m[0].length) };
  }
  // a pointer written before chain entries were strings holds DeltaRef objects
  const o = e as Partial<DeltaRef> | null;
  if (o && typeof o.key === 'string' && (o.store === 'inline' || o.store === 's3')) return { store: o.store, key: o.key };
  throw new SluiceError(`snapshot pointer ${pointer.checkpointId} names a malformed chain entry ${JSON.stringify(e)}`, 'DELTA_CORRUPT');
}

/** The chain a pointer names (empty for a pointer without one: then only its own delta is needed). */
export function chainOf(pointer: SnapshotPointer): { base: number; chain: readonly DeltaRef[] } {
  const { base, chain } = pointer.meta as ChainMeta;
  if (chain === undefined || !chain.length) return { base: pointer.checkpointId - 1, chain: [] };
  if (typeof base !== 'number' || !Array.isArray(chain)) throw new SluiceError(`snapshot pointer ${pointer.checkpointId} names a malformed chain`, 'DELTA_CORRUPT');
  return { base, chain: chain.map((e) => chainRef(e, pointer)) };
}

const rowId = (r: StateRowId) => `${r.operatorId}\u0000${r.key}`;

/**
 * Reads what a pointer's snapshot holds: the rows of its delta folded over those of its chain
 * (the deltas read in parallel, later wins per operator and key), and its own delta's extras.
 */
export async function readSnapshot(control: ControlStore, pointer: SnapshotPointer): Promise<{ rows: StateRow[]; extras: SnapshotExtras | undefined }> {
  const { chain } = chainOf(pointer);
  const deltas = (await Promise.all([...chain, pointer.delta].map((ref) => control.readDelta(ref)))).map((bytes) => decodeDelta(bytes));
  const last = deltas[deltas.length - 1]!;
  if (deltas.length === 1) return last;
  const folded = new Map<string, StateRow>();
  for (const d of deltas) for (const r of d.rows) folded.set(rowId(r), r);
  return { rows: [...folded.values()].sort(compareRows), extras: last.extras };
}

/**
 * The rows an instance snapshotted but has not applied to the state table yet, in front of the
 * table: reads of their keys are answered from here, with the checkpoint that wrote them (never
 * above the instance's epoch, so the zombie check of state-prefetch.ts still holds).
 *
 * Each snapshot's rows are kept as they came, in `compareRows` order; the index by key that reads
 * need is built when something reads, and the table's rows are the snapshots' rows merged (later
 * wins) — a checkpoint itself costs no map write per dirty key.
 */
export class PendingRows implements Pick<StateStore, 'getRows'> {
  /** each snapshot's rows since the last application, oldest first, each in compareRows order without repeats */
  private snapshots: Array<{ readonly n: number; readonly rows: readonly StateRow[] }> = [];
  /** operator → key → the row and the checkpoint that wrote it, for the first `indexed` snapshots */
  private readonly index = new Map<string, Map<string, { row: StateRow; checkpointId: number }>>();
  private indexed = 0;
  private keys = 0;
  private refs: DeltaRef[] = [];
  /** the chain's delta bytes: a bound of the pending rows' (a key written again counts again) */
  private bytes = 0;
  private base = 0;

  constructor(
    private readonly table: StateStore,
    /** apply every this many snapshots (1: every snapshot, nothing stays pending) */
    private readonly every: number,
    private readonly maxBytes = MAX_PENDING_BYTES,
  ) {}

  /** keys pending */
  get size(): number {
    return this.indexAll().keys;
  }

  async getRows(ids: readonly StateRowId[]): Promise<StateRow[]> {
    if (!this.snapshots.length) return this.table.getRows(ids);
    const index = this.indexAll().index;
    const out: StateRow[] = [];
    const rest: StateRowId[] = [];
    for (const id of ids) {
      const p = index.get(id.operatorId)?.get(id.key);
      // a cleared key's row (no values) says it has no state, whatever the table still holds
      if (p) out.push({ ...p.row, checkpointId: p.checkpointId });
      else rest.push(id);
    }
    if (rest.length) out.push(...(await this.table.getRows(rest)));
    return out;
  }

  /** Brings the index up to the last snapshot taken. */
  private indexAll(): this {
    for (; this.indexed < this.snapshots.length; this.indexed++) {
      const { n, rows } = this.snapshots[this.indexed]!;
      let op: Map<string, { row: StateRow; checkpointId: number }> | undefined;
      let opId: string | undefined;
      for (const row of rows) {
        // rows come in operator order: one map lookup per operator
        if (row.operatorId !== opId) {
          opId = row.operatorId;
          op = this.index.get(opId);
          if (!op) this.index.set(opId, (op = new Map()));
        }
        const size = op!.size;
        op!.set(row.key, { row, checkpointId: n });
        this.keys += op!.size - size;
      }
    }
    return this;
  }

  /**
   * Restores a pointer's snapshot: applies its rows folded over its chain's as its checkpoint (a
   * redo writes the same values), only those of key groups `owns` keeps if given, and starts an
   * empty chain. Returns the snapshot's extras.
   */
  async restore(control: ControlStore, pointer: SnapshotPointer, fence: number, owns?: (keyGroup: number) => boolean): Promise<SnapshotExtras | undefined> {
    const { rows, extras } = await readSnapshot(control, pointer);
    await this.table.applyRows(pointer.checkpointId, fence, owns ? rows.filter((r) => owns(r.keyGroup)) : rows);
    this.restart(pointer.checkpointId);
    return extras;
  }

  /**
   * Publishes snapshot n's pointer (fenced), naming the chain of deltas before n's, then takes n's
   * rows (`add`). The delta must be durable already.
   */
  async publish(control: ControlStore, instanceId: string, fence: number, pointer: SnapshotPointer, delta: { rows: readonly StateRow[]; bytes: number }, force: boolean): Promise<void> {
    const chain: ChainMeta = this.refs.length ? { base: this.base, chain: this.refs.map((r) => chainEntry(r, pointer.delta)) } : {};
    await control.publishSnapshot(instanceId, fence, { ...pointer, meta: { ...pointer.meta, ...chain } });
    await this.add(pointer.checkpointId, fence, pointer.delta, delta, force);
  }

  /**
   * Takes snapshot n's rows once its pointer is durable, and applies every pending row to the table
   * as checkpoint n when it is due (or `force`d: something is about to read the table).
   */
  private async add(n: number, fence: number, ref: DeltaRef, delta: { rows: readonly StateRow[]; bytes: number }, force: boolean): Promise<void> {
    const { rows } = delta;
    if (this.every <= 1 && !this.snapshots.length) {
      await this.table.applyRows(n, fence, rows);
      this.restart(n);
      return;
    }
    this.snapshots.push({ n, rows: inOrder(rows) });
    this.bytes += delta.bytes;
    this.refs.push(ref);
    if (force || this.refs.length >= this.every || this.refs.length >= MAX_CHAIN || this.bytes >= this.maxBytes) await this.materialize(n, fence);
  }

  /** Applies every pending row as checkpoint n (the last snapshot taken) and starts an empty chain. */
  private async materialize(n: number, fence: number): Promise<void> {
    let rows = this.snapshots[0]?.rows ?? [];
    for (let i = 1; i < this.snapshots.length; i++) rows = mergeLaterWins(rows, this.snapshots[i]!.rows);
    await this.table.applyRows(n, fence, rows);
    this.restart(n);
  }

  private restart(base: number): void {
    this.snapshots = [];
    this.index.clear();
    this.indexed = 0;
    this.keys = 0;
    this.refs = [];
    this.bytes = 0;
    this.base = base;
  }
}

/** Rows in compareRows order, each key once (the last of a key's rows wins): as given when they are already. */
export function inOrder(rows: readonly StateRow[]): readonly StateRow[] {
  let i = 1;
  while (i < rows.length && compareRows(rows[i - 1]!, rows[i]!) < 0) i++;
  if (i >= rows.length) return rows;
  // rare (the snapshot writer sorts its rows): a stable sort keeps a key's rows in their order, the last is kept
  const sorted = rows.slice().sort(compareRows);
  const out: StateRow[] = [];
  for (const r of sorted) {
    if (out.length && compareRows(out[out.length - 1]!, r) === 0) out[out.length - 1] = r;
    else out.push(r);
  }
  return out;
}

/** Two lists of rows in compareRows order as one, a key in both taking `later`'s row. */
export function mergeLaterWins(earlier: readonly StateRow[], later: readonly StateRow[]): StateRow[] {
  const out: StateRow[] = new Array(earlier.length + later.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < earlier.length && j < later.length) {
    const c = compareRows(earlier[i]!, later[j]!);
    if (c < 0) out[k++] = earlier[i++]!;
    else {
      if (c === 0) i++;
      out[k++] = later[j++]!;
    }
  }
  while (i < earlier.length) out[k++] = earlier[i++]!;
  while (j < later.length) out[k++] = later[j++]!;
  out.length = k;
  return out;
}
