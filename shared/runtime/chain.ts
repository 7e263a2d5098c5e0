/**
 * Compiles a stage's chain of operators into plain functions that push a value from the stage's
 * entry to its exits (exchanges to the next stage, and sinks). One function per operator turns a
 * plan node into running code; user functions are found by operator id in the job's graph.
 */
import type { LogicalNode, SinkNode } from '../api/graph.js';
import type { Job } from '../api/job.js';
import type { ValueStateDescriptor } from '../api/state.js';
import type { Collector, KeyedContext, RecordContext } from '../api/types.js';
import { encodePayload } from '../codec/payload.js';
import { keyGroupOf, keyString } from '../plan/key-groups.js';
import type { Plan, PlanStage } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import type { KeyedStateCache } from './keyed-state.js';
import type { Outbox } from './outbox.js';
import { seededRandom } from './random.js';

/** What the runtime knows about the record being pushed through the chain. */
export interface RecordMeta {
  timestamp: number | undefined;
  /** stable id of the input record: seeds `ctx.random()` */
  recordId: string;
  /** the record's key and key group, in a keyed stage */
  key: string | undefined;
  keyGroup: number;
}

export interface ChainClock {
  processingTime(): number;
  watermark(): number;
}

type Push = (value: unknown, meta: RecordMeta) => void;

export interface CompiledChain {
  /** pushes a value into the stage's entry operators */
  readonly push: Push;
  /** the selector that keys this stage's input (keyed stages only) */
  readonly keySelector: ((value: unknown) => string | number) | undefined;
  /** operators of the stage holding keyed state */
  readonly keyedOperators: readonly string[];
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
): CompiledChain {
  const graph = nodesById(job);
  const consumers = new Map<string, string[]>();
  for (const op of stage.operators) for (const i of op.inputs) consumers.set(i, [...(consumers.get(i) ?? []), op.id]);
  const compiled = new Map<string, Push>();

  const context = (meta: RecordMeta): RecordContext => ({
    timestamp: meta.timestamp,
    currentProcessingTime: () => clock.processingTime(),
    currentWatermark: () => clock.watermark(),
    random: seededRandom(meta.recordId),
  });

  const fanOut = (ids: readonly string[]): Push => {
    const fns = ids.map((id) => compiled.get(id)!);
    if (fns.length === 1) return fns[0]!;
    return (v, m) => {
      for (const f of fns) f(v, m);
    };
  };

  // compile from the exits backwards so every operator finds its consumers compiled
  for (const op of [...stage.operators].reverse()) {
    const node = graph.get(op.id);
    if (!node) throw new Error(`operator ${op.id} of stage ${stage.id} is not in job "${job.name}": was the job changed after planning?`);
    const next = fanOut(consumers.get(op.id) ?? []);
    compiled.set(op.id, compileOperator(node, next));
  }

  function compileOperator(node: LogicalNode, next: Push): Push {
    switch (node.kind) {
      case 'source':
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
        const toStage = stage.operators.find((o) => o.id === node.id)!.exchange!.toStage;
        if (node.partitioning === 'key') {
          const selector = node.keySelector!;
          return (v, m) => {
            const key = keyString(selector(v));
            outbox.emitKeyed(toStage, keyGroupOf(key, plan.maxParallelism), m.timestamp, encodePayload(v));
          };
        }
        if (node.partitioning === 'broadcast') return (v, m) => outbox.emitBroadcast(toStage, m.timestamp, encodePayload(v));
        return (v, m) => outbox.emitRebalance(toStage, m.timestamp, encodePayload(v));
      }
      case 'process': {
        const fn = node.fn;
        const declared = new Set(node.state.map((d) => d.name));
        const opId = node.id;
        const collector: Collector<unknown> & { meta: RecordMeta | undefined } = {
          meta: undefined,
          collect(value) {
            next(value, this.meta!);
          },
        };
        return (v, m) => {
          const key = m.key!;
          const base = context(m);
          const ctx: KeyedContext<string> = {
            ...base,
            key,
            getState<T>(d: ValueStateDescriptor<T>) {
              if (!declared.has(d.name)) {
                throw new Error(`state "${d.name}" is not declared by ${opId} (${node.name}): list it in the function's \`state\``);
              }
              return state.valueState(opId, key, m.keyGroup, d);
            },
          };
          collector.meta = m;
          fn.processElement(v, ctx, collector);
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
      case 'sink':
        return compileSink(node);
    }
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
      case 'collect':
        return (v) => outbox.collect(spec.name, v);
    }
  }

  const entry = stage.operators.filter((o) => o.inputs.length === 0).map((o) => o.id);
  let keySelector: ((value: unknown) => string | number) | undefined;
  if (stage.input.kind === 'exchange' && stage.input.keyed) {
    const firstEntry = graph.get(entry[0]!)!;
    const exchange = firstEntry.inputs[0];
    if (exchange?.kind === 'exchange') keySelector = exchange.keySelector;
  }
  const keyedOperators: string[] = [];
  for (const op of stage.operators) {
    const n = graph.get(op.id)!;
    if (n.kind === 'process' || n.kind === 'reduce') {
      state.register(op.id, n.state);
      keyedOperators.push(op.id);
    }
  }
  return { push: fanOut(entry), keySelector, keyedOperators };
}
