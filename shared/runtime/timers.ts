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
export type TimeDomain = 'event-time' | 'processing-time';

export interface Timer {
  readonly domain: TimeDomain;
  readonly operatorId: string;
  readonly key: string;
  readonly keyGroup: number;
  readonly time: number;
}

type TimerRow = [TimeDomain, string, string, number, number];

/** (operator, key) order within one time */
const compareInBucket = (a: Timer, b: Timer) => (a.operatorId !== b.operatorId ? (a.operatorId < b.operatorId ? -1 : 1) : a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

const compareTimers = (a: Timer, b: Timer) => (a.time !== b.time ? (a.time < b.time ? -1 : 1) : compareInBucket(a, b));

/** The timers of one domain due at one time. */
class Bucket {
  /** operator → key → timer */
  readonly byOperator = new Map<string, Map<string, Timer>>();
  size = 0;
  /** while the bucket fires: its timers in firing order, and how far firing got */
  order: Timer[] | undefined = undefined;
  next = 0;
  constructor(readonly time: number) {}
}

class DomainTimers {
  readonly buckets = new Map<number, Bucket>();
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
}

export class TimerIndex {
  private readonly eventTime = new DomainTimers();
  private readonly processingTime = new DomainTimers();
  private count = 0;
  // the bucket and operator map the last add went to: records of one window share them
  private lastBucket: Bucket | undefined;
  private lastDomain: DomainTimers | undefined;
  private lastOperator: string | undefined;
  private lastKeys: Map<string, Timer> | undefined;
  /**
   * While a record is applied: the timers it added (true) or deleted (false), in order, so that a
   * record whose function throws can be undone (`rollbackRecord`).
   */
  private recording = false;
  private readonly changed: Timer[] = [];
  private readonly added: boolean[] = [];

  get size(): number {
    return this.count;
  }

  private domain(d: TimeDomain): DomainTimers {
    return d === 'event-time' ? this.eventTime : this.processingTime;
  }

  /** Adds a timer; a timer of the same (domain, operator, key, time) already there stays. */
  add(t: Timer): void {
    this.register(t.domain, t.operatorId, t.key, t.keyGroup, t.time, t);
  }

  /** `add` without making a Timer when the timer is already there. */
  register(domain: TimeDomain, operatorId: string, key: string, keyGroup: number, time: number, made?: Timer): void {
    const dt = this.domain(domain);
    let keys: Map<string, Timer> | undefined;
    let b = this.lastBucket;
    if (b !== undefined && b.time === time && this.lastDomain === dt && this.lastOperator === operatorId) keys = this.lastKeys!;
    else {
      b = dt.buckets.get(time);
      if (b === undefined) {
        dt.buckets.set(time, (b = new Bucket(time)));
        heapPush(dt.times, time);
      }
      keys = b.byOperator.get(operatorId);
      if (keys === undefined) b.byOperator.set(operatorId, (keys = new Map()));
      this.lastBucket = b;
      this.lastDomain = dt;
      this.lastOperator = operatorId;
      this.lastKeys = keys;
    }
    if (keys.has(key)) return;
    const t = made ?? { domain, operatorId, key, keyGroup, time };
    keys.set(key, t);
    b.size++;
    this.count++;
    if (b.order !== undefined) insertInOrder(b, t);
    if (this.recording) {
      this.changed.push(t);
      this.added.push(true);
    }
  }

  delete(t: Pick<Timer, 'domain' | 'operatorId' | 'key' | 'time'>): void {
    this.remove(t.domain, t.operatorId, t.key, t.time);
  }

  /** `delete` without making its argument. */
  remove(domain: TimeDomain, operatorId: string, key: string, time: number): void {
    const dt = this.domain(domain);
    const b = dt.buckets.get(time);
    const keys = b?.byOperator.get(operatorId);
    const t = keys?.get(key);
    if (t === undefined) return;
    keys!.delete(key);
    this.count--;
    if (--b!.size === 0) this.dropBucket(dt, b!);
    if (this.recording) {
      this.changed.push(t);
      this.added.push(false);
    }
  }

  /** Starts a record: the timers it adds and deletes are noted. */
  beginRecord(): void {
    this.recording = true;
  }

  /** The record was applied whole. */
  commitRecord(): void {
    this.recording = false;
    if (this.changed.length) {
      this.changed.length = 0;
      this.added.length = 0;
    }
  }

  /** The record failed: its additions and deletions are undone, last first. */
  rollbackRecord(): void {
    this.recording = false;
    for (let i = this.changed.length - 1; i >= 0; i--) {
      const t = this.changed[i]!;
      if (this.added[i]) this.remove(t.domain, t.operatorId, t.key, t.time);
      else this.add(t);
    }
    this.changed.length = 0;
    this.added.length = 0;
  }

  private dropBucket(dt: DomainTimers, b: Bucket): void {
    dt.buckets.delete(b.time);
    if (this.lastBucket === b) this.lastBucket = this.lastDomain = this.lastOperator = this.lastKeys = undefined;
  }

  /** Removes and returns the earliest live timer of the domain due at `upTo`, if any. */
  popDue(domain: TimeDomain, upTo: number): Timer | undefined {
    const dt = this.domain(domain);
    for (;;) {
      const time = dt.top();
      if (time === undefined || time > upTo) return undefined;
      const b = dt.buckets.get(time)!;
      if (b.order === undefined) {
        const order: Timer[] = [];
        for (const keys of b.byOperator.values()) for (const t of keys.values()) order.push(t);
        b.order = order.sort(compareInBucket);
        b.next = 0;
      }
      const order = b.order;
      while (b.next < order.length) {
        const t = order[b.next++]!;
        const keys = b.byOperator.get(t.operatorId)!;
        if (keys.get(t.key) !== t) continue; // deleted since (or deleted and added again: that one is in the order too)
        keys.delete(t.key);
        this.count--;
        if (--b.size === 0) this.dropBucket(dt, b);
        return t;
      }
      // adds keep `order` complete, so this is not reached; should it be, sort what is left again
      b.order = undefined;
    }
  }

  /** Timers due at `upTo`, without removing them (to prefetch their keys' state). */
  peekDue(domain: TimeDomain, upTo: number): Timer[] {
    const dt = this.domain(domain);
    const first = dt.top();
    if (first === undefined || first > upTo) return [];
    const out: Timer[] = [];
    for (const b of dt.buckets.values()) {
      if (b.time > upTo) continue;
      for (const keys of b.byOperator.values()) for (const t of keys.values()) out.push(t);
    }
    return out;
  }

  /** Every timer, in no particular order. */
  *values(): IterableIterator<Timer> {
    for (const dt of [this.eventTime, this.processingTime]) {
      for (const b of dt.buckets.values()) for (const keys of b.byOperator.values()) yield* keys.values();
    }
  }

  /** All timers in firing order (by time, operator, key; event time first): the same rows whoever holds them. */
  toJSON(): TimerRow[] {
    const all = [...this.values()].sort((a, b) => compareTimers(a, b) || (a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0));
    return all.map((t) => [t.domain, t.operatorId, t.key, t.keyGroup, t.time]);
  }

  static fromJSON(rows: ReadonlyArray<TimerRow>): TimerIndex {
    const idx = new TimerIndex();
    for (const [domain, operatorId, key, keyGroup, time] of rows) idx.add({ domain, operatorId, key, keyGroup, time });
    return idx;
  }
}

/** Adds a timer to a bucket that is firing: into the part not fired yet, at its place. */
function insertInOrder(b: Bucket, t: Timer): void {
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
