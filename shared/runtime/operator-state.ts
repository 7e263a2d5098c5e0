/**
 * Operator (non-keyed) list state: each instance keeps its own lists, saved whole in its snapshot.
 * When a job is restored with another parallelism the lists are redistributed by their mode:
 *
 * - `split` (ListState): the items of all old instances, in instance order, dealt round robin to the
 *   new instances — every item lands in exactly one instance;
 * - `union` (UnionListState): every new instance gets all items of all old instances.
 */
import { packedValueProblem } from '../util/encodable-values.js';
import type { ListState } from '../api/state.js';
import { UsageError } from '../util/errors.js';
import { UndoLog } from './undo-log.js';

export type OperatorListMode = 'split' | 'union';
/** [operator, state name, mode, items] */
export type OperatorListRow = [string, string, OperatorListMode, unknown[]];

interface OperatorList {
  mode: OperatorListMode;
  items: unknown[];
}

export class OperatorStateStore {
  private readonly lists = new Map<string, OperatorList>();
  /** while a record is applied: each list it changed, with its items before the first change */
  private readonly undo = new UndoLog<OperatorList, unknown[]>(
    (l) => l.items.slice(),
    (l, items) => void (l.items = items),
  );

  list<T>(operatorId: string, name: string, mode: OperatorListMode): ListState<T> {
    const id = `${operatorId}\u0000${name}`;
    let l = this.lists.get(id);
    if (!l) this.lists.set(id, (l = { mode, items: [] }));
    const cell = l;
    const change = () => this.undo.touch(cell);
    // checked before the list changes; an iterable is read once, into the array the check saw
    const checked = (vs: Iterable<T>): T[] => {
      const items = [...vs];
      for (const v of items) checkItem(operatorId, name, v);
      return items;
    };
    return {
      get: () => [...cell.items] as T[],
      add: (v) => {
        checkItem(operatorId, name, v);
        change().items.push(v);
      },
      addAll: (vs) => {
        const items = checked(vs);
        change().items.push(...items);
      },
      update: (vs) => {
        const items = checked(vs);
        change().items = items;
      },
      clear: () => void (change().items = []),
    };
  }

  /** Starts a record: lists it changes keep their items from before. */
  beginRecord(): void {
    this.undo.begin();
  }

  commitRecord(): void {
    this.undo.commit();
  }

  /** The record failed: the lists it changed get their items back. */
  rollbackRecord(): void {
    this.undo.rollback();
  }

  toJSON(): OperatorListRow[] {
    return [...this.lists].map(([id, l]) => {
      const [op, name] = id.split('\u0000') as [string, string];
      return [op, name, l.mode, [...l.items]];
    });
  }

  load(rows: readonly OperatorListRow[]): void {
    for (const [op, name, mode, items] of rows) this.lists.set(`${op}\u0000${name}`, { mode, items: [...items] });
  }
}

/**
 * Refuses an item the snapshot cannot carry back as written (a bigint, a Map, a cycle: see
 * packedValueProblem) before the list changes: the record that adds it fails — a dead letter, its
 * effects undone — instead of every later checkpoint.
 */
function checkItem(operatorId: string, name: string, item: unknown): void {
  const why = packedValueProblem(item);
  if (why !== undefined) throw new UsageError(operatorId, `operator list state "${name}"`, `cannot hold this item: ${why}`);
}

/** New instances' operator lists from the old instances' (both in instance order). */
export function redistributeOperatorLists(old: ReadonlyArray<readonly OperatorListRow[]>, newParallelism: number): OperatorListRow[][] {
  const out: OperatorListRow[][] = Array.from({ length: newParallelism }, () => []);
  const byState = new Map<string, { op: string; name: string; mode: OperatorListMode; items: unknown[] }>();
  for (const rows of old) {
    for (const [op, name, mode, items] of rows) {
      const id = `${op}\u0000${name}`;
      const s = byState.get(id) ?? { op, name, mode, items: [] };
      s.items.push(...items);
      byState.set(id, s);
    }
  }
  for (const s of byState.values()) {
    for (let i = 0; i < newParallelism; i++) {
      const items = s.mode === 'union' ? [...s.items] : s.items.filter((_, j) => j % newParallelism === i);
      out[i]!.push([s.op, s.name, s.mode, items]);
    }
  }
  return out;
}
