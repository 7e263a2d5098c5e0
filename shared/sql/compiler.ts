/**
 * SQL → job graph. The maintained parser (node-sql-parser, Flink SQL dialect) turns each statement
 * into a tree; this module turns the trees into calls of the public job API (`source`, `filter`,
 * `map`, `keyBy`, `window(...).aggregate`, `process`, `sinkTo`), so a SQL job is planned, described,
 * run and deployed exactly like a job written in TypeScript: one planner, no second engine.
 *
 * Shapes it compiles:
 * - projection/selection: source → filter(WHERE) → map(SELECT) → sink (append-only);
 * - windowed aggregation (GROUP BY TUMBLE/HOP/SESSION(...)): keyBy(group) → window → aggregate →
 *   filter(HAVING) → map(SELECT) (append-only; each window's result once, when it closes);
 * - non-windowed aggregation: keyBy(group) → process with the accumulators in keyed state, emitting
 *   the group's new row after every input (an updating result: upserts by key);
 * - joins (interval joins of two streams; see joins.ts);
 * - subqueries in FROM over any of these (append-only ones), so window results can be windowed again;
 *   a windowed aggregate two subqueries of a statement compute over the same input is planned once
 *   (sub-plans.ts).
 * This module walks the statements and owns the tables, sources and sinks; the parts of a statement
 * have their own modules: parser.ts, create-table.ts, projection.ts (SELECT lists), grouped-query.ts
 * (GROUP BY and aggregates), joins.ts.
 */
import type { DataStream, Job, JobOptions } from '../api/job.js';
import { job as newJob, WatermarkStrategies } from '../api/job.js';
import { collectSink, dynamoUpsertSink, kinesisSink, s3FileSink } from '../api/sinks.js';
import { HOLD_UNTIL_END } from '../bounded/bounded-reader.js';
import { rowParser, type Catalog, type Connector, type TableDef } from './catalog.js';
import { CompileContext } from './context.js';
import { tableDefinition } from './create-table.js';
import { compileExpr, Scope, type AstNode, type Row, type ScopeColumn } from './expressions.js';
import { compileGroupedQuery, containsAggregate } from './grouped-query.js';
import { compileJoin } from './joins.js';
import { parseStatement } from './parser.js';
import { compileProjection } from './projection.js';
import { outputAsRelation, whereRows, type Change, type QueryOutput, type Relation } from './relation.js';
import { SubPlans } from './sub-plans.js';
import { SourceText } from './source-text.js';

export interface SqlJobOptions {
  /** job name (prefixes AWS resource names); @default 'sql' */
  readonly name?: string;
  /** shown in error messages, e.g. the file name; @default '<sql>' */
  readonly origin?: string;
  /** tables declared in TypeScript, besides (or instead of) CREATE TABLE statements */
  readonly catalog?: Catalog;
  /** parallelism of grouping and join stages; @default the largest shard count of their inputs */
  readonly parallelism?: number;
  /** job options (checkpoints, key groups, poison policy) */
  readonly job?: JobOptions;
}

/** A source table that reads bounded input from S3: the bounded reader feeds its stream. */
export interface BoundedSourceSpec {
  readonly table: string;
  /** the plan's source name (= the table name) */
  readonly source: string;
  readonly bucket: string | undefined;
  readonly prefix: string;
  readonly format: 'json' | 'csv';
  readonly header: boolean;
}

export interface CompiledSql {
  readonly job: Job;
  readonly tables: ReadonlyMap<string, TableDef>;
  /** source tables the job reads, by name */
  readonly sources: readonly string[];
  /** sink names in the plan, in statement order */
  readonly sinks: ReadonlyArray<{ readonly name: string; readonly connector: Connector; readonly updating: boolean; readonly columns: readonly string[] }>;
  readonly bounded: readonly BoundedSourceSpec[];
}

/** Compiles a SQL script (CREATE TABLE, INSERT INTO / SELECT statements) into a job. Throws SqlError with line:column. */
export function compileSql(text: string, options: SqlJobOptions = {}): CompiledSql {
  return new SqlCompiler(text, options).compile();
}

/** The job of a SQL script; `export default sqlJob(readFileSync('q.sql', 'utf8'))` makes a deployable job module. */
export function sqlJob(text: string, options: SqlJobOptions = {}): Job {
  return compileSql(text, options).job;
}

class SqlCompiler {
  private readonly source: SourceText;
  private readonly tables = new Map<string, TableDef>();
  private readonly sources = new Map<string, DataStream<Row>>();
  /** per source table, the columns some query resolves (and its event time): the rows carry only these */
  private readonly usedColumns = new Map<string, Set<string>>();
  private readonly sinks: Array<{ name: string; connector: Connector; updating: boolean; columns: string[] }> = [];
  private readonly bounded: BoundedSourceSpec[] = [];
  private readonly job: Job;
  private resultCount = 0;
  private ctx!: CompileContext;
  /** aggregates planned by the current statement, for its other subqueries to reuse */
  private subPlans = new SubPlans();

  constructor(
    text: string,
    private readonly options: SqlJobOptions,
  ) {
    this.source = new SourceText(text, options.origin ?? '<sql>');
    this.job = newJob(options.name ?? 'sql', options.job);
    for (const [name, def] of Object.entries(options.catalog ?? {})) this.tables.set(name.toLowerCase(), { ...def, name: def.name ?? name });
  }

  compile(): CompiledSql {
    const statements = this.source.statements();
    if (!statements.length) throw this.source.error(0, 'no SQL statement found', 'SQL_SYNTAX');
    let queries = 0;
    for (const st of statements) {
      this.ctx = new CompileContext(this.source, st);
      this.subPlans = new SubPlans();
      const ast = parseStatement(this.source, st.text, st.offset);
      const node = Array.isArray(ast) ? ast[0] : ast;
      switch (node?.type) {
        case 'create':
          this.createTable(node);
          break;
        case 'insert':
          this.insert(node);
          queries++;
          break;
        case 'select':
          this.selectToResult(node);
          queries++;
          break;
        default:
          throw this.ctx.error(node, `unsupported statement ${String(node?.type).toUpperCase()}: use CREATE TABLE, INSERT INTO … SELECT, or SELECT`, 'SQL_UNSUPPORTED');
      }
    }
    if (!queries) throw this.source.error(statements.at(-1)!.offset, 'the script declares tables but has no query: add an INSERT INTO … SELECT or a SELECT', 'SQL_INVALID');
    return {
      job: this.job,
      tables: this.tables,
      sources: [...this.sources.keys()].map((k) => this.tables.get(k)!.name),
      sinks: this.sinks,
      bounded: this.bounded,
    };
  }

  // ------------------------------------------------------------------ DDL

  private createTable(node: AstNode): void {
    const def = tableDefinition(node, this.ctx, this.tables);
    this.tables.set(def.name.toLowerCase(), def);
  }

  // ------------------------------------------------------------------ sources

  /** The stream of a source table (one source per table, shared by every query that reads it). */
  sourceRelation(node: AstNode, name: string, alias: string | undefined): Relation {
    const def = this.tables.get(name.toLowerCase());
    if (!def) {
      const known = [...this.tables.values()].map((t) => t.name);
      throw this.ctx.error(node, `unknown table "${name}" (${known.length ? `declared: ${known.join(', ')}` : 'no table is declared: add CREATE TABLE … WITH (…)'})`, 'SQL_UNKNOWN_TABLE', name);
    }
    if (def.connector !== 'kinesis' && def.connector !== 's3') {
      throw this.ctx.error(node, `table ${def.name} (connector '${def.connector}') is a sink; a query can read only 'kinesis' or 's3' tables`, 'SQL_INVALID', name);
    }
    if (!def.columns.length) throw this.ctx.error(node, `table ${def.name} declares no columns`, 'SQL_INVALID', name);
    let stream = this.sources.get(def.name.toLowerCase());
    const used = this.usedColumns.get(def.name.toLowerCase()) ?? new Set(def.eventTime ? [def.eventTime] : []);
    if (!stream) {
      this.usedColumns.set(def.name.toLowerCase(), used);
      const parse = rowParser(def, used);
      const et = def.eventTime;
      stream = this.job.source<Row>({
        name: def.name,
        shards: def.shards ?? 1,
        format: def.format === 'csv' ? 'text' : 'json',
        ...(def.stream ? { streamName: def.stream } : {}),
        parse: et
          ? (raw) => {
              const row = parse(raw);
              if (typeof row[et] !== 'number') throw new Error(`table ${def.name}: event-time column ${et} is NULL`);
              return row;
            }
          : parse,
        ...(et
          ? {
              timestamp: (r: Row) => r[et] as number,
              // bounded input read in parallel is out of order: unless told otherwise, hold the watermark until the end of input
              watermarks:
                def.connector === 's3' && def.watermarkDelayMs === undefined
                  ? HOLD_UNTIL_END
                  : WatermarkStrategies.boundedOutOfOrderness(def.watermarkDelayMs ?? 0, def.idleTimeoutMs !== undefined ? { idleTimeoutMs: def.idleTimeoutMs } : {}),
            }
          : {}),
      });
      this.sources.set(def.name.toLowerCase(), stream);
      if (def.connector === 's3') {
        this.bounded.push({ table: def.name, source: def.name, bucket: def.bucket, prefix: def.prefix ?? '', format: def.format ?? 'json', header: def.header ?? false });
      }
    }
    const q = alias ?? def.name;
    const cols: ScopeColumn[] = def.columns.map((c) => ({ qualifier: q, name: c.name, type: c.type, get: (r: Row) => r[c.name], id: `${q}.${c.name}`, use: () => used.add(c.name) }));
    return {
      stream,
      scope: new Scope(cols),
      rowtime: def.eventTime ? cols.find((c) => c.name === def.eventTime) : undefined,
      shards: def.shards ?? 1,
      label: q,
    };
  }

  // ------------------------------------------------------------------ queries

  private insert(node: AstNode): void {
    const name: string = node.table?.[0]?.table;
    const def = this.tables.get(String(name).toLowerCase());
    if (!def) throw this.ctx.error(node, `unknown sink table "${name}": declare it with CREATE TABLE ${name} (…) WITH ('connector' = …)`, 'SQL_UNKNOWN_TABLE', name);
    const select = node.values?.type === 'select' ? node.values : node.values?.ast;
    if (!select) throw this.ctx.error(node, 'INSERT INTO needs a SELECT (INSERT … VALUES is not supported)', 'SQL_UNSUPPORTED', 'VALUES');
    if (node.columns?.length) throw this.ctx.error(node, 'INSERT INTO t (columns…) is not supported: select the columns in the sink\'s order', 'SQL_UNSUPPORTED', name);
    const out = this.query(select);
    this.attachSink(def, out, name);
  }

  private selectToResult(node: AstNode): void {
    const out = this.query(node);
    const name = this.resultCount++ === 0 ? 'result' : `result_${this.resultCount}`;
    const def: TableDef = {
      name,
      columns: [],
      connector: out.updating ? 'dynamodb' : 'collect',
      ...(out.updating && out.keyColumns ? { primaryKey: out.keyColumns } : {}),
    };
    this.attachSink(def, out, name);
  }

  private attachSink(def: TableDef, out: QueryOutput, token: string): void {
    const c = this.ctx;
    if (def.connector === 'kinesis' && this.sources.has(def.name.toLowerCase())) throw c.error(undefined, `table ${def.name} is read by a query; it cannot also be written`, 'SQL_INVALID', token);
    // rename by position to the sink's declared columns
    let rename: ((r: Row) => Row) | undefined;
    let names = out.columns.map((x) => x.name);
    if (def.columns.length) {
      if (def.columns.length !== out.columns.length) {
        throw c.error(undefined, `the query produces ${out.columns.length} columns (${names.join(', ')}) but sink ${def.name} declares ${def.columns.length} (${def.columns.map((x) => x.name).join(', ')}); columns go to the sink by position`, 'SQL_INVALID', token);
      }
      const from = names;
      const to = def.columns.map((x) => x.name);
      if (from.some((n, i) => n !== to[i])) rename = (r) => Object.fromEntries(to.map((n, i) => [n, r[from[i]!] ?? null]));
      names = to;
    }
    const rowOf = out.updating ? (x: Row) => (x as Change).v : (x: Row) => x;
    if (out.updating) out = { ...out, stream: out.stream.filter((x: Change) => x.v !== null, { name: 'upserts' }) };
    const shaped = rename ? (x: Row) => rename!(rowOf(x)) : rowOf;
    switch (def.connector) {
      case 'dynamodb': {
        const pk = def.primaryKey;
        let key: (x: Row) => string;
        if (pk?.length) {
          const cols = pk.map((k) => names.find((n) => n.toLowerCase() === k.toLowerCase()));
          const missing = pk.filter((_, i) => !cols[i]);
          if (missing.length) throw c.error(undefined, `sink ${def.name}: PRIMARY KEY column ${missing.join(', ')} is not among the query's columns (${names.join(', ')})`, 'SQL_INVALID', token);
          key = (x) => cols.map((n) => String(shaped(x)[n!])).join('|');
        } else if (out.updating) {
          key = (x) => (x as { k: string }).k;
        } else {
          throw c.error(undefined, `sink ${def.name}: a DynamoDB sink needs PRIMARY KEY (columns) for an append-only query (rows are upserted by key)`, 'SQL_INVALID', token);
        }
        out.stream.sinkTo(dynamoUpsertSink<Row>({ name: def.name, key, item: (x) => shaped(x), ...(def.table ? { tableName: def.table } : {}) }));
        break;
      }
      case 'collect':
      case 's3':
      case 'kinesis': {
        if (out.updating) {
          throw c.error(
            undefined,
            `sink ${def.name} (connector '${def.connector}') takes append-only rows, but this query's result is updating (a GROUP BY without a window): write it to a connector = 'dynamodb' sink, which upserts by key, or group by a window`,
            'SQL_INVALID',
            token,
          );
        }
        const stream = rename ? out.stream.map(rename, { name: `to ${def.name}` }) : out.stream;
        const sink =
          def.connector === 'collect'
            ? collectSink<Row>(def.name)
            : def.connector === 's3'
              ? s3FileSink<Row>({ name: def.name, ...(def.prefix ? { prefix: def.prefix } : {}) })
              : kinesisSink<Row>({ name: def.name, ...(def.stream ? { streamName: def.stream } : {}) });
        stream.sinkTo(sink);
        break;
      }
    }
    this.sinks.push({ name: def.name, connector: def.connector, updating: out.updating, columns: names });
  }

  /** Compiles a SELECT into an output stream. */
  query(node: AstNode): QueryOutput {
    const c = this.ctx;
    if (node._next || node.set_op) throw c.error(node, `${String(node.set_op ?? 'UNION').toUpperCase()} is not supported: write one INSERT INTO per query into the same sink table? (not yet) — use one query per sink`, 'SQL_UNSUPPORTED', 'UNION');
    if (node.with) throw c.error(node, 'WITH (common table expressions) is not supported: use a subquery in FROM', 'SQL_UNSUPPORTED', 'WITH');
    if (node.distinct) throw c.error(node, 'SELECT DISTINCT is not supported: GROUP BY the columns instead', 'SQL_UNSUPPORTED', 'DISTINCT');
    if (node.orderby) throw c.error(node, 'ORDER BY is not supported on a stream (results arrive as windows close or keys update): sort when reading the sink', 'SQL_UNSUPPORTED', 'ORDER');
    if (node.limit?.value?.length) throw c.error(node, 'LIMIT is not supported on a stream', 'SQL_UNSUPPORTED', 'LIMIT');
    if (!node.from?.length) throw c.error(node, 'a query needs FROM <table>', 'SQL_INVALID', 'SELECT');

    const { relation: input, residual: where } = this.from(node.from, node.where);
    if (where && containsAggregate(where)) throw c.error(where, 'aggregates are not allowed in WHERE: use HAVING', 'SQL_INVALID', 'WHERE');
    const cond = where ? { node: where, fn: compileExpr(where, input.scope, c).fn } : undefined;
    const grouped = !!node.groupby?.columns?.length || containsAggregate(node.columns) || !!node.having;
    // a grouped query filters its input itself: when it reuses an aggregate planned before, it filters nothing
    if (grouped) return compileGroupedQuery(node, input, cond, c, this.options.parallelism, this.subPlans);
    return compileProjection(node, cond ? { ...input, stream: whereRows(input, cond.fn) } : input, c);
  }

  /** FROM (and the WHERE conjuncts a join consumes): a table, a subquery, or a join of two. */
  private from(items: AstNode[], where: AstNode): { relation: Relation; residual: AstNode } {
    const c = this.ctx;
    if (items.length === 1) {
      const it = items[0];
      if (it.join) throw c.error(it, 'a join needs two tables', 'SQL_INVALID', 'JOIN');
      return { relation: this.fromItem(it), residual: where };
    }
    if (items.length > 2) throw c.error(items[2], 'joins of more than two inputs are not supported: join two, in a subquery, then join its result', 'SQL_UNSUPPORTED', items[2]?.table ?? items[2]?.as);
    const [a, b] = items;
    if (b.join && !/^(INNER )?JOIN$/i.test(b.join)) throw c.error(b, `${b.join} is not supported (only inner joins)`, 'SQL_UNSUPPORTED', b.join.split(' ')[0]);
    const left = this.fromItem(a);
    const right = this.fromItem(b);
    const cond = b.on ? (where ? { type: 'binary_expr', operator: 'AND', left: b.on, right: where } : b.on) : where;
    return compileJoin(c, left, right, cond, this.options.parallelism);
  }

  private fromItem(it: AstNode): Relation {
    const c = this.ctx;
    if (it.expr?.ast) {
      const inner = this.query(it.expr.ast);
      const q = it.as ?? undefined;
      return outputAsRelation(inner, q);
    }
    if (it.expr?.type === 'tumble' || it.expr?.type === 'hop' || it.expr?.type === 'cumulate' || it.expr) {
      throw c.error(
        it,
        'window table functions (FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), …))) are not supported: group by a window instead, e.g. GROUP BY k, TUMBLE(ts, INTERVAL \'10\' SECOND), and select TUMBLE_START/TUMBLE_END',
        'SQL_UNSUPPORTED',
        'TABLE',
      );
    }
    return this.sourceRelation(it, it.table, it.as ?? undefined);
  }
}

export type { SqlCompiler };
