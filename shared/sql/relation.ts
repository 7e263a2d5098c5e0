/** What flows between the clauses of a compiled query: shared by the query compiler and the joins. */
import type { DataStream } from '../api/job.js';
import type { Row, Scope, ScopeColumn } from './expressions.js';

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
