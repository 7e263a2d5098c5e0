/**
 * What the chain's operators share: the meta of the record (or timer) being pushed, the push
 * function between operators, the record context handed to user functions, and the environment a
 * compiled operator reaches its stores through.
 */
import type { RecordContext } from '../api/types.js';
import type { BroadcastStateStore } from './broadcast-state.js';
import type { KeyedStateCache } from './keyed-state.js';
import { seededRandom } from './random.js';
import type { Timer, TimerIndex } from './timers.js';

/** What the runtime knows about the record being pushed through the chain. */
export interface RecordMeta {
  timestamp: number | undefined;
  /** stable id of the input record: seeds `ctx.random()` */
  recordId: string;
  /** the record's key (canonical string) and key group, in a keyed stage */
  key: string | undefined;
  keyGroup: number;
  /** which input of a multi-input operator the record feeds (0 otherwise) */
  input?: number;
}

export interface ChainClock {
  processingTime(): number;
  watermark(): number;
}

export type Push = (value: unknown, meta: RecordMeta) => void;
export type TimerFn = (timer: Timer) => void;

/** What a compiled operator reaches beyond its own node: the instance's stores, its clock, timer routing. */
export interface OperatorEnv {
  readonly state: KeyedStateCache;
  readonly timers: TimerIndex;
  readonly broadcast: BroadcastStateStore;
  readonly clock: ChainClock;
  /** routes the operator's due timers to `fn` */
  onTimer(opId: string, fn: TimerFn): void;
  /** counts a record dropped as too late for its window (undone with the record) */
  dropLate(): void;
  /**
   * Called before a keyed process function adds or deletes a timer: the record (or timer) being
   * applied starts noting its timer changes then, for its undo, instead of at every record.
   */
  recordTimers(): void;
}

export const NO_META: RecordMeta = { timestamp: undefined, recordId: '', key: undefined, keyGroup: 0 };

/** The meta of a firing timer: its id (which seeds `ctx.random()`) is spelled out only when asked for. */
/** The id of a timer's firing (what `ctx.random()` is seeded from): the same on every replay. */
export const timerRecordId = (opId: string, key: string, time: number): string => `timer/${opId}/${key}/${time}`;

export class TimerMeta implements RecordMeta {
  readonly timestamp: number;
  readonly key: string;
  readonly keyGroup: number;
  constructor(
    private readonly opId: string,
    private readonly timer: Timer,
  ) {
    this.timestamp = timer.time;
    this.key = timer.key;
    this.keyGroup = timer.keyGroup;
  }
  get recordId(): string {
    return timerRecordId(this.opId, this.timer.key, this.timer.time);
  }
}

/**
 * The context of a record, with what it offers on its prototype or shared, so pushing a record
 * allocates no closures. `random` is made (and seeded from the record's id) only when a function
 * asks for it. A context is valid only during the call that received it (the API says so), so an
 * operator keeps one and points it at each record in turn (`rebind`).
 */
export class OperatorContext implements RecordContext {
  timestamp: number | undefined;
  readonly currentProcessingTime: () => number;
  readonly currentWatermark: () => number;
  private rnd: (() => number) | undefined = undefined;
  constructor(
    protected _meta: RecordMeta,
    clock: ChainClock,
  ) {
    this.timestamp = _meta.timestamp;
    this.currentProcessingTime = clock.processingTime;
    this.currentWatermark = clock.watermark;
  }
  get random(): () => number {
    return (this.rnd ??= seededRandom(this._meta.recordId));
  }
  rebind(meta: RecordMeta): this {
    this._meta = meta;
    this.timestamp = meta.timestamp;
    this.rnd = undefined;
    return this;
  }
}

/** one context per operator, pointed at each record */
export function reusableContext(clock: ChainClock): (meta: RecordMeta) => RecordContext {
  const ctx = new OperatorContext(NO_META, clock);
  return (meta) => ctx.rebind(meta);
}
