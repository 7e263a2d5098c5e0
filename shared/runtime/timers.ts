/**
 * Timers of an instance's keyed operators: (domain, operator, key, time). They are part of the
 * snapshot (written whole with each delta) and fire in a deterministic order — by time, then
 * operator, then key — so a replay fires them the same way.
 *
 * Layout: per domain, one bucket per distinct time (operator → key → timer, which gives the set
 * semantics without building an id per timer), and a min-heap of those times. A watermark finds
 * its due timers from the heap's top instead of scanning every timer; a bucket is sorted by
 * (operator, key) once, when it starts to fire.
 */
import { KeptList, type ItemWriter, type KeptEncoding } from '../codec/payload-writer.js';
import type { KeyEntry } from './state-handles.js';

export type TimeDomain = 'event-time' | 'processing-time';

export interface Timer {
  readonly domain: TimeDomain;
  readonly operatorId: string;
  readonly key: string;
  readonly keyGroup: number;
  readonly time: number;
  /**
   * The state cache's entry of (operator, key) when the timer was registered, if its operator gave
   * it: the firing finds the key's state without a lookup while the entry is still the cache's
   * (`KeyEntry.dropped` says when it no longer is). Not part of a snapshot. An entry the cache
   * evicts stays in memory until its timers fire or are registered again (a window's end at most).
   */
  readonly state?: KeyEntry | undefined;
}

type TimerRow = [TimeDomain, string, string, number, number];

/** A timer's snapshot row. */
export const timerRow = (t: Timer): TimerRow => [t.domain, t.operatorId, t.key, t.keyGroup, t.time];

/** The bytes of `timerRow(t)` written straight (`KeptList`'s `write`): no array per timer. */
export function writeTimerRow(t: Timer, to: ItemWriter): boolean {
  to.arrayHeader(5);
  if (!to.string(t.domain) || !to.string(t.operatorId) || !to.string(t.key)) return false;
  to.number(t.keyGroup);
  to.number(t.time);
  return true;
}

/**
 * A timer as the index holds it. `live` turns false when it fires or is deleted: the bucket's map
 * keeps it until the bucket is dropped whole, so firing a timer costs no map lookup or deletion
 * (deleting thousands of keys one by one from a map also shrinks and rehashes it again and again).
 * Its time is its bucket's, boxed once for all of them (`SharedTime`): a time of its own would be a
 * boxed number per timer (a time is past a small integer's range), one more object for every window
 * of every key to carry until it fires.
 */
class Entry implements Timer, GuidedTimer, KeptEncoding {
  live = true;
  sortPass = 0;
  /** its snapshot row's bytes, once snapshots wrote them (`snapshotRows`) */
  keptBytes: Uint8Array | undefined = undefined;
  keptLength = 0;
  constructor(
    readonly domain: TimeDomain,
    readonly operatorId: string,
    readonly key: string,
    readonly keyGroup: number,
    private readonly at: SharedTime,
    public state: KeyEntry | undefined,
  ) {}
  get time(): number {
    return this.at.time;
  }
}

/**
 * The time of a bucket's timers, which they point to. Not the bucket itself: a timer kept past its
 * bucket (a record's noted changes, a dead letter) would keep the bucket's map of timers alive.
 */
class SharedTime {
  constructor(readonly time: number) {}
}

/** (operator, key) order within one time */
const compareInBucket = (a: Timer, b: Timer) => (a.operatorId !== b.operatorId ? (a.operatorId < b.operatorId ? -1 : 1) : a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

/** The timers of one domain due at one time. */
class Bucket {
  /** operator → key → timer (dead ones too, see Entry) */
  readonly byOperator = new Map<string, Map<string, Entry>>();
  /** live timers */
  size = 0;
  /** while the bucket fires: its timers in firing order, and how far firing got */
  order: Entry[] | undefined = undefined;
  next = 0;
  /**
   * The timers in (operator, key) order as the last `sorted` left them (dead ones may be among
   * them), and those added since, unsorted: a bucket written to a checkpoint and fired later is
   * sorted whole once, then the later additions are merged in.
   */
  private cache: Entry[] | undefined = undefined;
  private fresh: Entry[] = [];
  readonly shared: SharedTime;
  constructor(
    readonly time: number,
    /** the domain's key guide per operator */
    private readonly guides: Map<string, KeyGuide>,
  ) {
    this.shared = new SharedTime(time);
  }

  added(t: Entry): void {
    if (this.order !== undefined) insertInOrder(this, t);
    else if (this.cache !== undefined) this.fresh.push(t);
  }

  /**
   * The live timers in (operator, key) order. The array is the bucket's own (the cache, or the
   * firing order): read it, do not keep or change it. `startFiring` takes it over, dropping the cache.
   */
  sorted(firing = false): readonly Entry[] {
    // while it fires, the part of `order` not fired yet is that order (adds are put in place)
    if (this.order !== undefined) return this.unfired();
    let out: Entry[];
    if (this.cache === undefined) out = this.sortAll(firing);
    else if (!this.fresh.length) out = this.cache.filter((t) => t.live);
    // few added since: sorted with a comparator and merged in; many: sorted whole, by the guide
    // (a bucket written to a checkpoint when its window had just begun is mostly added later)
    else if (this.fresh.length <= this.cache.length) out = mergeLive(this.cache, this.fresh.filter((t) => t.live).sort(compareInBucket));
    else out = this.sortAll(firing);
    this.cache = out;
    this.fresh = [];
    return out;
  }

  /** The live timers not fired yet, in firing order: `order` itself when it holds no others. */
  unfired(): readonly Entry[] {
    const order = this.order!;
    if (this.next === 0 && order.length === this.size) return order;
    const out: Entry[] = [];
    for (let i = this.next; i < order.length; i++) if (order[i]!.live) out.push(order[i]!);
    return out;
  }

  /** Firing starts: its order is kept up to date from here (`insertInOrder`), the cache is no longer. */
  startFiring(): void {
    // the array becomes the order's alone: the cache that held it is dropped
    this.order = this.sorted(true) as Entry[];
    this.next = 0;
    this.cache = undefined;
  }

  /** The live timers in (operator, key) order, each operator's keys put in order by its guide. */
  private sortAll(firing: boolean): Entry[] {
    const out: Entry[] = [];
    const ops = [...this.byOperator.keys()];
    if (ops.length > 1) ops.sort();
    for (const op of ops) {
      let g = this.guides.get(op);
      if (g === undefined) this.guides.set(op, (g = new KeyGuide()));
      g.order(this.byOperator.get(op)!, out, firing);
    }
    return out;
  }
}

/** What `KeyGuide` needs of a timer. */
export interface GuidedTimer {
  readonly key: string;
  readonly live: boolean;
  /** the guide's pass that last found this timer's key in its order */
  sortPass: number;
}

/**
 * A bucket whose keys number less than the guide's ÷ this is sorted on its own: walking the whole
 * guide would cost more lookups than sorting its few keys (one sorted at a checkpoint just after
 * its window began). It leaves the guide as it is, unless this many buckets in a row were sorted so
 * as they started firing: then the operator's windows have become small, and the guide is the last
 * one's keys. (A checkpoint sorts the buckets of windows just begun, many with sliding windows: those
 * count for nothing.)
 */
const SPARSE = 8;
const SPARSE_RUN = 3;

/**
 * One operator's keys in sorted order, as earlier buckets had them: a bucket's keys are put in
 * firing order from it. Consecutive windows share most keys, so walking the guide and taking the
 * bucket's live timers in its order (a subsequence of a sorted list is sorted) orders most of them
 * with one lookup each; only keys the guide lacks are sorted, then merged in. When the guide holds
 * every key of the bucket, nothing is sorted and the guide is left as it is. The guide is the union
 * of the keys of earlier buckets while the bucket finds at least half of it (a window has a share of
 * the keys, the next another share of the same keys), else it is this bucket's keys: it is at most
 * about three times a bucket, and keys that stopped coming leave it. Keys are compared as plain
 * strings (the default sort orders UTF-16 code units, as `<` does); keys are unique within an
 * operator. Not part of a snapshot: any guide gives the same order.
 */
export class KeyGuide {
  private keys: string[] | undefined = undefined;
  private pass = 0;
  /** buckets sorted on their own in a row */
  private sparse = 0;

  /** How many keys the guide holds. */
  get length(): number {
    return this.keys?.length ?? 0;
  }

  /**
   * Appends the live timers of `keys` (key → timer, the key its own) to `out` in key order.
   * `firing`: the bucket starts firing (so has its keys), not sorted for a snapshot.
   */
  order<T extends GuidedTimer>(keys: ReadonlyMap<string, T>, out: T[], firing = true): void {
    const guide = this.keys;
    const n = keys.size; // dead timers too
    if (guide === undefined || n * SPARSE < guide.length) {
      const names: string[] = [];
      for (const [k, t] of keys) if (t.live) names.push(k);
      names.sort();
      for (let i = 0; i < names.length; i++) out.push(keys.get(names[i]!)!);
      if (guide === undefined || (firing && ++this.sparse >= SPARSE_RUN)) {
        this.keys = names;
        this.sparse = 0;
      }
      return;
    }
    this.sparse = 0;
    const pass = ++this.pass;
    const start = out.length;
    for (let i = 0; i < guide.length; i++) {
      const t = keys.get(guide[i]!);
      if (t !== undefined && t.live) {
        t.sortPass = pass;
        out.push(t);
      }
    }
    const found = out.length - start;
    // every timer of the bucket found: the order is complete, the guide holds it already
    if (found === n) return;
    const added: string[] = [];
    for (const [k, t] of keys) if (t.live && t.sortPass !== pass) added.push(k);
    if (!added.length) return;
    added.sort();
    const kept = out.slice(start);
    out.length = start;
    // one merge of the guide and the added keys gives both the bucket's order and the next guide
    const union = found * 2 >= guide.length;
    const names: string[] = [];
    let i = 0;
    let j = 0;
    let f = 0;
    while (i < guide.length || j < added.length) {
      if (j >= added.length || (i < guide.length && guide[i]! < added[j]!)) {
        const k = guide[i++]!;
        if (f < kept.length && kept[f]!.key === k) {
          out.push(kept[f++]!);
          names.push(k);
        } else if (union) names.push(k);
      } else {
        const k = added[j++]!;
        out.push(keys.get(k)!);
        names.push(k);
      }
    }
    this.keys = names;
  }
}

/** The live timers of two lists in (operator, key) order, merged (a live timer is in one of them only). */
function mergeLive(a: readonly Entry[], b: readonly Entry[]): Entry[] {
  const out: Entry[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const x = a[i];
    if (x !== undefined && !x.live) {
      i++;
      continue;
    }
    const y = b[j];
    if (y === undefined || (x !== undefined && compareInBucket(x, y) < 0)) {
      out.push(x!);
      i++;
    } else {
      out.push(y);
      j++;
    }
  }
  return out;
}

class DomainTimers {
  readonly buckets = new Map<number, Bucket>();
  /** per operator, the order of its keys (`KeyGuide`) */
  readonly guides = new Map<string, KeyGuide>();
  /** the bucket `popDue` took its last timer from */
  firing: Bucket | undefined = undefined;
  /** min-heap of the times that have (or had) a bucket; times without one are dropped lazily */
  readonly times: number[] = [];

  /** The earliest time that has a bucket, or undefined. */
  top(): number | undefined {
    const h = this.times;
    while (h.length) {
      const t = h[0]!;
      if (this.buckets.has(t)) return t;
      heapPop(h);
    }
    return undefined;
  }

  /** The buckets in time order. */
  inOrder(): Bucket[] {
    return [...this.buckets.values()].sort((a, b) => a.time - b.time);
  }
}

export class TimerIndex {
  private readonly eventTime = new DomainTimers();
  private readonly processingTime = new DomainTimers();
  private count = 0;
  // the bucket and operator map the last add went to: records of one window share them
  private lastBucket: Bucket | undefined;
  private lastDomain: DomainTimers | undefined;
  private lastOperator: string | undefined;
  private lastKeys: Map<string, Entry> | undefined;
  /**
   * While a record is applied: the timers it added (true) or deleted (false), in order, so that a
   * record whose function throws can be undone (`rollbackRecord`).
   */
  private recording = false;
  private readonly changed: Timer[] = [];
  private readonly added: boolean[] = [];
  /**
   * How many of `changed` belong to the current record. The arrays are overwritten, not emptied:
   * emptying an array drops its storage, and most records would then allocate it again.
   */
  private nChanged = 0;

  get size(): number {
    return this.count;
  }

  private domain(d: TimeDomain): DomainTimers {
    return d === 'event-time' ? this.eventTime : this.processingTime;
  }

  /** Adds a timer; a timer of the same (domain, operator, key, time) already there stays. */
  add(t: Timer): void {
    this.register(t.domain, t.operatorId, t.key, t.keyGroup, t.time, t.state);
  }

  /** `add` without making its argument; `state`: the key's state entry (see Timer.state). */
  register(domain: TimeDomain, operatorId: string, key: string, keyGroup: number, time: number, state?: KeyEntry): void {
    const dt = this.domain(domain);
    let keys: Map<string, Entry> | undefined;
    let b = this.lastBucket;
    if (b !== undefined && b.time === time && this.lastDomain === dt && this.lastOperator === operatorId) keys = this.lastKeys!;
    else {
      b = dt.buckets.get(time);
      if (b === undefined) {
        dt.buckets.set(time, (b = new Bucket(time, dt.guides)));
        heapPush(dt.times, time);
      }
      keys = b.byOperator.get(operatorId);
      if (keys === undefined) b.byOperator.set(operatorId, (keys = new Map()));
      this.lastBucket = b;
      this.lastDomain = dt;
      this.lastOperator = operatorId;
      this.lastKeys = keys;
    }
    const old = keys.get(key);
    if (old !== undefined && old.live) {
      // the entry the key's state is in now (a timer from a snapshot has none yet)
      if (state !== undefined) old.state = state;
      return;
    }
    const t = new Entry(domain, operatorId, key, keyGroup, b.shared, state);
    keys.set(key, t);
    b.size++;
    this.count++;
    b.added(t);
    if (this.recording) this.note(t, true);
  }

  delete(t: Pick<Timer, 'domain' | 'operatorId' | 'key' | 'time'>): void {
    this.remove(t.domain, t.operatorId, t.key, t.time);
  }

  /** `delete` without making its argument. */
  remove(domain: TimeDomain, operatorId: string, key: string, time: number): void {
    const dt = this.domain(domain);
    const b = dt.buckets.get(time);
    const t = b?.byOperator.get(operatorId)?.get(key);
    if (t === undefined || !t.live) return;
    t.live = false;
    this.count--;
    if (--b!.size === 0) this.dropBucket(dt, b!);
    if (this.recording) this.note(t, false);
  }

  /** Starts a record: the timers it adds and deletes are noted. */
  beginRecord(): void {
    this.recording = true;
  }

  private note(t: Timer, added: boolean): void {
    const i = this.nChanged++;
    this.changed[i] = t;
    this.added[i] = added;
  }

  /** The record was applied whole. */
  commitRecord(): void {
    this.recording = false;
    this.endRecord();
  }

  /** The record failed: its additions and deletions are undone, last first. */
  rollbackRecord(): void {
    this.recording = false;
    for (let i = this.nChanged - 1; i >= 0; i--) {
      const t = this.changed[i]!;
      if (this.added[i]) this.remove(t.domain, t.operatorId, t.key, t.time);
      else this.add(t);
    }
    this.endRecord();
  }

  private endRecord(): void {
    this.nChanged = 0;
    // a record that changed many timers does not leave them held
    if (this.changed.length > 64) this.changed.length = this.added.length = 0;
  }

  private dropBucket(dt: DomainTimers, b: Bucket): void {
    dt.buckets.delete(b.time);
    if (dt.firing === b) dt.firing = undefined;
    if (this.lastBucket === b) this.lastBucket = this.lastDomain = this.lastOperator = this.lastKeys = undefined;
  }

  /** Removes and returns the earliest live timer of the domain due at `upTo`, if any. */
  popDue(domain: TimeDomain, upTo: number): Timer | undefined {
    const dt = this.domain(domain);
    for (;;) {
      // the bucket the last pop took from, while it is still the earliest (no map lookups per pop)
      let b = dt.firing;
      if (b === undefined || b.size === 0 || dt.times[0] !== b.time) {
        const time = dt.top();
        if (time === undefined) return undefined;
        dt.firing = b = dt.buckets.get(time)!;
      }
      if (b.time > upTo) return undefined;
      if (b.order === undefined) b.startFiring();
      const order = b.order!;
      while (b.next < order.length) {
        const t = order[b.next++]!;
        if (!t.live) continue; // deleted since (if added again, the new one is in the order too)
        t.live = false;
        this.count--;
        if (--b.size === 0) this.dropBucket(dt, b);
        return t;
      }
      // adds keep `order` complete, so this is not reached; should it be, sort what is left again
      b.order = undefined;
    }
  }

  /**
   * Timers due at `upTo`, without removing them (to prefetch their keys' state). The due buckets
   * start firing here, and a lone due bucket's order is returned as it is: a window's firing walks
   * no map of its keys and copies nothing. Read the array before the index changes.
   */
  peekDue(domain: TimeDomain, upTo: number): readonly Timer[] {
    const dt = this.domain(domain);
    const first = dt.top();
    if (first === undefined || first > upTo) return [];
    let one: Bucket | undefined;
    let more: Bucket[] | undefined;
    for (const b of dt.buckets.values()) {
      if (b.time > upTo) continue;
      if (b.order === undefined) b.startFiring();
      if (one === undefined) one = b;
      else (more ??= [one]).push(b);
    }
    if (more === undefined) return one!.unfired();
    const out: Timer[] = [];
    for (const b of more) for (const t of b.unfired()) out.push(t);
    return out;
  }

  /** Every timer, in no particular order. */
  *values(): IterableIterator<Timer> {
    for (const dt of [this.eventTime, this.processingTime]) {
      for (const b of dt.buckets.values()) for (const keys of b.byOperator.values()) for (const t of keys.values()) if (t.live) yield t;
    }
  }

  /**
   * All timers in firing order (by time, operator, key; event time first): the same rows whoever
   * holds them. Each domain's buckets are sorted on their own (a bucket's keys as plain strings),
   * then the two domains merged.
   */
  toJSON(): TimerRow[] {
    return this.ordered().map(timerRow);
  }

  /**
   * The rows of `toJSON` as a snapshot writes them: each timer's row is written straight
   * (`writeTimerRow`), its bytes kept the second time and copied from then on (a timer is written
   * into every delta until it fires).
   */
  snapshotRows(): KeptList<Entry> {
    return new KeptList(this.ordered(), timerRow, writeTimerRow);
  }

  private ordered(): Entry[] {
    const ev = this.entriesOf(this.eventTime);
    const pt = this.entriesOf(this.processingTime);
    if (!pt.length) return ev;
    if (!ev.length) return pt;
    const out: Entry[] = [];
    let i = 0;
    let j = 0;
    while (i < ev.length && j < pt.length) {
      const a = ev[i]!;
      const b = pt[j]!;
      // equal (time, operator, key): event time first
      if (a.time !== b.time ? a.time < b.time : a.operatorId !== b.operatorId ? a.operatorId < b.operatorId : a.key <= b.key) out.push(ev[i++]!);
      else out.push(pt[j++]!);
    }
    while (i < ev.length) out.push(ev[i++]!);
    while (j < pt.length) out.push(pt[j++]!);
    return out;
  }

  private entriesOf(dt: DomainTimers): Entry[] {
    const out: Entry[] = [];
    for (const b of dt.inOrder()) for (const t of b.sorted()) out.push(t);
    return out;
  }

  static fromJSON(rows: ReadonlyArray<TimerRow>): TimerIndex {
    const idx = new TimerIndex();
    for (const [domain, operatorId, key, keyGroup, time] of rows) idx.register(domain, operatorId, key, keyGroup, time);
    return idx;
  }
}

/** Adds a timer to a bucket that is firing: into the part not fired yet, at its place. */
function insertInOrder(b: Bucket, t: Entry): void {
  const order = b.order!;
  let lo = b.next;
  let hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareInBucket(order[mid]!, t) < 0) lo = mid + 1;
    else hi = mid;
  }
  order.splice(lo, 0, t);
}

function heapPush(h: number[], x: number): void {
  h.push(x);
  let i = h.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (h[p]! <= x) break;
    h[i] = h[p]!;
    i = p;
  }
  h[i] = x;
}

function heapPop(h: number[]): void {
  const last = h.pop()!;
  const n = h.length;
  if (!n) return;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= n) break;
    const r = l + 1;
    const m = r < n && h[r]! < h[l]! ? r : l;
    if (h[m]! >= last) break;
    h[i] = h[m]!;
    i = m;
  }
  h[i] = last;
}
