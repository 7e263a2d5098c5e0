/**
 * An instance's event time. A source instance derives its watermark from the timestamps it reads
 * (bounded out-of-orderness, emitted when it moved by an interval) and goes idle when no data
 * arrived for a while; an inner instance's watermark is the minimum over its active input
 * channels (one per upstream producer), and never goes back. Watermarks go downstream in-band
 * through `emit`.
 */
import type { SourceClock } from '../codec/snapshot.js';

/** The final watermark, sent at the end of a bounded input: it fires every window. */
export const MAX_WATERMARK = 2 ** 51; // far beyond any event time, and still a safe zig-zag varint

export interface WatermarkStrategy {
  readonly maxOutOfOrdernessMs: number;
  readonly idleTimeoutMs?: number;
}

/** What a parent shard's instance hands its child of its event time. */
export interface WatermarkHandover {
  readonly watermark: number;
  readonly channels: ReadonlyArray<readonly [string, { readonly wm: number; readonly idle: boolean }]>;
  readonly source: SourceClock | undefined;
}

export class WatermarkTracker {
  watermark = Number.NEGATIVE_INFINITY;
  /** last watermark per upstream producer, and whether it said it is idle */
  private readonly channels = new Map<string, { wm: number; idle: boolean }>();
  private clock: SourceClock = { maxTs: Number.NEGATIVE_INFINITY, emitted: Number.NEGATIVE_INFINITY, idle: false, lastActive: 0, dataSinceTick: false };

  constructor(
    /** sends a watermark downstream (`idle`: this instance stops holding the minimum back) */
    private readonly send: (watermark: number, idle: boolean) => void,
    /** a source's strategy; undefined for an inner stage, or a source without event time */
    private readonly strategy: WatermarkStrategy | undefined,
    private readonly intervalMs: number,
  ) {}

  /** Sends a watermark, unless there is none yet (an idle mark goes anyway). */
  emit(wm: number, idle: boolean): void {
    if (!Number.isFinite(wm) && !idle) return;
    this.send(Number.isFinite(wm) ? wm : 0, idle);
  }

  // ---------------------------------------------------------------- source

  /** A source applied a record of event time `timestamp`. */
  sourceRecord(timestamp: number | undefined): void {
    const c = this.clock;
    c.dataSinceTick = true;
    if (c.idle) {
      // active again: rejoin the downstream minimum with the current watermark
      c.idle = false;
      this.emitSource(true);
    }
    if (timestamp !== undefined && this.strategy && timestamp > c.maxTs) {
      c.maxTs = timestamp;
      this.emitSource(false);
    }
  }

  /** Processing time moved to `time` at a source: it decides idleness. */
  sourceTick(time: number): void {
    const c = this.clock;
    const idleAfter = this.strategy?.idleTimeoutMs;
    if (c.dataSinceTick || c.lastActive === 0) c.lastActive = time;
    c.dataSinceTick = false;
    if (idleAfter !== undefined && !c.idle && time - c.lastActive >= idleAfter) {
      c.idle = true;
      this.emit(this.watermark, true);
    }
  }

  /** Emits the source's watermark if it moved by the interval (or at all, when `force`). */
  emitSource(force: boolean): void {
    const strategy = this.strategy;
    const c = this.clock;
    if (!strategy || c.maxTs === Number.NEGATIVE_INFINITY || c.idle) return;
    const wm = c.maxTs === MAX_WATERMARK ? MAX_WATERMARK : c.maxTs - strategy.maxOutOfOrdernessMs - 1;
    if (wm <= c.emitted) return;
    if (!force && wm < c.emitted + this.intervalMs) return;
    c.emitted = wm;
    this.watermark = wm;
    this.emit(wm, false);
  }

  /** A bounded source input ended: the final watermark. */
  sourceEnded(): void {
    this.clock.maxTs = MAX_WATERMARK;
    this.watermark = MAX_WATERMARK;
    this.emit(MAX_WATERMARK, false);
  }

  // ---------------------------------------------------------------- inner stages

  /** A producer's watermark arrived on its channel. */
  channel(producer: string, wm: number, idle: boolean): void {
    this.channels.set(producer, { wm, idle });
  }

  /**
   * The watermark is the minimum over the active channels, once `expected` producers spoke. When it
   * moves, `fire` runs the timers it makes due before the watermark goes downstream.
   */
  async advance(expected: number, fire: (wm: number) => Promise<void>): Promise<void> {
    let min = Number.POSITIVE_INFINITY;
    let active = 0;
    for (const c of this.channels.values()) {
      if (c.idle) continue;
      active++;
      if (c.wm < min) min = c.wm;
    }
    const idleAll = active === 0 && this.channels.size >= expected;
    if (!idleAll && this.channels.size < expected) return; // some producer has not spoken yet
    if (idleAll) {
      this.emit(this.watermark, true);
      return;
    }
    if (min <= this.watermark) return;
    this.watermark = min;
    await fire(min);
    this.emit(min, false);
  }

  /** Forgets the channels of producers `keep` does not keep; true if one was dropped. */
  retainChannels(keep: (producer: string) => boolean): boolean {
    const retired = [...this.channels.keys()].filter((p) => !keep(p));
    for (const p of retired) this.channels.delete(p);
    return retired.length > 0;
  }

  // ---------------------------------------------------------------- snapshot and handover

  snapshot(source: boolean): { channels: Array<[string, number, boolean]>; watermark: number | null; source: SourceClock | null } {
    return {
      channels: [...this.channels].map(([p, c]) => [p, c.wm, c.idle]),
      watermark: Number.isFinite(this.watermark) ? this.watermark : null,
      source: source ? { ...this.clock } : null,
    };
  }

  restore(s: { readonly channels: ReadonlyArray<[string, number, boolean]>; readonly watermark: number | null; readonly source: SourceClock | null }): void {
    for (const [p, wm, idle] of s.channels) this.channels.set(p, { wm, idle });
    this.watermark = s.watermark ?? Number.NEGATIVE_INFINITY;
    if (s.source) this.clock = { ...s.source };
  }

  handOver(source: boolean): WatermarkHandover {
    return { watermark: this.watermark, channels: [...this.channels].map(([p, c]) => [p, { ...c }] as const), source: source ? { ...this.clock } : undefined };
  }

  /**
   * Starts from parent shards' event time: the slowest parent's watermark, each channel at its
   * slowest, and a merged source claims no more event time than the slower parent did.
   */
  adopt(parents: readonly WatermarkHandover[]): void {
    this.watermark = Math.min(...parents.map((p) => p.watermark));
    for (const p of parents) {
      for (const [producer, c] of p.channels) {
        const mine = this.channels.get(producer);
        this.channels.set(producer, mine ? { wm: Math.min(mine.wm, c.wm), idle: mine.idle && c.idle } : { ...c });
      }
    }
    parents.forEach(({ source: c }, i) => {
      if (!c) return;
      const mine = this.clock;
      this.clock =
        i === 0
          ? { ...c }
          : { maxTs: Math.min(mine.maxTs, c.maxTs), emitted: Math.min(mine.emitted, c.emitted), idle: mine.idle && c.idle, lastActive: Math.max(mine.lastActive, c.lastActive), dataSinceTick: mine.dataSinceTick || c.dataSinceTick };
    });
  }
}
