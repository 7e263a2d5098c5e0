/**
 * What flows between the clauses of a compiled query, shared by the query compiler, the grouping and
 * the joins: a relation (rows and how to read their columns), what a SELECT produces, and the
 * changes an updating result (a GROUP BY without a window) carries instead of rows.
 */
import type { DataStream } from '../api/job.js';
import { Scope, type ExprType, type Row, type ScopeColumn } from './expressions.js';

/** A relation flowing through the compiler: a stream of rows and how to read their columns. */
export interface Relation {
  readonly stream: DataStream<Row>;
  readonly scope: Scope;
  /** the column whose value is the record's event time (windows and interval joins need it) */
  readonly rowtime: ScopeColumn | undefined;
  /** parallelism hint: the shard count upstream */
  readonly shards: number;
  /** rows are upserts `{ k, v }` by key (a non-windowed aggregate): only a sink can take them */
  readonly updating?: boolean;
  /** where the relation was named, for errors */
  readonly label: string;
}

/** What a SELECT produces: rows as objects keyed by output column name. */
export interface QueryOutput {
  readonly stream: DataStream<Row>;
  readonly columns: ReadonlyArray<{ readonly name: string; readonly type: ExprType }>;
  /** output column equal to the record's event time, if any */
  readonly rowtime: string | undefined;
  readonly shards: number;
  /** items are `{ k: key, v: row }` upserts */
  readonly updating: boolean;
  /** for updating results: the output columns that form the key (when they are all selected) */
  readonly keyColumns?: readonly string[];
}


/**
 * One change of an updating result: the row of key `k` is now `v` (null: it no longer exists, or no
 * longer passes HAVING/WHERE) and replaces `old` (null: it is new).
 */
export interface Change {
  readonly k: string;
  readonly v: Row | null;
  readonly old: Row | null;
}

/** Applies `f` to both rows of a change (null: the row drops out); emits nothing when neither remains. */
export function onChange(u: Change, f: (r: Row) => Row | null): Change[] {
  const v = u.v === null ? null : f(u.v);
  const old = u.old === null ? null : f(u.old);
  return v === null && old === null ? [] : [{ k: u.k, v, old }];
}

/** The rows of `rel` that pass a WHERE (of an updating result: both rows of each change). */
export function whereRows(rel: Relation, f: (r: Row) => unknown): DataStream<Row> {
  return rel.updating
    ? rel.stream.flatMap((u: Change) => onChange(u, (r) => (f(r) === true ? r : null)), { name: 'where' })
    : rel.stream.filter((r) => f(r) === true, { name: 'where' });
}

let relationIds = 0;

/** A SELECT's output seen as a table (a subquery in FROM). */
export function outputAsRelation(out: QueryOutput, alias: string | undefined): Relation {
  const cols: ScopeColumn[] = out.columns.map((col) => ({
    qualifier: alias,
    name: col.name,
    type: col.type,
    get: (r: Row) => r[col.name],
    id: `${alias ?? '_sub'}#${relationIds++}.${col.name}`,
  }));
  return {
    stream: out.stream,
    scope: new Scope(cols),
    rowtime: out.rowtime ? cols.find((c) => c.name === out.rowtime) : undefined,
    shards: out.shards,
    ...(out.updating ? { updating: true } : {}),
    label: alias ?? 'the subquery',
  };
}
