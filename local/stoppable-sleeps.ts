/**
 * The sleeps of a set of polling loops, all ended at once by stop(): naps, which progress elsewhere
 * also cuts short (wake() ends every nap of a channel, e.g. when a shard finishes and its children
 * may start), and pauses, which only stop() cuts short (a backoff must not be shortened by unrelated
 * progress). After stop() every sleep returns at once; `signal` aborts the calls in flight.
 */
export class StoppableSleeps<Channel extends string> {
  private readonly sleepers = new Map<Channel, Set<() => void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly abort = new AbortController();
  private stopped = false;

  constructor(channels: readonly Channel[]) {
    for (const c of channels) this.sleepers.set(c, new Set());
  }

  /** Aborted by stop(). */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Ends every sleep, now and later, and aborts `signal`. */
  stop(): void {
    this.stopped = true;
    this.abort.abort();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const c of this.sleepers.keys()) this.wake(c);
  }

  /** A sleep that wake(channel) or stop() cuts short. */
  nap(ms: number, channel: Channel): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const sleepers = this.sleepers.get(channel)!;
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.timers.delete(t);
        sleepers.delete(done);
        resolve();
      };
      const t = setTimeout(done, Math.max(0, ms));
      this.timers.add(t);
      sleepers.add(done);
    });
  }

  /** A sleep that only stop() interrupts. */
  pause(ms: number): Promise<void> {
    if (this.stopped || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        this.abort.signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(t);
        this.timers.delete(t);
        resolve();
      };
      this.timers.add(t);
      this.abort.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends every nap of `channel` now. */
  wake(channel: Channel): void {
    for (const f of [...this.sleepers.get(channel)!]) f();
  }
}
