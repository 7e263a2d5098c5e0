/**
 * Queryable state: read a running job's keyed state from outside, straight from the state table.
 * What it returns is the key's value as of the last checkpoint whose rows its instance applied to
 * the table: every `checkpoint.materializeEvery`-th one (about every two minutes by default; the checkpoints
 * between write only their deltas, runtime/changelog.ts), at most one ahead of the last completed
 * checkpoint, never a half-applied mix (the reader decodes rows exactly as a restoring instance does).
 */
import type { LogicalNode } from '../api/graph.js';
import type { Job } from '../api/job.js';
import type { StateDescriptor } from '../api/state.js';
import type { Key } from '../api/types.js';
import { keyGroupOf, keyString } from '../plan/key-groups.js';
import type { Plan } from '../plan/plan.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import { KeyedStateCache } from '../runtime/keyed-state.js';
import type { StateStore } from '../runtime/ports.js';
import { SluiceError } from '../util/errors.js';

export class QueryableState {
  readonly plan: Plan;

  constructor(
    private readonly job: Job,
    private readonly store: StateStore,
  ) {
    this.plan = planJob(job);
  }

  /** The keyed operators and the state each declares. */
  operators(): Array<{ id: string; name: string; state: string[] }> {
    return this.job.nodes.filter(hasState).map((n) => ({ id: n.id, name: n.name, state: n.state.map((d) => d.name) }));
  }

  /** The value of `state` for `key` in the operator named (or with the id) `operator`. */
  async get<T = unknown>(operator: string, state: string, key: Key): Promise<T | undefined> {
    const node = this.job.nodes.filter(hasState).find((n) => n.name === operator || n.id === operator);
    if (!node) {
      throw new SluiceError(
        `job "${this.plan.job}" has no keyed operator "${operator}" (keyed operators: ${this.operators().map((o) => `${o.name} (${o.id})`).join(', ') || 'none'})`,
        'QUERY_INVALID',
      );
    }
    const d = node.state.find((s) => s.name === state);
    if (!d) throw new SluiceError(`operator "${operator}" has no state "${state}" (it has: ${node.state.map((s) => s.name).join(', ')})`, 'QUERY_INVALID');
    const k = keyString(key);
    const id = { operatorId: node.id, keyGroup: keyGroupOf(k, this.plan.maxParallelism), key: k };
    const cache = new KeyedStateCache();
    cache.register(node.id, node.state as StateDescriptor<unknown>[]);
    cache.load([id], await this.store.getRows([id]));
    return readHandle(cache, node.id, k, id.keyGroup, d) as T | undefined;
  }
}

type Stateful = Extract<LogicalNode, { state: readonly StateDescriptor<unknown>[] }>;
const hasState = (n: LogicalNode): n is Stateful => 'state' in n && n.state.length > 0;

function readHandle(cache: KeyedStateCache, op: string, key: string, kg: number, d: StateDescriptor<unknown>): unknown {
  switch (d.kind) {
    case 'value':
      return cache.valueState(op, key, kg, d as never).value();
    case 'list':
      return cache.listState(op, key, kg, d as never).get();
    case 'map':
      return Object.fromEntries(cache.mapState(op, key, kg, d as never).entries());
    case 'reducing':
      return cache.reducingState(op, key, kg, d as never).get();
    case 'aggregating':
      return cache.aggregatingState(op, key, kg, d as never).get();
  }
}

export { resourceNames };
