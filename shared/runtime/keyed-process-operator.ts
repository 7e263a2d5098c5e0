/**
 * The keyed process operators — `process`, `coProcess` and `broadcastProcess` — compiled for the
 * chain: a keyed context per (operator, key) with its declared state handles, timers and side
 * outputs, and `onTimer` routed through the chain's timer handlers.
 */
import { MAX_EVENT_TIME, type LogicalNode } from '../api/graph.js';
import type {
  AggregatingState,
  AggregatingStateDescriptor,
  ListState,
  ListStateDescriptor,
  MapState,
  MapStateDescriptor,
  ReducingState,
  ReducingStateDescriptor,
  StateDescriptor,
  ValueState,
  ValueStateDescriptor,
} from '../api/state.js';
import type { Collector, Key, OnTimerContext, OutputTag, TimerService } from '../api/types.js';
import { keyFromString } from '../plan/key-groups.js';
import { NO_META, OperatorContext, TimerMeta, type OperatorEnv, type Push, type RecordMeta } from './operator-context.js';
import type { TimeDomain } from './timers.js';
import { UsageError } from '../util/errors.js';
import { AggregatingHandle, ListHandle, MapHandle, ReducingHandle, type StateCell } from './state-handles.js';

type KeyedProcessNode = Extract<LogicalNode, { kind: 'process' | 'coProcess' | 'broadcastProcess' }>;

/** what a keyed operator's contexts share */
interface KeyedOperator {
  readonly opId: string;
  readonly side: Map<string, Push>;
  readonly env: OperatorEnv;
  /** the record or timer being handled: its key is the one the state handles act on */
  current: RecordMeta;
  /** one handle per declared state, made at its first `get…State` */
  readonly handles: Map<StateDescriptor<unknown>, unknown>;
  check<D extends StateDescriptor<unknown>>(d: D): D;
}

const keyedOperator = (opId: string, declared: Map<string, StateDescriptor<unknown>>, side: Map<string, Push>, env: OperatorEnv): KeyedOperator => ({
  opId,
  side,
  env,
  current: NO_META,
  handles: new Map(),
  check: <D extends StateDescriptor<unknown>>(d: D): D => {
    const decl = declared.get(d.name);
    if (!decl) throw new UsageError(opId, `state "${d.name}"`, "is not declared: list it in the function's `state`");
    // the checkpoint encodes with the declared serializer: another kind or serializer under the name would corrupt it
    if (d !== decl && (d.kind !== decl.kind || d.serializer.id !== decl.serializer.id)) {
      throw new UsageError(opId, `state "${d.name}"`, `is used as ${d.kind} state (serializer ${d.serializer.id}) but declared as ${decl.kind} state (serializer ${decl.serializer.id})`);
    }
    return d;
  },
});

/**
 * A state of a keyed operator as Flink scopes one: one handle per operator, acting at each call on
 * the key of the record or timer at hand. Each call finds its entry through the cache (the
 * record's entry is primed), so the entry is saved for the record's undo at its first access —
 * also through a handle kept from an earlier record.
 */
class CurrentKeyCell<T> implements StateCell<T> {
  constructor(
    protected readonly op: KeyedOperator,
    protected readonly d: StateDescriptor<unknown>,
  ) {}
  /** the record's or timer's meta; a broadcast record has no key for keyed state to act on */
  private keyed(): RecordMeta & { key: string } {
    const m = this.op.current;
    if (m.key === undefined) throw new UsageError(this.op.opId, `state "${this.d.name}"`, 'is keyed: it has no key outside a keyed record or timer (a broadcast record has none)');
    return m as RecordMeta & { key: string };
  }
  get(): T | undefined {
    const m = this.keyed();
    return this.op.env.state.read(this.op.opId, m.key, m.keyGroup, this.d) as T | undefined;
  }
  set(v: T): void {
    const m = this.keyed();
    this.op.env.state.update(this.op.opId, m.key, m.keyGroup, this.d, v);
  }
  clear(): void {
    const m = this.keyed();
    this.op.env.state.write(this.op.opId, m.key, m.keyGroup, this.d, undefined);
  }
}

/** The most used handle is its own cell. */
class CurrentKeyValueState<T> extends CurrentKeyCell<T> implements ValueState<T> {
  value(): T | undefined {
    return this.get() ?? (this.d as ValueStateDescriptor<T>).defaultValue;
  }
  update(v: T): void {
    this.set(v);
  }
}

/** The operator's handle of state `d`, made by `make` at its first use. */
function handleOf<H>(op: KeyedOperator, d: StateDescriptor<unknown>, make: (cell: CurrentKeyCell<never>) => H): H {
  let h = op.handles.get(d) as H | undefined;
  if (h === undefined) op.handles.set(d, (h = make(new CurrentKeyCell(op, op.check(d)))));
  return h;
}

/**
 * A timer's time as whole ms, as event times are (floored). A time that is not finite or lies
 * beyond ±MAX_EVENT_TIME throws (the record fails, a dead letter): the checkpoint's timer rows and
 * the wire carry safe integers only, and such a timer could never fire.
 */
function timerTime(t: number, call: string): number {
  const ms = Math.floor(t);
  if (ms >= -MAX_EVENT_TIME && ms <= MAX_EVENT_TIME) return ms;
  throw new RangeError(`${call}(${String(t)}): a timer's time must be a finite number of ms within ±${MAX_EVENT_TIME}`);
}

class Timers implements TimerService {
  readonly currentWatermark: () => number;
  readonly currentProcessingTime: () => number;
  constructor(
    private readonly env: OperatorEnv,
    private readonly opId: string,
    private readonly key: string,
    private readonly kg: number,
  ) {
    this.currentWatermark = env.clock.watermark;
    this.currentProcessingTime = env.clock.processingTime;
  }
  // each change is noted for the undo of the record at hand, also through a service kept from an earlier one
  registerEventTimeTimer(t: number): void {
    const ms = timerTime(t, 'registerEventTimeTimer');
    this.env.recordTimers();
    this.env.timers.register('event-time', this.opId, this.key, this.kg, ms);
  }
  deleteEventTimeTimer(t: number): void {
    const ms = timerTime(t, 'deleteEventTimeTimer');
    this.env.recordTimers();
    this.env.timers.remove('event-time', this.opId, this.key, ms);
  }
  registerProcessingTimeTimer(t: number): void {
    const ms = timerTime(t, 'registerProcessingTimeTimer');
    this.env.recordTimers();
    this.env.timers.register('processing-time', this.opId, this.key, this.kg, ms);
  }
  deleteProcessingTimeTimer(t: number): void {
    const ms = timerTime(t, 'deleteProcessingTimeTimer');
    this.env.recordTimers();
    this.env.timers.remove('processing-time', this.opId, this.key, ms);
  }
}

/** the keyed context of one (operator, key): state handles and timers of that key */
class KeyedCtx extends OperatorContext implements OnTimerContext<Key> {
  timeDomain: TimeDomain;
  private ts: Timers | undefined = undefined;
  constructor(
    meta: RecordMeta,
    protected readonly _op: KeyedOperator,
    domain?: TimeDomain,
  ) {
    super(meta, _op.env.clock);
    this.timeDomain = domain ?? 'event-time';
  }
  rebindKeyed(meta: RecordMeta, domain?: TimeDomain): this {
    this.rebind(meta);
    this.timeDomain = domain ?? 'event-time';
    this.ts = undefined;
    return this;
  }
  get key(): Key {
    return keyFromString(this._meta.key!);
  }
  get timerService(): TimerService {
    return (this.ts ??= new Timers(this._op.env, this._op.opId, this._meta.key!, this._meta.keyGroup));
  }
  // not through `handleOf`: the value handle is its own cell (one object, no closure), as this is the
  // call of nearly every record
  getState<T>(d: ValueStateDescriptor<T>): ValueState<T> {
    const op = this._op;
    const desc = d as StateDescriptor<unknown>;
    let h = op.handles.get(desc) as ValueState<T> | undefined;
    if (h === undefined) op.handles.set(desc, (h = new CurrentKeyValueState<T>(op, op.check(desc))));
    return h;
  }
  getListState<T>(d: ListStateDescriptor<T>): ListState<T> {
    return handleOf(this._op, d as StateDescriptor<unknown>, (c) => new ListHandle<T>(c));
  }
  getMapState<K extends string | number, V>(d: MapStateDescriptor<K, V>): MapState<K, V> {
    return handleOf(this._op, d as StateDescriptor<unknown>, (c) => new MapHandle<K, V>(c));
  }
  getReducingState<T>(d: ReducingStateDescriptor<T>): ReducingState<T> {
    return handleOf(this._op, d as StateDescriptor<unknown>, (c) => new ReducingHandle<T>(c, d));
  }
  getAggregatingState<I, A, O>(d: AggregatingStateDescriptor<I, A, O>): AggregatingState<I, O> {
    return handleOf(this._op, d as StateDescriptor<unknown>, (c) => new AggregatingHandle<I, A, O>(c, d));
  }
  output<T>(tag: OutputTag<T>, value: T): void {
    this._op.side.get(tag.id)?.(value, this._meta);
  }
}

/** the keyed context of `broadcastProcess`' keyed input: broadcast state, read only */
class KeyedBroadcastCtx extends KeyedCtx {
  getBroadcastState<K, V>(d: MapStateDescriptor<K & (string | number), V>) {
    return this._op.env.broadcast.readOnly(this._op.opId, d);
  }
}

/**
 * What `process`, `coProcess` and `broadcastProcess` share: the declared state, a collector into
 * the main output for the record or timer at hand, `onTimer` routing, and one keyed context per
 * path (records, timers) pointed at each record or timer in turn. `element` handles a record with
 * the record's context.
 */
function keyedFunction<C extends KeyedCtx>(
  node: KeyedProcessNode,
  fn: { onTimer?(time: number, ctx: OnTimerContext<Key>, out: Collector<unknown>): void },
  next: Push,
  side: Map<string, Push>,
  env: OperatorEnv,
  element: (v: unknown, m: RecordMeta, ctx: C, out: Collector<unknown>) => void,
  Ctx: new (meta: RecordMeta, op: KeyedOperator) => C,
): Push {
  const opId = node.id;
  const op = keyedOperator(opId, new Map(node.state.map((d) => [d.name, d])), side, env);
  const collector: Collector<unknown> = { collect: (value) => next(value, op.current) };
  const elementCtx = new Ctx(NO_META, op);
  const timerCtx = new KeyedCtx(NO_META, op);
  if (fn.onTimer) {
    const onTimer = fn.onTimer.bind(fn);
    env.onTimer(opId, (t) => {
      const meta = new TimerMeta(opId, t);
      op.current = meta;
      onTimer(t.time, timerCtx.rebindKeyed(meta, t.domain), collector);
    });
  }
  return (v, m) => {
    op.current = m;
    element(v, m, elementCtx.rebindKeyed(m), collector);
  };
}

/** Compiles a keyed process operator into the push of its records. */
export function compileKeyedProcess(node: KeyedProcessNode, next: Push, side: Map<string, Push>, env: OperatorEnv): Push {
  switch (node.kind) {
    case 'process': {
      const fn = node.fn;
      return keyedFunction(node, fn, next, side, env, (v, _m, ctx, out) => fn.processElement(v, ctx, out), KeyedCtx);
    }
    case 'coProcess': {
      const fn = node.fn;
      return keyedFunction(node, fn, next, side, env, (v, m, ctx, out) => (m.input === 1 ? fn.processElement2(v, ctx, out) : fn.processElement1(v, ctx, out)), KeyedCtx);
    }
    case 'broadcastProcess': {
      const fn = node.fn;
      const opId = node.id;
      // the broadcast input has no key: a plain context, with broadcast state to write
      return keyedFunction(
        node,
        fn,
        next,
        side,
        env,
        (v, m, ctx, out) => {
          if (m.input === 1) fn.processBroadcastElement(v, Object.assign(new OperatorContext(m, env.clock), { getBroadcastState: <K, V>(d: MapStateDescriptor<K & (string | number), V>) => env.broadcast.writable(opId, d) }), out);
          else fn.processElement(v, ctx, out);
        },
        KeyedBroadcastCtx,
      );
    }
  }
}
