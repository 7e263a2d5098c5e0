/**
 * The state table's layout: the keys of one (operator, key group) packed into as few items as the
 * item size allows, because DynamoDB bills a write by whole kilobytes of the item (a 45-byte counter
 * row costs what a 1 KB item of twenty of them costs).
 *
 * Items of a group share pk = `<operator>#<key group>`. Each holds a sorted run of keys as one
 * binary attribute `d` (state names once per item, keys prefix-compressed) and covers a key range:
 * the root item (sk ROOT_SK) starts the chain, `l` is an item's lowest key and `n` the sk of the next
 * item; a key belongs to the last item of the chain whose `l` is ≤ the key. `c` is the newest
 * checkpoint that wrote the item, `r` its version, `f` the format marker (rows of the older
 * one-key-per-item layout have none: they are read while the group has no root, and folded into the
 * root by its first write).
 *
 * Guarantees, item by item:
 * - fencing: a write of checkpoint n to an item that checkpoint m > n already wrote is dropped, and
 *   every row read carries its item's `c` (so a zombie still sees "written past my epoch", even for
 *   a key a later checkpoint cleared);
 * - every write is a PutItem conditioned on the version it merged into (`r = :r`, or "does not
 *   exist"): two writers never lose each other's keys; a loser re-reads the group and merges again;
 * - a redo of checkpoint n merges the same rows again; an item it would not change is not written;
 * - an item over `splitBytes` is split: the new items are written first (unreachable until linked,
 *   and recording the parent version they expect), then the parent is rewritten pointing at them.
 *   A crash in between leaves unreachable items that readers ignore and the next writer deletes.
 *
 * `PackedStateStore` runs this over a `PackedTable`: DynamoDB in production, a Map in the twins.
 */
import { randomBytes } from 'node:crypto';
import { SluiceError } from '../util/errors.js';
import type { StateRow, StateRowId, StateStore } from './ports.js';
import { compareKeys, decodeSortedEntries, encodeSortedEntries, entriesFromRows, mergeIntoEntries, PACKED_FORMAT } from '../codec/packed-entries.js';
import { type Entry, entryOf, find, ITEM_OVERHEAD, lastWriteWins, mergeRows, sortedEntries, type Values } from './packed-item-entries.js';

/** sk of a group's first item (legacy rows used the key itself as sk; keys never start with NUL in practice) */
export const ROOT_SK = '\u0000r';
/** items grow up to this many bytes before they split (a write is billed on the whole item) */
export const DEFAULT_SPLIT_BYTES = 4 * 1024;
/** DynamoDB's item limit, less room for the other attributes */
export const MAX_ITEM_BYTES = 390 * 1024;
export const groupPk = (operatorId: string, keyGroup: number) => `${operatorId}#${keyGroup}`;

/** An item as stored (pk aside): a packed item, or a row of the older one-key-per-item layout. */
export interface StoredItem {
  readonly sk: string;
  /** format marker; absent on legacy rows */
  readonly f?: number;
  /** newest checkpoint that wrote the item */
  readonly c?: number;
  /** version, +1 per write */
  readonly r?: number;
  /** lowest key of the item's range (absent on the root) */
  readonly l?: string;
  /** sk of the next item */
  readonly n?: string;
  /** while unlinked: the parent's sk and the version the parent is expected to have when it links this item */
  readonly p?: string;
  readonly q?: number;
  /** packed entries */
  readonly d?: Uint8Array;
  /** legacy rows */
  readonly ckpt?: number;
  readonly v?: Record<string, Uint8Array>;
}

/** Item-level storage the packed layout needs; conditions are on the version attribute `r`. */
export interface PackedTable {
  /** every item of the partition, strongly consistent */
  query(pk: string): Promise<StoredItem[]>;
  /** writes the item if the stored one has version `expected` (undefined: no item under its sk); false if that condition failed */
  put(pk: string, item: StoredItem, expected: number | undefined): Promise<boolean>;
  /** these items, strongly consistent (absent ones left out) */
  getItems(keys: ReadonlyArray<{ pk: string; sk: string }>): Promise<Array<{ pk: string; item: StoredItem }>>;
  /** deletes the item (if `expected` is given: only at that version) */
  delete(pk: string, sk: string, expected?: number): Promise<void>;
}

// ------------------------------------------------------------------------------------------ a group's items

interface Item {
  readonly sk: string;
  readonly lo: string | undefined;
  readonly next: string | undefined;
  readonly ckpt: number;
  readonly ver: number;
  readonly parent?: string;
  readonly parentVer?: number;
  /** bytes of `d` */
  readonly size: number;
  /** decoded on first use (then kept: an item is never changed, a write makes a new one) */
  entries: Entry[] | undefined;
  readonly d: Uint8Array;
}

interface GroupView {
  /** the chain, root first, ascending by range */
  readonly chain: Item[];
  /** packed items no chain reaches (a split that never linked them) */
  readonly orphans: Item[];
  /** rows of the older layout (meaningful only while there is no root) */
  readonly legacy: Map<string, { ckpt: number; values: Values }>;
  readonly legacySks: string[];
  /** rough bytes held, for the cache bound */
  readonly bytes: number;
}

const entriesOf = (i: Item) => (i.entries ??= sortedEntries(decodeSortedEntries(i.d)));

function toItem(s: StoredItem): Item {
  return {
    sk: s.sk,
    lo: s.l,
    next: s.n,
    ckpt: s.c ?? 0,
    ver: s.r ?? 0,
    ...(s.p !== undefined ? { parent: s.p, parentVer: s.q ?? 0 } : {}),
    size: s.d?.length ?? 0,
    entries: undefined,
    d: s.d ?? new Uint8Array(0),
  };
}

function viewOf(pk: string, stored: readonly StoredItem[]): GroupView {
  const packed = new Map<string, Item>();
  const legacy = new Map<string, { ckpt: number; values: Values }>();
  const legacySks: string[] = [];
  let bytes = 0;
  for (const s of stored) {
    if (s.f === undefined) {
      legacy.set(s.sk, { ckpt: s.ckpt ?? 0, values: { ...(s.v ?? {}) } });
      legacySks.push(s.sk);
      continue;
    }
    packed.set(s.sk, toItem(s));
    bytes += (s.d?.length ?? 0) + ITEM_OVERHEAD;
  }
  const chain: Item[] = [];
  const reached = new Set<string>();
  for (let sk: string | undefined = packed.has(ROOT_SK) ? ROOT_SK : undefined; sk !== undefined; ) {
    const item = packed.get(sk);
    if (!item || reached.has(sk)) {
      // name the damage: which item links the bad one, and which keys a reader can no longer see
      const prev = chain[chain.length - 1];
      const by = prev ? ` by item ${JSON.stringify(prev.sk)} (checkpoint ${prev.ckpt}, version ${prev.ver})` : '';
      const lost = item ? '' : '; the keys of its range cannot be read (a retry unlinked what a successful write had linked?)';
      throw new SluiceError(`state items of ${pk}: the chain names ${JSON.stringify(sk)}${by}, which is ${item ? 'already in it' : 'missing'}${lost}`, 'STATE_CORRUPT');
    }
    reached.add(sk);
    chain.push(item);
    sk = item.next;
  }
  const orphans = [...packed.values()].filter((i) => !reached.has(i.sk));
  return { chain, orphans, legacy, legacySks, bytes };
}

/** Index in the chain of the item whose range holds `key`. */
function route(chain: readonly Item[], key: string): number {
  let lo = 0;
  let hi = chain.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (compareKeys(chain[mid]!.lo ?? '', key) <= 0) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

const newSk = () => `\u0000${randomBytes(6).toString('base64url')}`;

// ------------------------------------------------------------------------------------------ the store

export interface PackedStateStoreOptions {
  /** items grow to this many bytes before splitting; @default 4 KB */
  readonly splitBytes?: number;
  /** bytes of group views kept between calls (writes then need no read); @default 32 MB */
  readonly cacheBytes?: number;
  /** groups read or written at a time; @default 16 */
  readonly concurrency?: number;
}

/** What one applyRows call did (besides writing): for the twins' bookkeeping and for metrics. */
export interface PackedApplyResult {
  /** rows whose item took the write, or already held exactly them */
  readonly accepted: StateRow[];
  /** rows dropped because a later checkpoint had written their item */
  readonly rejected: StateRow[];
  readonly itemWrites: number;
  readonly conflicts: number;
}

interface Piece {
  readonly stored: StoredItem;
  readonly expected: number | undefined;
  readonly item: Item;
}

export class PackedStateStore implements StateStore {
  private readonly splitBytes: number;
  private readonly cacheBytes: number;
  private readonly concurrency: number;
  private readonly cache = new Map<string, GroupView>();
  private cached = 0;
  /** writes refused by the version condition (another writer got there first) */
  versionConflicts = 0;

  constructor(
    private readonly table: PackedTable,
    options: PackedStateStoreOptions = {},
  ) {
    this.splitBytes = Math.min(options.splitBytes ?? DEFAULT_SPLIT_BYTES, MAX_ITEM_BYTES);
    this.cacheBytes = options.cacheBytes ?? 32 * 1024 * 1024;
    this.concurrency = options.concurrency ?? 16;
  }

  /**
   * Groups with a cached chain read only the items holding the keys (BatchGetItem, consistent):
   * an item's lowest key never changes and items never leave the chain, so an item read fresh whose
   * `n` is still the cached one still owns the same range. Other groups are read whole (Query).
   */
  async getRows(ids: readonly StateRowId[]): Promise<StateRow[]> {
    const byPk = new Map<string, StateRowId[]>();
    for (const id of ids) {
      const pk = groupPk(id.operatorId, id.keyGroup);
      let l = byPk.get(pk);
      if (!l) byPk.set(pk, (l = []));
      l.push(id);
    }
    const fetch: Array<{ pk: string; sk: string }> = [];
    const whole: string[] = [];
    for (const pk of byPk.keys()) {
      const view = this.cache.get(pk);
      if (!view?.chain.length) {
        whole.push(pk);
        continue;
      }
      const sks = new Set<string>();
      for (const id of byPk.get(pk)!) sks.add(view.chain[route(view.chain, id.key)]!.sk);
      for (const sk of sks) fetch.push({ pk, sk });
    }
    if (fetch.length) {
      const fresh = new Map<string, StoredItem>();
      for (const got of await this.table.getItems(fetch)) fresh.set(`${got.pk}\u0000${got.item.sk}`, got.item);
      const byGroup = new Map<string, StoredItem[]>();
      for (const f of fetch) {
        const item = fresh.get(`${f.pk}\u0000${f.sk}`);
        const cached = this.cache.get(f.pk)?.chain.find((i) => i.sk === f.sk);
        if (!item || item.f === undefined || !cached || item.n !== cached.next) {
          byGroup.delete(f.pk);
          if (!whole.includes(f.pk)) whole.push(f.pk);
          continue;
        }
        if (whole.includes(f.pk)) continue;
        let l = byGroup.get(f.pk);
        if (!l) byGroup.set(f.pk, (l = []));
        l.push(item);
      }
      for (const [pk, items] of byGroup) {
        const view = this.cache.get(pk);
        if (!view) continue;
        const bySk = new Map(items.map((i) => [i.sk, i]));
        // an item at the version already cached keeps its decoded entries
        const chain = view.chain.map((i) => {
          const f = bySk.get(i.sk);
          return !f || (f.r ?? 0) === i.ver ? i : toItem(f);
        });
        this.remember(pk, { ...view, chain, bytes: chain.reduce((a, i) => a + i.size + ITEM_OVERHEAD, 0) });
      }
    }
    const views = new Map<string, GroupView>();
    await this.pool(whole, async (pk) => void views.set(pk, await this.read(pk)));
    const out: StateRow[] = [];
    for (const [pk, list] of byPk) {
      const view = views.get(pk) ?? this.cache.get(pk) ?? (await this.read(pk));
      const seen = new Set<string>();
      for (const id of list) {
        if (seen.has(id.key)) continue;
        seen.add(id.key);
        const row = rowIn(view, id);
        if (row) out.push(row);
      }
    }
    return out;
  }

  /** Every row of one key group (savepoints), with its item's checkpoint. */
  async readGroup(operatorId: string, keyGroup: number): Promise<StateRow[]> {
    const pk = groupPk(operatorId, keyGroup);
    const rows = groupRows(pk, await this.table.query(pk));
    return [...rows].map(([key, r]) => ({ operatorId, keyGroup, key, values: r.values, checkpointId: r.checkpointId }));
  }

  async applyRows(checkpointId: number, _fence: number, rows: readonly StateRow[]): Promise<void> {
    await this.apply(checkpointId, rows);
  }

  /** applyRows, telling what happened to each row. */
  async apply(checkpointId: number, rows: readonly StateRow[]): Promise<PackedApplyResult> {
    // groups in the order their first row comes, found by operator and key group (no pk string per row)
    const groups: Array<{ readonly operatorId: string; readonly keyGroup: number; readonly rows: StateRow[] }> = [];
    const byOp = new Map<string, Map<number, StateRow[]>>();
    let lastOp: string | undefined;
    let lastGroups: Map<number, StateRow[]> | undefined;
    for (const r of rows) {
      if (r.operatorId !== lastOp || !lastGroups) {
        lastOp = r.operatorId;
        lastGroups = byOp.get(lastOp);
        if (!lastGroups) byOp.set(lastOp, (lastGroups = new Map()));
      }
      let l = lastGroups.get(r.keyGroup);
      if (!l) {
        lastGroups.set(r.keyGroup, (l = []));
        groups.push({ operatorId: r.operatorId, keyGroup: r.keyGroup, rows: l });
      }
      l.push(r);
    }
    const result = { accepted: [] as StateRow[], rejected: [] as StateRow[], itemWrites: 0, conflicts: 0 };
    await this.pool(groups, async (g) => {
      const r = await this.applyGroup(groupPk(g.operatorId, g.keyGroup), checkpointId, lastWriteWins(g.rows));
      result.accepted.push(...r.accepted);
      result.rejected.push(...r.rejected);
      result.itemWrites += r.itemWrites;
      result.conflicts += r.conflicts;
    });
    return result;
  }

  /** Forgets cached group views (tests; a table reset). */
  forget(): void {
    this.cache.clear();
    this.cached = 0;
  }

  // ---------------------------------------------------------------------------------------------

  private async pool<T>(items: readonly T[], fn: (t: T) => Promise<void>): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < items.length) await fn(items[next++]!);
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, items.length) }, worker));
  }

  private async read(pk: string): Promise<GroupView> {
    const view = viewOf(pk, await this.table.query(pk));
    this.remember(pk, view);
    return view;
  }

  private remember(pk: string, view: GroupView | undefined): void {
    const old = this.cache.get(pk);
    if (old) {
      this.cached -= old.bytes;
      this.cache.delete(pk);
    }
    if (!view || view.bytes > this.cacheBytes) return;
    this.cache.set(pk, view);
    this.cached += view.bytes;
    for (const [k, v] of this.cache) {
      if (this.cached <= this.cacheBytes) break;
      this.cache.delete(k);
      this.cached -= v.bytes;
    }
  }

  private async applyGroup(pk: string, n: number, rows: StateRow[]): Promise<PackedApplyResult> {
    let conflicts = 0;
    for (let attempt = 0; ; attempt++) {
      const view = this.cache.get(pk) ?? (await this.read(pk));
      const plan = this.plan(view, n, rows);
      let ok = true;
      let writes = 0;
      // new items first: unreachable until the item that links them is written
      for (const batch of [plan.writes.filter((w) => w.expected === undefined && w.stored.sk !== ROOT_SK), plan.writes.filter((w) => w.expected !== undefined || w.stored.sk === ROOT_SK)]) {
        const res = await Promise.all(batch.map((w) => this.table.put(pk, w.stored, w.expected)));
        writes += batch.length;
        if (res.some((x) => !x)) {
          ok = false;
          break;
        }
      }
      if (ok) {
        const chain = plan.chain;
        const next: GroupView = { chain, orphans: [], legacy: new Map(), legacySks: [], bytes: chain.reduce((a, i) => a + i.size + ITEM_OVERHEAD, 0) };
        this.remember(pk, next);
        await this.cleanUp(pk, view, plan.chain);
        return { accepted: plan.accepted, rejected: plan.rejected, itemWrites: writes, conflicts };
      }
      conflicts++;
      this.versionConflicts++;
      this.remember(pk, undefined);
      // The new pieces stay: a rewrite that succeeded beside the one that failed may link them
      // already, and so may a write that applied but answered "condition failed" (an SDK retry of
      // an applied PutItem). Pieces nobody links are deleted by the next successful write (cleanUp),
      // once their parent has passed the version that would have linked them.
      if (attempt >= 20) throw new SluiceError(`state items of ${pk}: still contended after ${attempt + 1} attempts`, 'STATE_CONTENDED', true);
    }
  }

  /** Deletes what no reader looks at any more: unlinked items whose link can no longer happen, and rows of the older layout. */
  private async cleanUp(pk: string, before: GroupView, chain: readonly Item[]): Promise<void> {
    const bySk = new Map(chain.map((i) => [i.sk, i]));
    // an unlinked item is dead once its parent reached the version that would have linked it (and
    // did not); before that, a split may still be about to link it
    const dead = before.orphans.filter((o) => {
      const parent = o.parent === undefined ? undefined : bySk.get(o.parent);
      return o.parent === undefined || (parent !== undefined && parent.ver >= (o.parentVer ?? 0));
    });
    // rows of the older layout: the root holds them now
    await Promise.all([...dead.map((o) => this.table.delete(pk, o.sk, o.ver)), ...before.legacySks.map((sk) => this.table.delete(pk, sk))]);
  }

  private plan(view: GroupView, n: number, rows: readonly StateRow[]): { writes: Piece[]; chain: Item[]; accepted: StateRow[]; rejected: StateRow[] } {
    let chain = view.chain;
    const accepted: StateRow[] = [];
    const rejected: StateRow[] = [];
    if (!chain.length) {
      // no root yet: it starts with the rows of the older layout, if any
      const entries: Entry[] = [];
      let ckpt = 0;
      for (const [k, e] of view.legacy) {
        if (Object.keys(e.values).length) entries.push(entryOf(k, e.values));
        ckpt = Math.max(ckpt, e.ckpt);
      }
      entries.sort((a, b) => compareKeys(a.key, b.key));
      const root: Item = { sk: ROOT_SK, lo: undefined, next: undefined, ckpt, ver: 0, size: 0, entries, d: new Uint8Array(0) };
      chain = [root];
    }
    const touched = new Map<number, readonly StateRow[]>();
    if (chain.length === 1 && rows.length) touched.set(0, rows); // (most groups: one item holds every key)
    else {
      for (const r of rows) {
        const i = route(chain, r.key);
        let l = touched.get(i) as StateRow[] | undefined;
        if (!l) touched.set(i, (l = []));
        l.push(r);
      }
    }
    const writes: Piece[] = [];
    const newChain: Item[] = [];
    for (let i = 0; i < chain.length; i++) {
      const item = chain[i]!;
      const mine = touched.get(i);
      if (!mine) {
        newChain.push(item);
        continue;
      }
      if (item.ckpt > n) {
        // a later checkpoint wrote this item: this writer is behind, its rows are stale
        rejected.push(...mine);
        newChain.push(item);
        continue;
      }
      accepted.push(...mine);
      const ckpt = Math.max(item.ckpt, n);
      const expected = item.ver === 0 ? undefined : item.ver;
      // whether the rows change the item matters only if it needs no write for the checkpoint's sake
      const compare = item.ver !== 0 && item.ckpt >= n;
      // the common case on the item's bytes: no entry objects made, none kept for the next checkpoint
      // (a group's new root, with no rows of the older layout to start from: made from the rows alone)
      const fast = compare ? undefined : item.size > 0 ? mergeIntoEntries(item.d, mine, item.lo, chain[i + 1]?.lo, ITEM_OVERHEAD) : item.entries?.length === 0 && view.chain.length === 0 ? entriesFromRows(mine, ITEM_OVERHEAD) : undefined;
      if (fast && fast.size <= this.splitBytes) {
        const stored: StoredItem = { sk: item.sk, f: PACKED_FORMAT, c: ckpt, r: item.ver + 1, ...(item.lo !== undefined ? { l: item.lo } : {}), ...(item.next !== undefined ? { n: item.next } : {}), d: fast.d };
        const it: Item = { sk: item.sk, lo: item.lo, next: item.next, ckpt, ver: item.ver + 1, size: fast.d.length, entries: undefined, d: fast.d };
        writes.push({ stored, expected, item: it });
        newChain.push(it);
        continue;
      }
      const merged = mergeRows(entriesOf(item), mine, item.lo, chain[i + 1]?.lo, compare);
      if (!merged.changed && item.ver !== 0 && item.ckpt >= n) {
        newChain.push(item);
        continue;
      }
      const pieces = this.split(merged.entries, merged.bytes);
      const sks = pieces.map((_, j) => (j === 0 ? item.sk : newSk()));
      for (let j = 0; j < pieces.length; j++) {
        const piece = pieces[j]!;
        const d = encodeSortedEntries(piece.entries);
        const lo = j === 0 ? item.lo : piece.entries[0]!.key;
        const next = j + 1 < pieces.length ? sks[j + 1] : item.next;
        const ver = j === 0 ? item.ver + 1 : 1;
        const stored: StoredItem = {
          sk: sks[j]!,
          f: PACKED_FORMAT,
          c: ckpt,
          r: ver,
          ...(lo !== undefined ? { l: lo } : {}),
          ...(next !== undefined ? { n: next } : {}),
          ...(j > 0 ? { p: item.sk, q: item.ver + 1 } : {}),
          d,
        };
        const it: Item = { sk: sks[j]!, lo, next, ckpt, ver, size: d.length, entries: piece.entries, d };
        writes.push({ stored, expected: j === 0 ? expected : undefined, item: it });
        newChain.push(it);
      }
    }
    return { writes, chain: newChain, accepted, rejected };
  }

  /** One run if it fits `splitBytes`, else runs of ascending keys of about half that each. */
  private split(entries: Entry[], total: number): Array<{ entries: Entry[]; bytes: number }> {
    if (total <= this.splitBytes || entries.length < 2) return [{ entries, bytes: total }];
    const pieces = Math.max(2, Math.ceil(total / (0.75 * this.splitBytes)));
    const target = total / pieces;
    const out: Array<{ entries: Entry[]; bytes: number }> = [];
    let cur: Entry[] = [];
    let bytes = ITEM_OVERHEAD;
    for (const e of entries) {
      const b = e.size;
      if (cur.length && (bytes + b > MAX_ITEM_BYTES || bytes + b / 2 > target)) {
        out.push({ entries: cur, bytes });
        cur = [];
        bytes = ITEM_OVERHEAD;
      }
      cur.push(e);
      bytes += b;
    }
    if (cur.length) out.push({ entries: cur, bytes });
    return out;
  }
}

function inRangeOf(chain: readonly Item[], i: number, key: string): boolean {
  const lo = chain[i]!.lo;
  const hi = chain[i + 1]?.lo;
  return (lo === undefined || compareKeys(lo, key) <= 0) && (hi === undefined || compareKeys(key, hi) < 0);
}

function rowIn(view: GroupView, id: StateRowId): StateRow | undefined {
  if (!view.chain.length) {
    const e = view.legacy.get(id.key);
    return e ? { operatorId: id.operatorId, keyGroup: id.keyGroup, key: id.key, values: e.values, checkpointId: e.ckpt } : undefined;
  }
  const item = view.chain[route(view.chain, id.key)]!;
  // a key its item does not hold is cleared (or never written); the item's checkpoint still tells a zombie it is behind
  const values = find(entriesOf(item), id.key)?.values ?? {};
  return { operatorId: id.operatorId, keyGroup: id.keyGroup, key: id.key, values, checkpointId: item.ckpt };
}

/** The rows a group's stored items hold, as readers see them (key → values and item checkpoint). */
export function groupRows(pk: string, stored: readonly StoredItem[]): Map<string, { values: Values; checkpointId: number }> {
  const view = viewOf(pk, stored);
  const out = new Map<string, { values: Values; checkpointId: number }>();
  if (!view.chain.length) {
    for (const [key, e] of view.legacy) if (Object.keys(e.values).length) out.set(key, { values: e.values, checkpointId: e.ckpt });
    return out;
  }
  view.chain.forEach((item, i) => {
    for (const { key, values } of entriesOf(item)) if (inRangeOf(view.chain, i, key)) out.set(key, { values, checkpointId: item.ckpt });
  });
  return out;
}
