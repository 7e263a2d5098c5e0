/**
 * Compiles a stage's chain of operators into plain functions that push a value from the stage's
 * entry to its exits (exchanges to the next stage, sinks, side outputs). One function per operator
 * turns a plan node into running code; user functions are found by operator id in the job's graph.
 * Keyed operators get their state handles and timers through the context; timers fire through
 * `fireTimer`, which the instance calls when the watermark or processing time passes them.
 */
import type { LogicalNode, SinkNode, WindowNode } from '../api/graph.js';
import type { Job } from '../api/job.js';
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
  OperatorListStateDescriptor,
  ValueState,
  ValueStateDescriptor,
} from '../api/state.js';
import { jsonSerializer } from '../api/serializers.js';
import type { Collector, Key, OnTimerContext, OutputTag, RecordContext, TimerService } from '../api/types.js';
import { assignWindows, type TimeWindow } from '../api/windows.js';
import { encodePayload } from '../codec/payload.js';
import { checkedKeySelector, keyFromString, keyGroupOf, keyString } from '../plan/key-groups.js';
import { withOperatorErrors } from '../util/operator-errors.js';
import type { Plan, PlanStage } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import type { KeyedStateCache } from './keyed-state.js';
import type { Outbox } from './outbox.js';
import { seededRandom } from './random.js';
import type { Timer, TimerIndex, TimeDomain } from './timers.js';
import { BroadcastStateStore } from './broadcast-state.js';
import { OperatorStateStore } from './operator-state.js';

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

type Push = (value: unknown, meta: RecordMeta) => void;
type TimerFn = (timer: Timer) => void;

export interface CompiledChain {
  /** pushes a value into the stage's entry operators */
  readonly push: Push;
  /** the selector that keys each input of this stage (by input index; undefined = not keyed) */
  readonly keySelectors: ReadonlyArray<((value: unknown) => string | number) | undefined>;
  /** operators of the stage holding keyed state */
  readonly keyedOperators: readonly string[];
  /** runs a due timer's callback */
  fireTimer(timer: Timer): void;
  /** records dropped as too late for their window (no late output declared) */
  readonly lateDropped: () => number;
}

/** a key's windows in state: [start, end, accumulator or elements], sorted by start */
type Windows = Array<[number, number, unknown]>;

const byWindow = (x: [number, number, unknown], y: [number, number, unknown]) => x[0] - y[0] || x[1] - y[1];

const mod = (a: number, b: number) => ((a % b) + b) % b;

/** The meta of a firing timer: its id (which seeds `ctx.random()`) is spelled out only when asked for. */
class TimerMeta implements RecordMeta {
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
    return `timer/${this.opId}/${this.timer.key}/${this.timer.time}`;
  }
}

/**
 * The meta of a window's result: the firing record's or timer's, at the window's last instant. The
 * source meta is only read while the result is pushed (metas are valid only during the call), and
 * its id is asked for only if a function wants `ctx.random()`.
 */
class WindowResultMeta implements RecordMeta {
  readonly key: string | undefined;
  readonly keyGroup: number;
  readonly input: number | undefined;
  constructor(
    private readonly src: RecordMeta,
    readonly timestamp: number,
  ) {
    this.key = src.key;
    this.keyGroup = src.keyGroup;
    this.input = src.input;
  }
  get recordId(): string {
    return this.src.recordId;
  }
}

export function nodesById(job: Job): Map<string, LogicalNode> {
  return new Map(job.nodes.map((n) => [n.id, n]));
}

export function compileChain(
  job: Job,
  plan: Plan,
  stage: PlanStage,
  names: ResourceNames,
  outbox: Outbox,
  state: KeyedStateCache,
  clock: ChainClock,
  timers: TimerIndex,
  broadcast: BroadcastStateStore = new BroadcastStateStore(),
  operatorState: OperatorStateStore = new OperatorStateStore(),
): CompiledChain {
  const graph = nodesById(job);
  const consumers = new Map<string, string[]>();
  for (const op of stage.operators) for (const i of op.inputs) consumers.set(i, [...(consumers.get(i) ?? []), op.id]);
  const compiled = new Map<string, Push>();
  const timerHandlers = new Map<string, TimerFn>();
  let lateDropped = 0;

  /** Routes an operator's due timers to its `onTimer`, with a context bound to the timer's key. */
  const onTimers = (
    opId: string,
    onTimer: ((time: number, ctx: OnTimerContext<Key>, out: Collector<unknown>) => void) | undefined,
    contextFor: (t: Timer, meta: RecordMeta) => OnTimerContext<Key>,
    out: Collector<unknown>,
  ) => {
    if (!onTimer) return;
    timerHandlers.set(opId, (t) => {
      const meta = new TimerMeta(opId, t);
      onTimer(t.time, contextFor(t, meta), out);
    });
  };

  const processingTime = () => clock.processingTime();
  const watermark = () => clock.watermark();

  /**
   * The context of a record, with what it offers on its prototype or shared, so pushing a record
   * allocates no closures. `random` is made (and seeded from the record's id) only when a function
   * asks for it. A context is valid only during the call that received it (the API says so), so an
   * operator keeps one and points it at each record in turn (`rebind`).
   */
  class Context implements RecordContext {
    timestamp: number | undefined;
    readonly currentProcessingTime: () => number = processingTime;
    readonly currentWatermark: () => number = watermark;
    private rnd: (() => number) | undefined = undefined;
    constructor(protected _meta: RecordMeta) {
      this.timestamp = _meta.timestamp;
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
  const context = (meta: RecordMeta): RecordContext => new Context(meta);
  const NO_META: RecordMeta = { timestamp: undefined, recordId: '', key: undefined, keyGroup: 0 };
  /** one context per operator, pointed at each record */
  const reusableContext = () => {
    const ctx = new Context(NO_META);
    return (meta: RecordMeta): RecordContext => ctx.rebind(meta);
  };

  const fanOut = (ids: readonly string[]): Push => {
    const fns = ids.map((id) => compiled.get(id)!);
    if (fns.length === 0) return () => undefined;
    if (fns.length === 1) return fns[0]!;
    return (v, m) => {
      for (const f of fns) f(v, m);
    };
  };

  /** main-output consumers of an operator, and its side-output consumers by tag */
  const outputsOf = (opId: string) => {
    const main: string[] = [];
    const side = new Map<string, Push>();
    for (const c of consumers.get(opId) ?? []) {
      const n = graph.get(c)!;
      if (n.kind === 'sideOutput') side.set(n.tag, compiled.get(c)!);
      else main.push(c);
    }
    return { next: fanOut(main), side };
  };

  /** what a keyed operator's contexts share */
  interface KeyedOperator {
    readonly opId: string;
    readonly side: Map<string, Push>;
    check<D extends StateDescriptor<unknown>>(d: D): D;
  }
  const keyedOperator = (opId: string, declared: Set<string>, side: Map<string, Push>): KeyedOperator => ({
    opId,
    side,
    check: <D extends StateDescriptor<unknown>>(d: D): D => {
      if (!declared.has(d.name)) throw new Error(`state "${d.name}" is not declared by ${opId}: list it in the function's \`state\``);
      return d;
    },
  });

  class Timers implements TimerService {
    readonly currentWatermark: () => number = watermark;
    readonly currentProcessingTime: () => number = processingTime;
    constructor(
      private readonly opId: string,
      private readonly key: string,
      private readonly kg: number,
    ) {}
    registerEventTimeTimer(t: number): void {
      timers.register('event-time', this.opId, this.key, this.kg, t);
    }
    deleteEventTimeTimer(t: number): void {
      timers.remove('event-time', this.opId, this.key, t);
    }
    registerProcessingTimeTimer(t: number): void {
      timers.register('processing-time', this.opId, this.key, this.kg, t);
    }
    deleteProcessingTimeTimer(t: number): void {
      timers.remove('processing-time', this.opId, this.key, t);
    }
  }

  /** the keyed context of one (operator, key): state handles and timers of that key */
  class KeyedCtx extends Context implements OnTimerContext<Key> {
    timeDomain: TimeDomain;
    private ts: Timers | undefined = undefined;
    constructor(
      meta: RecordMeta,
      protected readonly _op: KeyedOperator,
      domain?: TimeDomain,
    ) {
      super(meta);
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
      return (this.ts ??= new Timers(this._op.opId, this._meta.key!, this._meta.keyGroup));
    }
    getState<T>(d: ValueStateDescriptor<T>): ValueState<T> {
      return state.valueState(this._op.opId, this._meta.key!, this._meta.keyGroup, this._op.check(d));
    }
    getListState<T>(d: ListStateDescriptor<T>): ListState<T> {
      return state.listState(this._op.opId, this._meta.key!, this._meta.keyGroup, this._op.check(d));
    }
    getMapState<K extends string | number, V>(d: MapStateDescriptor<K, V>): MapState<K, V> {
      return state.mapState(this._op.opId, this._meta.key!, this._meta.keyGroup, this._op.check(d));
    }
    getReducingState<T>(d: ReducingStateDescriptor<T>): ReducingState<T> {
      return state.reducingState(this._op.opId, this._meta.key!, this._meta.keyGroup, this._op.check(d));
    }
    getAggregatingState<I, A, O>(d: AggregatingStateDescriptor<I, A, O>): AggregatingState<I, O> {
      return state.aggregatingState(this._op.opId, this._meta.key!, this._meta.keyGroup, this._op.check(d));
    }
    output<T>(tag: OutputTag<T>, value: T): void {
      this._op.side.get(tag.id)?.(value, this._meta);
    }
  }
  /** the keyed context of `broadcastProcess`' keyed input: broadcast state, read only */
  class KeyedBroadcastCtx extends KeyedCtx {
    getBroadcastState<K, V>(d: MapStateDescriptor<K & (string | number), V>) {
      return broadcast.readOnly(this._op.opId, d);
    }
  }

  /**
   * What `process`, `coProcess` and `broadcastProcess` share: the declared state, a collector into
   * the main output for the record or timer at hand, `onTimer` routing, and one keyed context per
   * path (records, timers) pointed at each record or timer in turn. `element` handles a record with
   * the record's context.
   */
  const keyedFunction = <C extends KeyedCtx>(
    node: { readonly id: string; readonly state: readonly StateDescriptor<unknown>[] },
    fn: { onTimer?(time: number, ctx: OnTimerContext<Key>, out: Collector<unknown>): void },
    next: Push,
    side: Map<string, Push>,
    element: (v: unknown, m: RecordMeta, ctx: C, out: Collector<unknown>) => void,
    Ctx: new (meta: RecordMeta, op: KeyedOperator) => C,
  ): Push => {
    const op = keyedOperator(node.id, new Set(node.state.map((d) => d.name)), side);
    let current: RecordMeta | undefined;
    const collector: Collector<unknown> = { collect: (value) => next(value, current!) };
    const elementCtx = new Ctx(NO_META, op);
    const timerCtx = new KeyedCtx(NO_META, op);
    onTimers(node.id, fn.onTimer?.bind(fn), (t, meta) => {
      current = meta;
      return timerCtx.rebindKeyed(meta, t.domain);
    }, collector);
    return (v, m) => {
      current = m;
      element(v, m, elementCtx.rebindKeyed(m), collector);
    };
  };

  // compile from the exits backwards so every operator finds its consumers compiled
  for (const op of [...stage.operators].reverse()) {
    const node = graph.get(op.id);
    if (!node) throw new Error(`operator ${op.id} of stage ${stage.id} is not in job "${job.name}": was the job changed after planning?`);
    // pass-through nodes run no user code; every other operator's exceptions name it
    const push = compileOperator(node);
    compiled.set(op.id, node.kind === 'source' || node.kind === 'union' || node.kind === 'sideOutput' ? push : withOperatorErrors(node, push));
  }

  function compileOperator(node: LogicalNode): Push {
    const { next, side } = outputsOf(node.id);
    switch (node.kind) {
      case 'source':
      case 'union':
      case 'sideOutput':
        return next;
      case 'map': {
        const fn = node.fn;
        const ctx = reusableContext();
        return (v, m) => next(fn(v, ctx(m)), m);
      }
      case 'filter': {
        const fn = node.fn;
        const ctx = reusableContext();
        return (v, m) => {
          if (fn(v, ctx(m))) next(v, m);
        };
      }
      case 'flatMap': {
        const fn = node.fn;
        const ctx = reusableContext();
        return (v, m) => {
          for (const out of fn(v, ctx(m))) next(out, m);
        };
      }
      case 'exchange': {
        const { toStage, input } = stage.operators.find((o) => o.id === node.id)!.exchange!;
        if (node.partitioning === 'key') {
          const selector = checkedKeySelector(node);
          return (v, m) => {
            const key = keyString(selector(v));
            outbox.emitKeyed(toStage, keyGroupOf(key, plan.maxParallelism), m.timestamp, encodePayload(v), input);
          };
        }
        if (node.partitioning === 'broadcast') return (v, m) => outbox.emitBroadcast(toStage, m.timestamp, encodePayload(v), input);
        return (v, m) => outbox.emitRebalance(toStage, m.timestamp, encodePayload(v), input);
      }
      case 'process': {
        const fn = node.fn;
        return keyedFunction(node, fn, next, side, (v, _m, ctx, out) => fn.processElement(v, ctx, out), KeyedCtx);
      }
      case 'coProcess': {
        const fn = node.fn;
        return keyedFunction(node, fn, next, side, (v, m, ctx, out) => (m.input === 1 ? fn.processElement2(v, ctx, out) : fn.processElement1(v, ctx, out)), KeyedCtx);
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
          (v, m, ctx, out) => {
            if (m.input === 1) fn.processBroadcastElement(v, Object.assign(context(m), { getBroadcastState: <K, V>(d: MapStateDescriptor<K & (string | number), V>) => broadcast.writable(opId, d) }), out);
            else fn.processElement(v, ctx, out);
          },
          KeyedBroadcastCtx,
        );
      }
      case 'operatorProcess': {
        const fn = node.fn;
        const opId = node.id;
        const declared = new Map(node.operatorState.map((d) => [d.name, d]));
        let current: RecordMeta | undefined;
        const collector: Collector<unknown> = { collect: (value) => next(value, current!) };
        return (v, m) => {
          current = m;
          fn.processElement(
            v,
            Object.assign(context(m), {
              getOperatorListState<T>(d: OperatorListStateDescriptor<T>): ListState<T> {
                if (!declared.has(d.name)) throw new Error(`operator state "${d.name}" is not declared by ${opId}: list it in the function's \`state\``);
                return operatorState.list(opId, d.name, d.mode) as ListState<T>;
              },
              output: <T>(tag: OutputTag<T>, value: T) => side.get(tag.id)?.(value, m),
            }),
            collector,
          );
        };
      }
      case 'reduce': {
        const fn = node.fn;
        const d = node.state[0] as ValueStateDescriptor<unknown>;
        const opId = node.id;
        return (v, m) => {
          const s = state.valueState(opId, m.key!, m.keyGroup, d);
          const acc = s.value();
          const out = acc === undefined ? v : fn(acc, v);
          s.update(out);
          next(out, m);
        };
      }
      case 'window':
        return compileWindow(node, next, side);
      case 'sink':
        return compileSink(node);
    }
  }

  function compileWindow(node: WindowNode, next: Push, side: Map<string, Push>): Push {
    const opId = node.id;
    const a = node.assigner;
    const lateness = node.allowedLatenessMs;
    const f = node.function;
    // per key: [start, end, accumulator or elements][], sorted by start
    const d: ValueStateDescriptor<Array<[number, number, unknown]>> = { name: node.state[0]!.name, kind: 'value', serializer: jsonSerializer() };
    const lateOut = node.lateTag ? side.get(node.lateTag) : undefined;

    const emit = (meta: RecordMeta, w: TimeWindow, acc: unknown) => {
      const out = new WindowResultMeta(meta, w.end - 1);
      const key = keyFromString(meta.key!);
      if (f.type === 'process') {
        f.fn.process(key, w, acc as unknown[], { collect: (v) => next(v, out) });
        return;
      }
      const value = f.type === 'aggregate' ? f.aggregate.getResult(acc) : acc;
      next(node.result ? node.result(key, w, value) : { key, window: w, value }, out);
    };
    const add = (acc: unknown, v: unknown): unknown => {
      switch (f.type) {
        case 'reduce':
          return acc === undefined ? v : f.reduce(acc, v);
        case 'aggregate':
          return f.aggregate.add(v, acc === undefined ? f.aggregate.createAccumulator() : acc);
        case 'process':
          return [...((acc as unknown[] | undefined) ?? []), v];
      }
    };
    const merge = (x: unknown, y: unknown): unknown => {
      switch (f.type) {
        case 'reduce':
          return f.reduce(x, y);
        case 'aggregate':
          return f.aggregate.merge!(x, y);
        case 'process':
          return [...(x as unknown[]), ...(y as unknown[])];
      }
    };
    const schedule = (key: string, kg: number, end: number) => {
      timers.register('event-time', opId, key, kg, end - 1);
      if (lateness > 0) timers.register('event-time', opId, key, kg, end - 1 + lateness);
    };
    const unschedule = (key: string, end: number) => {
      timers.remove('event-time', opId, key, end - 1);
      if (lateness > 0) timers.remove('event-time', opId, key, end - 1 + lateness);
    };
    const late = (v: unknown, m: RecordMeta, ts: number, wm: number) => {
      // no window took the record: it is late (as Flink decides it: only when every window skipped it)
      if (ts + lateness <= wm) {
        if (lateOut) lateOut(v, m);
        else lateDropped++;
      }
    };

    timerHandlers.set(opId, (t) => {
      const list = (state.read(opId, t.key, t.keyGroup, d) as Windows | undefined) ?? [];
      const meta = new TimerMeta(opId, t);
      let kept = 0;
      for (const e of list) {
        const end = e[1];
        if (end - 1 === t.time) emit(meta, { start: e[0], end }, e[2]);
        // purge once the window can no longer receive records
        if (end - 1 + lateness > t.time) kept++;
      }
      state.write(opId, t.key, t.keyGroup, d, kept === 0 ? undefined : kept === list.length ? list : list.filter((e) => e[1] - 1 + lateness > t.time));
    });

    if (a.kind === 'tumbling') {
      // one window per record
      const { sizeMs, offsetMs } = a;
      return (v, m) => {
        const ts = m.timestamp;
        if (ts === undefined) throw new Error(`window ${opId} needs event time: give the source a \`timestamp\` function`);
        const wm = clock.watermark();
        const start = ts - mod(ts - offsetMs, sizeMs);
        const end = start + sizeMs;
        if (end - 1 + lateness <= wm) return late(v, m, ts, wm); // the window is gone
        const key = m.key!;
        const old = state.read(opId, key, m.keyGroup, d) as Windows | undefined;
        let at = -1;
        if (old) {
          for (let j = 0; j < old.length; j++) {
            if (old[j]![0] === start && old[j]![1] === end) {
              at = j;
              break;
            }
          }
        }
        // a new list and a new entry, never the stored ones changed: an undone record leaves them as they were
        let list: Windows;
        let e: Windows[number];
        if (at >= 0) {
          e = [start, end, add(old![at]![2], v)];
          list = old!.length === 1 ? [e] : old!.slice();
          list[at] = e;
          // the window already has its timer: without lateness nothing fired or removed it (it would be gone)
          if (lateness > 0) schedule(key, m.keyGroup, end);
        } else {
          e = [start, end, add(undefined, v)];
          list = old ? [...old, e] : [e];
          if (list.length > 1) list.sort(byWindow);
          schedule(key, m.keyGroup, end);
        }
        state.write(opId, key, m.keyGroup, d, list);
        // a late-but-allowed record updates a window that already fired: fire it again
        if (end - 1 <= wm) emit(m, { start, end }, e[2]);
      };
    }

    return (v, m) => {
      const ts = m.timestamp;
      if (ts === undefined) throw new Error(`window ${opId} needs event time: give the source a \`timestamp\` function`);
      const wm = clock.watermark();
      let list: Windows = [...((state.read(opId, m.key!, m.keyGroup, d) as Windows | undefined) ?? [])];
      const fireNow: TimeWindow[] = [];
      let changed = false;
      for (const w0 of assignWindows(a, ts)) {
        let w = w0;
        if (w.end - 1 + lateness <= wm) continue; // this window is gone
        changed = true;
        let existed = false;
        if (a.kind === 'session') {
          // merge with every session the new one overlaps
          let acc = add(undefined, v);
          const rest: typeof list = [];
          for (const [st, en, x] of list) {
            if (st < w.end && w.start < en) {
              unschedule(m.key!, en);
              acc = merge(x, acc);
              w = { start: Math.min(st, w.start), end: Math.max(en, w.end) };
            } else rest.push([st, en, x]);
          }
          list = [...rest, [w.start, w.end, acc]];
        } else {
          let i = -1;
          for (let j = 0; j < list.length; j++) {
            if (list[j]![0] === w.start && list[j]![1] === w.end) {
              i = j;
              break;
            }
          }
          existed = i >= 0;
          if (existed) list[i] = [w.start, w.end, add(list[i]![2], v)];
          else list.push([w.start, w.end, add(undefined, v)]);
        }
        // a window already in the state has its timer: without lateness nothing fired or removed it
        // (it would be gone), so adding it again would change nothing
        if (!existed || lateness > 0) schedule(m.key!, m.keyGroup, w.end);
        // a late-but-allowed record updates a window that already fired: fire it again
        if (w.end - 1 <= wm) fireNow.push(w);
      }
      if (!changed) return late(v, m, ts, wm);
      if (list.length > 1) list.sort(byWindow);
      state.write(opId, m.key!, m.keyGroup, d, list);
      for (const w of fireNow) {
        const e = list.find(([st, en]) => st === w.start && en === w.end);
        if (e) emit(m, w, e[2]);
      }
    };
  }

  function compileSink(node: SinkNode): Push {
    const spec = node.spec;
    switch (spec.kind) {
      case 'dynamodb-upsert': {
        const table = names.sinkTable(spec);
        const keyOf = node.sink.key!;
        const itemOf = node.sink.item;
        const keyAttribute = spec.keyAttribute ?? 'pk';
        return (v) => {
          const item = itemOf ? itemOf(v) : (v as Record<string, unknown>);
          if (!item || typeof item !== 'object') throw new Error(`sink "${spec.name}" needs an object per value, got ${typeof item}`);
          outbox.upsert(spec.name, table, keyAttribute, keyOf(v), item);
        };
      }
      // transactional sinks: staged per epoch, published when the checkpoint after them commits
      case 'collect':
      case 's3-file':
      case 'kinesis':
        return (v) => outbox.collect(spec.name, v);
    }
  }

  // the stage's entries, by input index: a record feeds the entry operators its exchange leads to
  const byInput = new Map<number, string[]>();
  const keySelectors: Array<((value: unknown) => string | number) | undefined> = [];
  for (const op of stage.operators.filter((o) => o.inputs.length === 0)) {
    const n = graph.get(op.id)!;
    const exchanges = n.inputs.filter((i) => i.kind === 'exchange');
    if (!exchanges.length) byInput.set(0, [...(byInput.get(0) ?? []), op.id]);
    exchanges.forEach((e, side) => {
      const input = n.kind === 'coProcess' || n.kind === 'broadcastProcess' ? side : 0;
      byInput.set(input, [...new Set([...(byInput.get(input) ?? []), op.id])]);
      if (e.kind === 'exchange' && e.partitioning === 'key') keySelectors[input] = checkedKeySelector(e);
    });
  }
  const routes: Push[] = [];
  for (const [input, ids] of byInput) routes[input] = fanOut(ids);
  const route0 = routes[0] ?? (() => undefined);
  const route: Push = routes.length <= 1 ? route0 : (v, m) => (routes[m.input ?? 0] ?? route0)(v, m);

  /**
   * A record (or a timer) is applied whole or not at all: while it runs, its outputs wait in the
   * outbox and every store notes what it changes first; when a function throws, the stores put
   * back what they noted and the outputs are dropped, then the error goes on to the instance (which
   * dead-letters the record or fails). Every operator kind goes through here.
   */
  let lateMark = 0;
  const begin = () => {
    state.beginRecord();
    timers.beginRecord();
    outbox.beginRecord();
    operatorState.beginRecord();
    broadcast.beginRecord();
    lateMark = lateDropped;
  };
  // outputs first: should writing one fail, the record is still undone
  const commit = () => {
    outbox.commitRecord();
    state.commitRecord();
    timers.commitRecord();
    operatorState.commitRecord();
    broadcast.commitRecord();
  };
  const rollback = () => {
    state.rollbackRecord();
    timers.rollbackRecord();
    outbox.rollbackRecord();
    operatorState.rollbackRecord();
    broadcast.rollbackRecord();
    lateDropped = lateMark;
  };
  const push: Push = (v, m) => {
    begin();
    try {
      route(v, m);
      commit();
    } catch (err) {
      rollback();
      throw err;
    }
  };
  const fireTimer = (t: Timer) => {
    const handler = timerHandlers.get(t.operatorId);
    if (!handler) return;
    begin();
    try {
      handler(t);
      commit();
    } catch (err) {
      rollback();
      throw err;
    }
  };
  const keyedOperators: string[] = [];
  for (const op of stage.operators) {
    const n = graph.get(op.id)!;
    if (n.kind === 'process' || n.kind === 'reduce' || n.kind === 'window' || n.kind === 'coProcess' || n.kind === 'broadcastProcess') {
      // a window's list is replaced whole at every change (see compileWindow)
      if (n.kind === 'window') state.register(op.id, [{ name: n.state[0]!.name, kind: 'value', serializer: jsonSerializer() }], true);
      else state.register(op.id, n.state);
      keyedOperators.push(op.id);
    }
  }
  return {
    push,
    keySelectors,
    keyedOperators,
    fireTimer,
    lateDropped: () => lateDropped,
  };
}
