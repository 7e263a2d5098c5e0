/**
 * Compiles a stage's chain of operators into plain functions that push a value from the stage's
 * entry to its exits (exchanges to the next stage, sinks, side outputs). One function per operator
 * turns a plan node into running code; user functions are found by operator id in the job's graph.
 * Keyed operators get their state handles and timers through the context; timers fire through
 * `fireTimer`, which the instance calls when the watermark or processing time passes them.
 */
import type { LogicalNode } from '../api/graph.js';
import type { Job } from '../api/job.js';
import type { ListState, OperatorListStateDescriptor, ValueStateDescriptor } from '../api/state.js';
import type { Collector, OutputTag, RecordContext } from '../api/types.js';
import { encodePayload, encodePayloadRange, payloadRange } from '../codec/payload.js';
import { checkedKeySelector, keyGroupOf, keyString } from '../plan/key-groups.js';
import { PlanError, UsageError } from '../util/errors.js';
import { withOperatorErrors } from '../util/operator-errors.js';
import type { Plan, PlanStage } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import type { KeyedStateCache } from './keyed-state.js';
import type { Outbox } from './outbox.js';
import type { Timer, TimerIndex } from './timers.js';
import { BroadcastStateStore } from './broadcast-state.js';
import { OperatorStateStore } from './operator-state.js';
import { compileKeyedProcess } from './keyed-process-operator.js';
import { OperatorContext, reusableContext, type ChainClock, type OperatorEnv, type Push, type RecordMeta, type TimerFn } from './operator-context.js';
import { compileSink } from './sink-operator.js';
import { compileWindow, windowStateDescriptor } from './window-operator.js';

export type { ChainClock, RecordMeta } from './operator-context.js';

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
  // a record or timer is being applied; it has begun noting its timer changes (see `begin`)
  let applying = false;
  let timersNoted = false;

  const boundClock: ChainClock = { processingTime: () => clock.processingTime(), watermark: () => clock.watermark() };

  const context = (meta: RecordMeta): RecordContext => new OperatorContext(meta, boundClock);
  const reusable = () => reusableContext(boundClock);
  const env: OperatorEnv = {
    state,
    timers,
    broadcast,
    clock: boundClock,
    onTimer: (opId, fn) => timerHandlers.set(opId, fn),
    dropLate: () => {
      lateDropped++;
    },
    recordTimers: () => {
      if (applying && !timersNoted) {
        timers.beginRecord();
        timersNoted = true;
      }
    },
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

  // compile from the exits backwards so every operator finds its consumers compiled
  for (const op of [...stage.operators].reverse()) {
    const node = graph.get(op.id);
    if (!node) throw new PlanError(`stages.${stage.id}.operators.${op.id}`, `not in job "${job.name}": was the job changed after planning?`);
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
        const ctx = reusable();
        return (v, m) => next(fn(v, ctx(m)), m);
      }
      case 'filter': {
        const fn = node.fn;
        const ctx = reusable();
        return (v, m) => {
          if (fn(v, ctx(m))) next(v, m);
        };
      }
      case 'flatMap': {
        const fn = node.fn;
        const ctx = reusable();
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
            // the payload as a range of the encoder's chunk: copied into its packet, it needs no view of its own
            const bytes = encodePayloadRange(v);
            outbox.emitKeyed(toStage, keyGroupOf(key, plan.maxParallelism), m.timestamp, bytes, input, payloadRange.start, payloadRange.end);
          };
        }
        if (node.partitioning === 'broadcast') return (v, m) => outbox.emitBroadcast(toStage, m.timestamp, encodePayload(v), input);
        return (v, m) => {
          const bytes = encodePayloadRange(v);
          outbox.emitRebalance(toStage, m.timestamp, bytes, input, payloadRange.start, payloadRange.end);
        };
      }
      case 'process':
      case 'coProcess':
      case 'broadcastProcess':
        return compileKeyedProcess(node, next, side, env);
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
                if (!declared.has(d.name)) throw new UsageError(opId, 'state', `does not declare the operator state "${d.name}": list it in the function's \`state\``);
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
        return compileWindow(node, next, side, env);
      case 'sink':
        return compileSink(node, names, outbox);
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
  // only the stores an operator of this stage can change take part (each costs calls per record)
  const kinds = new Set(stage.operators.map((o) => graph.get(o.id)!.kind));
  // a window changes timers at nearly every record; a keyed process function rarely does, so its
  // record notes them from its first change on (env.recordTimers, called by its timer service)
  const windowTimers = kinds.has('window');
  const usesOperatorState = kinds.has('operatorProcess');
  const usesBroadcast = kinds.has('broadcastProcess');
  const begin = () => {
    applying = true;
    state.beginRecord();
    if (windowTimers) {
      timers.beginRecord();
      timersNoted = true;
    }
    outbox.beginRecord();
    if (usesOperatorState) operatorState.beginRecord();
    if (usesBroadcast) broadcast.beginRecord();
    lateMark = lateDropped;
  };
  // outputs first: should writing one fail, the record is still undone
  const commit = () => {
    applying = false;
    outbox.commitRecord();
    state.commitRecord();
    if (timersNoted) {
      timersNoted = false;
      timers.commitRecord();
    }
    if (usesOperatorState) operatorState.commitRecord();
    if (usesBroadcast) broadcast.commitRecord();
  };
  const rollback = () => {
    applying = false;
    state.rollbackRecord();
    if (timersNoted) {
      timersNoted = false;
      timers.rollbackRecord();
    }
    outbox.rollbackRecord();
    if (usesOperatorState) operatorState.rollbackRecord();
    if (usesBroadcast) broadcast.rollbackRecord();
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
      // a window's list is replaced whole at every change, or its accumulator noted for the undo when changed in place (see compileWindow)
      if (n.kind === 'window') state.register(op.id, [windowStateDescriptor(n)], true);
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
