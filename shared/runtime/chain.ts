/**
 * Compiles a stage's chain of operators into plain functions that push a value from the stage's
 * entry to its exits (exchanges to the next stage, sinks, side outputs). One function per operator
 * turns a plan node into running code; user functions are found by operator id in the job's graph.
 * Keyed operators get their state handles and timers through the context; timers fire through
 * `fireTimer`, which the instance calls when the watermark or processing time passes them.
 */
import type { LogicalNode, SinkNode, WindowNode } from '../api/graph.js';
import type { Job } from '../api/job.js';
import type { StateDescriptor, ValueStateDescriptor } from '../api/state.js';
import { jsonSerializer } from '../api/serializers.js';
import type { Collector, Key, KeyedContext, OnTimerContext, OutputTag, RecordContext } from '../api/types.js';
import { assignWindows, type TimeWindow } from '../api/windows.js';
import { encodePayload } from '../codec/payload.js';
import { keyFromString, keyGroupOf, keyString } from '../plan/key-groups.js';
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

  const context = (meta: RecordMeta): RecordContext => ({
    timestamp: meta.timestamp,
    currentProcessingTime: () => clock.processingTime(),
    currentWatermark: () => clock.watermark(),
    random: seededRandom(meta.recordId),
  });

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

  /** the keyed context of one (operator, key) */
  const keyedContext = (opId: string, declared: Set<string>, side: Map<string, Push>, meta: RecordMeta, domain?: TimeDomain): OnTimerContext<Key> => {
    const key = meta.key!;
    const kg = meta.keyGroup;
    const check = <D extends StateDescriptor<unknown>>(d: D): D => {
      if (!declared.has(d.name)) throw new Error(`state "${d.name}" is not declared by ${opId}: list it in the function's \`state\``);
      return d;
    };
    const timer = (domain: TimeDomain, time: number) => ({ domain, operatorId: opId, key, keyGroup: kg, time });
    return {
      ...context(meta),
      key: keyFromString(key),
      timeDomain: domain ?? 'event-time',
      getState: (d) => state.valueState(opId, key, kg, check(d)),
      getListState: (d) => state.listState(opId, key, kg, check(d)),
      getMapState: (d) => state.mapState(opId, key, kg, check(d)),
      getReducingState: (d) => state.reducingState(opId, key, kg, check(d)),
      getAggregatingState: (d) => state.aggregatingState(opId, key, kg, check(d)),
      timerService: {
        currentWatermark: () => clock.watermark(),
        currentProcessingTime: () => clock.processingTime(),
        registerEventTimeTimer: (t) => timers.add(timer('event-time', t)),
        deleteEventTimeTimer: (t) => timers.delete(timer('event-time', t)),
        registerProcessingTimeTimer: (t) => timers.add(timer('processing-time', t)),
        deleteProcessingTimeTimer: (t) => timers.delete(timer('processing-time', t)),
      },
      output: <T>(tag: OutputTag<T>, value: T) => side.get(tag.id)?.(value, meta),
    };
  };

  // compile from the exits backwards so every operator finds its consumers compiled
  for (const op of [...stage.operators].reverse()) {
    const node = graph.get(op.id);
    if (!node) throw new Error(`operator ${op.id} of stage ${stage.id} is not in job "${job.name}": was the job changed after planning?`);
    compiled.set(op.id, compileOperator(node));
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
        return (v, m) => next(fn(v, context(m)), m);
      }
      case 'filter': {
        const fn = node.fn;
        return (v, m) => {
          if (fn(v, context(m))) next(v, m);
        };
      }
      case 'flatMap': {
        const fn = node.fn;
        return (v, m) => {
          for (const out of fn(v, context(m))) next(out, m);
        };
      }
      case 'exchange': {
        const { toStage, input } = stage.operators.find((o) => o.id === node.id)!.exchange!;
        if (node.partitioning === 'key') {
          const selector = node.keySelector!;
          return (v, m) => {
            const key = keyString(selector(v));
            outbox.emitKeyed(toStage, keyGroupOf(key, plan.maxParallelism), m.timestamp, encodePayload(v), input);
          };
        }
        if (node.partitioning === 'broadcast') return (v, m) => outbox.emitBroadcast(toStage, m.timestamp, encodePayload(v), input);
        return (v, m) => outbox.emitRebalance(toStage, m.timestamp, encodePayload(v), input);
      }
      case 'coProcess': {
        const fn = node.fn;
        const declared = new Set(node.state.map((d) => d.name));
        const opId = node.id;
        let current: RecordMeta | undefined;
        const collector: Collector<unknown> = { collect: (value) => next(value, current!) };
        timerHandlers.set(opId, (t) => {
          if (!fn.onTimer) return;
          const meta: RecordMeta = { timestamp: t.time, recordId: `timer/${opId}/${t.key}/${t.time}`, key: t.key, keyGroup: t.keyGroup };
          current = meta;
          fn.onTimer(t.time, keyedContext(opId, declared, side, meta, t.domain), collector);
        });
        return (v, m) => {
          current = m;
          const ctx = keyedContext(opId, declared, side, m);
          if (m.input === 1) fn.processElement2(v, ctx, collector);
          else fn.processElement1(v, ctx, collector);
        };
      }
      case 'broadcastProcess': {
        const fn = node.fn;
        const declared = new Set(node.state.map((d) => d.name));
        const opId = node.id;
        let current: RecordMeta | undefined;
        const collector: Collector<unknown> = { collect: (value) => next(value, current!) };
        timerHandlers.set(opId, (t) => {
          if (!fn.onTimer) return;
          const meta: RecordMeta = { timestamp: t.time, recordId: `timer/${opId}/${t.key}/${t.time}`, key: t.key, keyGroup: t.keyGroup };
          current = meta;
          fn.onTimer(t.time, keyedContext(opId, declared, side, meta, t.domain), collector);
        });
        return (v, m) => {
          current = m;
          if (m.input === 1) {
            fn.processBroadcastElement(v, { ...context(m), getBroadcastState: (d) => broadcast.writable(opId, d) }, collector);
          } else {
            fn.processElement(v, { ...keyedContext(opId, declared, side, m), getBroadcastState: (d) => broadcast.readOnly(opId, d) }, collector);
          }
        };
      }
      case 'process': {
        const fn = node.fn;
        const declared = new Set(node.state.map((d) => d.name));
        const opId = node.id;
        let current: RecordMeta | undefined;
        const collector: Collector<unknown> = { collect: (value) => next(value, current!) };
        timerHandlers.set(opId, (t) => {
          if (!fn.onTimer) return;
          const meta: RecordMeta = { timestamp: t.time, recordId: `timer/${opId}/${t.key}/${t.time}`, key: t.key, keyGroup: t.keyGroup };
          current = meta;
          fn.onTimer(t.time, keyedContext(opId, declared, side, meta, t.domain), collector);
        });
        return (v, m) => {
          current = m;
          fn.processElement(v, keyedContext(opId, declared, side, m), collector);
        };
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
            {
              ...context(m),
              getOperatorListState: (d) => {
                if (!declared.has(d.name)) throw new Error(`operator state "${d.name}" is not declared by ${opId}: list it in the function's \`state\``);
                return operatorState.list(opId, d.name, d.mode);
              },
              output: <T>(tag: OutputTag<T>, value: T) => side.get(tag.id)?.(value, m),
            },
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
      const out: RecordMeta = { ...meta, timestamp: w.end - 1 };
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
    const timer = (key: string, kg: number, time: number): Timer => ({ domain: 'event-time', operatorId: opId, key, keyGroup: kg, time });
    const schedule = (key: string, kg: number, w: TimeWindow) => {
      timers.add(timer(key, kg, w.end - 1));
      if (lateness > 0) timers.add(timer(key, kg, w.end - 1 + lateness));
    };
    const unschedule = (key: string, w: TimeWindow) => {
      timers.delete({ domain: 'event-time', operatorId: opId, key, time: w.end - 1 });
      if (lateness > 0) timers.delete({ domain: 'event-time', operatorId: opId, key, time: w.end - 1 + lateness });
    };

    timerHandlers.set(opId, (t) => {
      const s = state.valueState(opId, t.key, t.keyGroup, d);
      const list = s.value() ?? [];
      const meta: RecordMeta = { timestamp: t.time, recordId: `timer/${opId}/${t.key}/${t.time}`, key: t.key, keyGroup: t.keyGroup };
      const keep: Array<[number, number, unknown]> = [];
      for (const [start, end, acc] of list) {
        const w = { start, end };
        if (end - 1 === t.time) emit(meta, w, acc);
        // purge once the window can no longer receive records
        if (end - 1 + lateness > t.time) keep.push([start, end, acc]);
      }
      if (keep.length) s.update(keep);
      else s.clear();
    });

    return (v, m) => {
      const ts = m.timestamp;
      if (ts === undefined) throw new Error(`window ${opId} needs event time: give the source a \`timestamp\` function`);
      const wm = clock.watermark();
      const s = state.valueState(opId, m.key!, m.keyGroup, d);
      let list = [...(s.value() ?? [])];
      const fireNow: TimeWindow[] = [];
      let changed = false;
      for (const w0 of assignWindows(a, ts)) {
        let w = w0;
        if (w.end - 1 + lateness <= wm) continue; // this window is gone
        changed = true;
        let acc = add(undefined, v);
        if (a.kind === 'session') {
          // merge with every session the new one overlaps
          const rest: typeof list = [];
          for (const [st, en, x] of list) {
            if (st < w.end && w.start < en) {
              unschedule(m.key!, { start: st, end: en });
              acc = merge(x, acc);
              w = { start: Math.min(st, w.start), end: Math.max(en, w.end) };
            } else rest.push([st, en, x]);
          }
          list = [...rest, [w.start, w.end, acc]];
        } else {
          const i = list.findIndex(([st, en]) => st === w.start && en === w.end);
          if (i >= 0) list[i] = [w.start, w.end, add(list[i]![2], v)];
          else list.push([w.start, w.end, acc]);
        }
        schedule(m.key!, m.keyGroup, w);
        // a late-but-allowed record updates a window that already fired: fire it again
        if (w.end - 1 <= wm) fireNow.push(w);
      }
      if (!changed) {
        // no window took the record: it is late (as Flink decides it: only when every window skipped it)
        if (ts + lateness <= wm) {
          if (lateOut) lateOut(v, m);
          else lateDropped++;
        }
        return;
      }
      list.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
      s.update(list);
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
      if (e.kind === 'exchange' && e.partitioning === 'key') keySelectors[input] = e.keySelector;
    });
  }
  const routes: Push[] = [];
  for (const [input, ids] of byInput) routes[input] = fanOut(ids);
  const route0 = routes[0] ?? (() => undefined);
  const push: Push = routes.length <= 1 ? route0 : (v, m) => (routes[m.input ?? 0] ?? route0)(v, m);
  const keyedOperators: string[] = [];
  for (const op of stage.operators) {
    const n = graph.get(op.id)!;
    if (n.kind === 'process' || n.kind === 'reduce' || n.kind === 'window' || n.kind === 'coProcess' || n.kind === 'broadcastProcess') {
      state.register(op.id, n.kind === 'window' ? [{ name: n.state[0]!.name, kind: 'value', serializer: jsonSerializer() }] : n.state);
      keyedOperators.push(op.id);
    }
  }
  return {
    push,
    keySelectors,
    keyedOperators,
    fireTimer: (t) => timerHandlers.get(t.operatorId)?.(t),
    lateDropped: () => lateDropped,
  };
}
