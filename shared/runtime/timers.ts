/**
 * Timers of an instance's keyed operators: (domain, operator, key, time). They are part of the
 * snapshot (written whole with each delta) and fire in a deterministic order — by time, then
 * operator, then key — so a replay fires them the same way.
 */
export type TimeDomain = 'event-time' | 'processing-time';

export interface Timer {
  readonly domain: TimeDomain;
  readonly operatorId: string;
  readonly key: string;
  readonly keyGroup: number;
  readonly time: number;
}

const idOf = (t: Pick<Timer, 'domain' | 'operatorId' | 'key' | 'time'>) => `${t.domain}\u0000${t.operatorId}\u0000${t.key}\u0000${t.time}`;

const before = (a: Timer, b: Timer) =>
  a.time !== b.time ? a.time < b.time : a.operatorId !== b.operatorId ? a.operatorId < b.operatorId : a.key < b.key;

export class TimerIndex {
  private readonly live = new Map<string, Timer>();
  /** a binary heap per domain; deleted timers are skipped lazily */
  private readonly heaps: Record<TimeDomain, Timer[]> = { 'event-time': [], 'processing-time': [] };

  get size(): number {
    return this.live.size;
  }

  add(t: Timer): void {
    const id = idOf(t);
    if (this.live.has(id)) return;
    this.live.set(id, t);
    push(this.heaps[t.domain], t);
  }

  delete(t: Pick<Timer, 'domain' | 'operatorId' | 'key' | 'time'>): void {
    this.live.delete(idOf(t));
  }

  /** Removes and returns the earliest live timer of the domain due at `upTo`, if any. */
  popDue(domain: TimeDomain, upTo: number): Timer | undefined {
    const h = this.heaps[domain];
    while (h.length) {
      const top = h[0]!;
      if (!this.live.has(idOf(top)) || this.live.get(idOf(top)) !== top) {
        pop(h);
        continue;
      }
      if (top.time > upTo) return undefined;
      pop(h);
      this.live.delete(idOf(top));
      return top;
    }
    return undefined;
  }

  /** Timers due at `upTo`, without removing them (to prefetch their keys' state). */
  peekDue(domain: TimeDomain, upTo: number): Timer[] {
    return [...this.live.values()].filter((t) => t.domain === domain && t.time <= upTo);
  }

  toJSON(): Array<[TimeDomain, string, string, number, number]> {
    return [...this.live.values()].sort((a, b) => (before(a, b) ? -1 : 1)).map((t) => [t.domain, t.operatorId, t.key, t.keyGroup, t.time]);
  }

  static fromJSON(rows: ReadonlyArray<[TimeDomain, string, string, number, number]>): TimerIndex {
    const idx = new TimerIndex();
    for (const [domain, operatorId, key, keyGroup, time] of rows) idx.add({ domain, operatorId, key, keyGroup, time });
    return idx;
  }
}

function push(h: Timer[], t: Timer): void {
  h.push(t);
  let i = h.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (!before(h[i]!, h[p]!)) break;
    [h[i], h[p]] = [h[p]!, h[i]!];
    i = p;
  }
}

function pop(h: Timer[]): void {
  const last = h.pop()!;
  if (!h.length) return;
  h[0] = last;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    const r = l + 1;
    let m = i;
    if (l < h.length && before(h[l]!, h[m]!)) m = l;
    if (r < h.length && before(h[r]!, h[m]!)) m = r;
    if (m === i) return;
    [h[i], h[m]] = [h[m]!, h[i]!];
    i = m;
  }
}
