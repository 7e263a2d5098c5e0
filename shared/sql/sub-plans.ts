/**
 * Sub-plan reuse within one statement: when two subqueries compute the same windowed aggregate over
 * the same input (same stream, same WHERE, same GROUP BY keys, same window over the same time
 * column), the aggregate is planned once and both read its rows — as Flink's planner reuses a
 * sub-plan. Each consumer keeps its own HAVING and SELECT after the shared aggregate, so output
 * columns may differ; the later one's aggregate calls must be among the earlier one's.
 *
 * Subqueries are compared by a structural key of the compiled relation, never by SQL text: column
 * references become positions in the input's columns, and the input is the identity of its stream
 * (a filtered, joined or grouped stream is a new stream, so nothing is shared across inputs).
 */
import type { DataStream } from '../api/job.js';
import { canonical, type AstNode, type Scope } from './expressions.js';
import type { Relation } from './relation.js';

/** A window's result before HAVING and SELECT: group values, aggregate values, window bounds. */
export interface AggregatedRow {
  readonly g: unknown[];
  readonly a: unknown[];
  readonly w: { readonly start: number; readonly end: number };
}

interface Planned {
  readonly stream: DataStream<AggregatedRow>;
  /** structural keys of the aggregate calls, in the order of the rows' `a` */
  readonly aggregates: readonly string[];
}

/** An expression's structure over `scope`: columns by position, so aliases of one input compare equal. */
export function structuralKey(node: AstNode, scope: Scope): string {
  return canonical(node, scope, (col) => `$${scope.columns.indexOf(col)}`);
}

export class SubPlans {
  private readonly streamIds = new WeakMap<object, number>();
  private readonly planned = new Map<string, Planned[]>();
  private nextStreamId = 0;

  /** The key of an aggregate over `rel` (before WHERE) with the structural keys of its WHERE, GROUP BY and window. */
  key(rel: Relation, parts: { where: string | undefined; groups: readonly string[]; window: string; parallelism: number }): string {
    let id = this.streamIds.get(rel.stream);
    if (id === undefined) this.streamIds.set(rel.stream, (id = this.nextStreamId++));
    const columns = rel.scope.columns.map((c) => [c.name, c.type]);
    const rowtime = rel.rowtime ? rel.scope.columns.indexOf(rel.rowtime) : -1;
    return JSON.stringify([id, columns, rowtime, rel.updating === true, parts.where ?? null, parts.groups, parts.window, parts.parallelism]);
  }

  /** A planned aggregate with this key computing every one of `aggregates`: its stream and where each sits in its rows. */
  find(key: string, aggregates: readonly string[]): { stream: DataStream<AggregatedRow>; positions: number[] } | undefined {
    for (const p of this.planned.get(key) ?? []) {
      const positions = aggregates.map((a) => p.aggregates.indexOf(a));
      if (positions.every((i) => i >= 0)) return { stream: p.stream, positions };
    }
    return undefined;
  }

  add(key: string, stream: DataStream<AggregatedRow>, aggregates: readonly string[]): void {
    this.planned.set(key, [...(this.planned.get(key) ?? []), { stream, aggregates }]);
  }
}
