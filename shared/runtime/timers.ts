/**
 * Timers of an instance's keyed operators: (domain, operator, key, time). They are part of the
 * snapshot (written whole with each delta) and fire in a deterministic order — by time, then in
 * the order they were registered — so a replay fires them the same way: a snapshot writes them in
 * that order and a restore registers them in it, and the records replayed after it register the
 * rest as the run they replay did. (A record undone puts a timer it deleted back in its place.)
 *
 * Layout: per domain, one bucket per distinct time (the timers in registration order, and operator →
 * key → timer, which gives the set semantics without building an id per timer — built only once a
 * lookup needs it), and a min-heap of those times. A watermark finds its due timers from the heap's
 * top instead of scanning every timer, and a bucket fires by walking its order: nothing is sorted
 * by key.
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
 * A timer as the index holds it. `live` turns false when it fires or is deleted: its bucket's order
 * (and map, once built) keeps it until the bucket is dropped whole or compacted, so firing a timer
 * costs no map lookup or deletion (deleting thousands of keys one by one from a map also shrinks and
 * rehashes it again and again).
 * Its time is its bucket's, boxed once for all of them (`SharedTime`): a time of its own would be a
 * boxed number per timer (a time is past a small integer's range), one more object for every window
 * of every key to carry until it fires.
 */
class Entry implements Timer, KeptEncoding {
  live = true;
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

/** The timers of one domain due at one time. */
class Bucket {
  /**
   * operator → key → timer (dead ones too, see Entry), built from the order the first time a
   * lookup needs it (`keysOf`) and kept whole from then on: a bucket only ever given timers their
   * callers know are new (`registerNew`, a window's ends) is never asked, and costs no map.
   */
  private byOperator: Map<string, Map<string, Entry>> | undefined = undefined;
  private lastOperator: string | undefined = undefined;
  private lastKeys: Map<string, Entry> | undefined = undefined;
  /** live timers */
  size = 0;
  /**
   * Its timers in registration order, which is their firing order, dead ones among them until
   * `compact` drops them; firing has taken those before `next` (all dead).
   */
  order: Entry[] = [];
  next = 0;
  readonly shared: SharedTime;
  constructor(readonly time: number) {
    this.shared = new SharedTime(time);
  }

  /** The timers of `operatorId` by key (at most one live per key), the map built if it was not. */
  keysOf(operatorId: string): Map<string, Entry> {
    if (operatorId === this.lastOperator) return this.lastKeys!;
    let all = this.byOperator;
    if (all === undefined) {
      all = this.byOperator = new Map();
      // the live timers: before `next` all are dead, and a dead one in the map is as good as none
      for (let i = this.next; i < this.order.length; i++) {
        const t = this.order[i]!;
        if (t.live) keysIn(all, t.operatorId).set(t.key, t);
      }
    }
    this.lastOperator = operatorId;
    return (this.lastKeys = keysIn(all, operatorId));
  }

  /** `keysOf` if the map was built, else undefined. */
  builtKeysOf(operatorId: string): Map<string, Entry> | undefined {
    return this.byOperator === undefined ? undefined : this.keysOf(operatorId);
  }

  /** The live timers not fired yet, in firing order: `order` itself when it holds no others (read it, do not keep or change it). */
  unfired(): readonly Entry[] {
    const order = this.order;
    if (this.next === 0 && order.length === this.size) return order;
    const out: Entry[] = [];
    for (let i = this.next; i < order.length; i++) if (order[i]!.live) out.push(order[i]!);
    return out;
  }

  /**
   * Whether the dead timers outnumber the live ones enough to drop them from the order: a timer
   * deleted and registered again goes to the end each time, and would otherwise leave its dead
   * entries behind for as long as the bucket lives.
   */
  get sparse(): boolean {
    return this.order.length - this.next > 2 * this.size + 16;
  }

  /** Drops the dead timers from the order (its live ones keep their order). */
  compact(): void {
    this.order = this.unfired() as Entry[];
    this.next = 0;
  }
}

function keysIn(all: Map<string, Map<string, Entry>>, operatorId: string): Map<string, Entry> {
  let keys = all.get(operatorId);
  if (keys === undefined) all.set(operatorId, (keys = new Map()));
  return keys;
}

class DomainTimers {
  readonly buckets = new Map<number, Bucket>();
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
  // the bucket the last add went to: records of one window share it
  private lastBucket: Bucket | undefined;
  private lastDomain: DomainTimers | undefined;
  /**
   * While a record is applied: the timers it added (true) or deleted (false), in order, so that a
   * record whose function throws can be undone (`rollbackRecord`).
   */
  private recording = false;
  private readonly changed: Entry[] = [];
  private readonly added: boolean[] = [];
  /**
   * How many of `changed` belong to the current record. The arrays are overwritten, not emptied:
   * emptying an array drops its storage, and most records would then allocate it again.
   */
  private nChanged = 0;
  /** buckets a record emptied or left sparse, dropped or compacted at its end (`kill`) */
  private readonly tidyLater: Array<[DomainTimers, Bucket]> = [];

  get size(): number {
    return this.count;
  }

  /** @internal timers the buckets' orders hold, dead ones not dropped yet included */
  get heldEntries(): number {
    let n = 0;
    for (const dt of [this.eventTime, this.processingTime]) for (const b of dt.buckets.values()) n += b.order.length - b.next;
    return n;
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
    const b = this.bucket(dt, time);
    const keys = b.keysOf(operatorId);
    const old = keys.get(key);
    if (old !== undefined && old.live) {
      // the entry the key's state is in now (a timer from a snapshot has none yet)
      if (state !== undefined) old.state = state;
      return;
    }
    keys.set(key, this.append(b, domain, operatorId, key, keyGroup, state));
  }

  /**
   * `register` of a timer its caller knows is not there (a window's end, registered with the
   * window): no lookup. A bucket that has built its map (a restored timer, or a lookup since)
   * still looks it up there, so a timer that was there after all stays one.
   */
  registerNew(domain: TimeDomain, operatorId: string, key: string, keyGroup: number, time: number, state?: KeyEntry): void {
    const b = this.bucket(this.domain(domain), time);
    if (b.builtKeysOf(operatorId) !== undefined) return this.register(domain, operatorId, key, keyGroup, time, state);
    this.append(b, domain, operatorId, key, keyGroup, state);
  }

  /** The bucket of `time`, made if there is none. */
  private bucket(dt: DomainTimers, time: number): Bucket {
    const last = this.lastBucket;
    if (last !== undefined && last.time === time && this.lastDomain === dt) return last;
    let b = dt.buckets.get(time);
    if (b === undefined) {
      dt.buckets.set(time, (b = new Bucket(time)));
      heapPush(dt.times, time);
    }
    this.lastBucket = b;
    this.lastDomain = dt;
    return b;
  }

  /** A new live timer at the end of its bucket's order. */
  private append(b: Bucket, domain: TimeDomain, operatorId: string, key: string, keyGroup: number, state: KeyEntry | undefined): Entry {
    const t = new Entry(domain, operatorId, key, keyGroup, b.shared, state);
    b.size++;
    this.count++;
    b.order.push(t);
    if (this.recording) this.note(t, true);
    return t;
  }

  delete(t: Pick<Timer, 'domain' | 'operatorId' | 'key' | 'time'>): void {
    this.remove(t.domain, t.operatorId, t.key, t.time);
  }

  /** `delete` without making its argument. */
  remove(domain: TimeDomain, operatorId: string, key: string, time: number): void {
    const dt = this.domain(domain);
    const b = dt.buckets.get(time);
    const t = b?.keysOf(operatorId).get(key);
    if (t === undefined || !t.live) return;
    this.kill(dt, b!, t);
    if (this.recording) this.note(t, false);
  }

  /**
   * Marks a live timer dead. Its bucket is dropped once empty and compacted once sparse — at the
   * record's end while a record is applied, so that its undo finds the bucket and the timer's place
   * in its order as they were.
   */
  private kill(dt: DomainTimers, b: Bucket, t: Entry): void {
    t.live = false;
    this.count--;
    b.size--;
    if (b.size > 0 && !b.sparse) return;
    if (this.recording) this.tidyLater.push([dt, b]);
    else this.tidy(dt, b);
  }

  private tidy(dt: DomainTimers, b: Bucket): void {
    if (dt.buckets.get(b.time) !== b) return;
    if (b.size === 0) this.dropBucket(dt, b);
    else if (b.sparse) b.compact();
  }

  /** Puts back a timer the record at hand deleted, in its place: its bucket is still there (see kill). */
  private revive(t: Entry): void {
    const dt = this.domain(t.domain);
    const b = dt.buckets.get(t.time)!;
    // the key may point at a timer registered after the deletion, which the undo has killed already
    b.builtKeysOf(t.operatorId)?.set(t.key, t);
    t.live = true;
    b.size++;
    this.count++;
  }

  /** Starts a record: the timers it adds and deletes are noted. */
  beginRecord(): void {
    this.recording = true;
  }

  private note(t: Entry, added: boolean): void {
    const i = this.nChanged++;
    this.changed[i] = t;
    this.added[i] = added;
  }

  /** The record was applied whole. */
  commitRecord(): void {
    this.recording = false;
    this.endRecord();
  }

  /**
   * The record failed: its additions and deletions are undone, last first — a deleted timer back in
   * its place in the firing order (registered anew, it would fire after the timers registered since).
   */
  rollbackRecord(): void {
    // still recording while undoing: buckets emptied here stay until endRecord, for the timers put back
    for (let i = this.nChanged - 1; i >= 0; i--) {
      const t = this.changed[i]!;
      if (!this.added[i]) this.revive(t);
      else if (t.live) this.kill(this.domain(t.domain), this.domain(t.domain).buckets.get(t.time)!, t);
    }
    this.recording = false;
    this.endRecord();
  }

  private endRecord(): void {
    this.nChanged = 0;
    // a record that changed many timers does not leave them held
    if (this.changed.length > 64) this.changed.length = this.added.length = 0;
    if (this.tidyLater.length) {
      for (const [dt, b] of this.tidyLater) this.tidy(dt, b);
      this.tidyLater.length = 0;
    }
  }

  private dropBucket(dt: DomainTimers, b: Bucket): void {
    dt.buckets.delete(b.time);
    if (dt.firing === b) dt.firing = undefined;
    if (this.lastBucket === b) this.lastBucket = this.lastDomain = undefined;
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
      const order = b.order;
      while (b.next < order.length) {
        const t = order[b.next++]!;
        if (!t.live) continue; // deleted since (if added again, the new one is further on)
        t.live = false;
        this.count--;
        if (--b.size === 0) this.dropBucket(dt, b);
        return t;
      }
      // a bucket's live timers are in its order after `next`, so a bucket with some ends above
      throw new Error(`timer index: the bucket of ${b.time} counts ${b.size} live timers its order does not hold`);
    }
  }

  /**
   * Timers due at `upTo`, without removing them (to prefetch their keys' state). A lone due
   * bucket's order is returned as it is: a window's firing walks no map of its keys and copies
   * nothing. Read the array before the index changes.
   */
  peekDue(domain: TimeDomain, upTo: number): readonly Timer[] {
    const dt = this.domain(domain);
    const first = dt.top();
    if (first === undefined || first > upTo) return [];
    let one: Bucket | undefined;
    let more: Bucket[] | undefined;
    for (const b of dt.buckets.values()) {
      if (b.time > upTo) continue;
      if (one === undefined) one = b;
      else (more ??= [one]).push(b);
    }
    if (more === undefined) return one!.unfired();
    const out: Timer[] = [];
    for (const b of more) for (const t of b.unfired()) out.push(t);
    return out;
  }

  /**
   * All timers in firing order — by time, then registration; at one time event time first — so
   * that an index that registers them in this order (`fromJSON`, a restore) fires them as this one
   * would.
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
      // at one time, event time first (each domain keeps its own order)
      if (a.time <= b.time) out.push(ev[i++]!);
      else out.push(pt[j++]!);
    }
    while (i < ev.length) out.push(ev[i++]!);
    while (j < pt.length) out.push(pt[j++]!);
    return out;
  }

  private entriesOf(dt: DomainTimers): Entry[] {
    const out: Entry[] = [];
    for (const b of dt.inOrder()) for (const t of b.unfired()) out.push(t);
    return out;
  }

  /**
   * Timer rows from several snapshots (a reshard's parents, a savepoint's instances) in one order
   * that does not depend on the order they came in: by time, domain (event time first), operator,
   * key. An instance that starts from them registers them in this order.
   */
  static inKeyOrder(rows: readonly TimerRow[]): TimerRow[] {
    const str = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    return [...rows].sort((a, b) => a[4] - b[4] || str(a[0], b[0]) || str(a[1], b[1]) || str(a[2], b[2]));
  }

  static fromJSON(rows: ReadonlyArray<TimerRow>): TimerIndex {
    const idx = new TimerIndex();
    for (const [domain, operatorId, key, keyGroup, time] of rows) idx.register(domain, operatorId, key, keyGroup, time);
    return idx;
  }
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
