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
 * - subqueries in FROM over any of these (append-only ones), so window results can be windowed again.
 */
import * as flinksql from 'node-sql-parser/build/flinksql.js';
import type { DataStream, Job, JobOptions } from '../api/job.js';
import { job as newJob, WatermarkStrategies } from '../api/job.js';
import { collectSink, dynamoUpsertSink, kinesisSink, s3FileSink } from '../api/sinks.js';
import { valueState } from '../api/state.js';
import type { KeyedProcessFunction } from '../api/types.js';
import { EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows, type WindowAssigner } from '../api/windows.js';
import { HOLD_UNTIL_END } from '../bounded/bounded-reader.js';
import { AGGREGATES, multiAggregate, resultType, retractingAggregate, type AggKind, type AggSlot } from './aggregates.js';
import { rowParser, sqlTypeOf, SUPPORTED_TYPES, type Catalog, type ColumnDef, type Connector, type TableDef } from './catalog.js';
import { CompileContext } from './context.js';
import { SqlError } from './errors.js';
import {
  canonical,
  columnName,
  compileExpr,
  functionArgs,
  functionName,
  intervalMs,
  Scope,
  stringValue,
  WINDOW_FUNCTIONS,
  WINDOW_PROPERTIES,
  type AstNode,
  type Compiled,
  type ExprType,
  type Row,
  type ScopeColumn,
} from './expressions.js';
import { compileJoin } from './joins.js';
import type { Relation } from './relation.js';
import { SourceText } from './source-text.js';

// the Flink SQL grammar alone (a fraction of the package's size). It is CommonJS: Node hands it over
// as the default export; a static import so that bundlers (esbuild in CDK) ship it.
type ParserModule = { Parser: new () => { astify(sql: string, opt: object): AstNode } };
const flinkSqlModule = flinksql as unknown as ParserModule & { default?: ParserModule };
const { Parser } = flinkSqlModule.default ?? flinkSqlModule;

const RESERVED =
  /^(out|at|in|key|value|values|table|window|range|rows|row|timestamp|time|date|user|order|group|current|year|month|day|hour|minute|second|interval|position|end|start|result|system|language|level|all|any|both|case|cast|check|column|default|desc|asc|from|full|function|global|grant|having|inner|left|right|like|limit|local|match|new|no|none|not|null|of|offset|old|on|only|open|outer|over|partition|primary|references|returns|select|set|some|sql|then|to|trim|union|unique|update|using|when|where|with|within|without)$/i;

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

/** What a SELECT produces: rows as objects keyed by output column name. */
interface QueryOutput {
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
  private readonly sinks: Array<{ name: string; connector: Connector; updating: boolean; columns: string[] }> = [];
  private readonly bounded: BoundedSourceSpec[] = [];
  private readonly job: Job;
  private resultCount = 0;
  private ctx!: CompileContext;

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
      const ast = this.parse(st.text, st.offset);
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

  private parse(text: string, offset: number): AstNode {
    try {
      return new Parser().astify(text, { database: 'flinksql', parseOptions: { includeLocations: true } });
    } catch (err) {
      const e = err as { location?: { start?: { offset: number } }; found?: string | null; expected?: Array<{ type: string; text?: string; description?: string }>; message?: string };
      if (!e.location?.start) throw new SqlError(this.source.origin, this.source.position(offset).line, 1, `cannot parse: ${e.message ?? String(err)}`, 'SQL_SYNTAX');
      let local = e.location.start.offset;
      const ident = /[A-Za-z0-9_]/;
      // point at the whole word the parser stopped in (or right after): "out" rather than its "t"
      if (local > 0 && !ident.test(text[local] ?? '') && ident.test(text[local - 1] ?? '')) local--;
      while (local > 0 && ident.test(text[local] ?? '') && ident.test(text[local - 1]!)) local--;
      const rest = text.slice(local);
      const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest)?.[0];
      const atEnd = e.found == null || text.slice(local).trim() === '';
      const at = atEnd ? offset + text.trimEnd().length : offset + local;
      const found = atEnd ? 'the end of the statement' : word ? `"${word}"` : `"${e.found}"`;
      const expected = [...new Set((e.expected ?? []).filter((x) => x.type === 'literal' && x.text && /^[A-Z,()=;*]/.test(x.text)).map((x) => x.text!))].slice(0, 8);
      let hint = expected.length ? ` (expected ${expected.join(', ')}${(e.expected?.length ?? 0) > expected.length ? ', …' : ''})` : '';
      if (word && RESERVED.test(word)) hint += `; "${word}" is a reserved word: write it in backquotes (\`${word}\`) to use it as a name`;
      throw this.source.error(at, `syntax error at ${found}${hint}`, 'SQL_SYNTAX');
    }
  }

  // ------------------------------------------------------------------ DDL

  private createTable(node: AstNode): void {
    if (node.keyword !== 'table') throw this.ctx.error(node, `CREATE ${String(node.keyword).toUpperCase()} is not supported (only CREATE TABLE)`, 'SQL_UNSUPPORTED', 'CREATE');
    const name: string = node.table?.[0]?.table;
    if (node.query_expr || node.as) throw this.ctx.error(node, 'CREATE TABLE … AS SELECT is not supported: declare the table, then INSERT INTO it', 'SQL_UNSUPPORTED', name);
    if (this.tables.has(name.toLowerCase())) throw this.ctx.error(node, `table "${name}" is declared twice`, 'SQL_INVALID', name);
    const columns: ColumnDef[] = [];
    let primaryKey: string[] | undefined;
    for (const def of node.create_definitions ?? []) {
      if (def.resource === 'column') {
        const col = columnName(def.column);
        const declared = String(def.definition?.dataType ?? '');
        const type = sqlTypeOf(declared);
        if (!type) throw this.ctx.error(def.column, `column ${col}: unsupported type ${declared} (supported: ${SUPPORTED_TYPES.join(', ')})`, 'SQL_UNSUPPORTED', declared);
        if (columns.some((c) => c.name.toLowerCase() === col.toLowerCase())) throw this.ctx.error(def.column, `column ${col} is declared twice`, 'SQL_INVALID', col);
        columns.push({ name: col, type });
      } else if (def.resource === 'constraint' && /^primary ?key$/i.test(String(def.constraint_type))) {
        primaryKey = (def.definition ?? []).map((c: AstNode) => columnName(c));
      } else {
        throw this.ctx.error(def, `unsupported table element ${String(def.resource)} (columns and PRIMARY KEY (...) are)`, 'SQL_UNSUPPORTED', name);
      }
    }
    const opts = new Map<string, string>();
    for (const o of node.with ?? []) {
      const key = String(o.keyword?.value ?? o.keyword).toLowerCase().replace(/[.-]/g, '_');
      opts.set(key, o.value?.type === 'number' ? String(o.value.value) : stringValue(o.value ?? { value: '' }));
    }
    const known = ['connector', 'format', 'shards', 'stream', 'event_time', 'watermark_delay_ms', 'idle_timeout_ms', 'bucket', 'prefix', 'path', 'header', 'table', 'primary_key', 'parallelism'];
    for (const k of opts.keys()) {
      if (!known.includes(k)) throw this.ctx.error(node, `table ${name}: unknown option '${k}' (options: ${known.join(', ')})`, 'SQL_INVALID', `'${k}'`);
    }
    const connector = (opts.get('connector') ?? '').toLowerCase();
    if (!['kinesis', 's3', 'dynamodb', 'collect'].includes(connector)) {
      throw this.ctx.error(node, `table ${name}: 'connector' must be 'kinesis', 's3', 'dynamodb' or 'collect', got ${connector ? `'${connector}'` : 'none'}`, 'SQL_INVALID', opts.has('connector') ? "'connector'" : name);
    }
    const int = (k: string): number | undefined => {
      const v = opts.get(k);
      if (v === undefined) return undefined;
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) throw this.ctx.error(node, `table ${name}: '${k}' must be a non-negative integer, got '${v}'`, 'SQL_INVALID', `'${k}'`);
      return n;
    };
    const format = (opts.get('format') ?? 'json').toLowerCase();
    if (format !== 'json' && format !== 'csv') throw this.ctx.error(node, `table ${name}: 'format' must be 'json' or 'csv', got '${format}'`, 'SQL_INVALID', "'format'");
    let bucket = opts.get('bucket');
    let prefix = opts.get('prefix');
    const path = opts.get('path');
    if (path) {
      const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(path);
      if (!m) throw this.ctx.error(node, `table ${name}: 'path' must look like s3://bucket/prefix, got '${path}'`, 'SQL_INVALID', "'path'");
      bucket = m[1];
      prefix = m[2];
    }
    const eventTime = opts.get('event_time');
    if (eventTime !== undefined) {
      const col = columns.find((c) => c.name.toLowerCase() === eventTime.toLowerCase());
      if (!col) throw this.ctx.error(node, `table ${name}: event_time names column '${eventTime}', which is not declared (columns: ${columns.map((c) => c.name).join(', ')})`, 'SQL_UNKNOWN_COLUMN', "'event_time'");
      if (col.type !== 'TIMESTAMP' && col.type !== 'BIGINT') throw this.ctx.error(node, `table ${name}: the event_time column ${col.name} must be TIMESTAMP or BIGINT (ms since the epoch), not ${col.type}`, 'SQL_INVALID', "'event_time'");
    }
    if (opts.has('primary_key')) primaryKey = opts.get('primary_key')!.split(',').map((s) => s.trim()).filter(Boolean);
    for (const k of primaryKey ?? []) {
      if (columns.length && !columns.some((c) => c.name.toLowerCase() === k.toLowerCase())) {
        throw this.ctx.error(node, `table ${name}: PRIMARY KEY names column ${k}, which is not declared`, 'SQL_UNKNOWN_COLUMN', k);
      }
    }
    const def: TableDef = {
      name,
      columns,
      connector: connector as Connector,
      format,
      ...(int('shards') !== undefined ? { shards: int('shards') } : {}),
      ...(opts.has('stream') ? { stream: opts.get('stream') } : {}),
      ...(eventTime !== undefined ? { eventTime: columns.find((c) => c.name.toLowerCase() === eventTime.toLowerCase())!.name } : {}),
      ...(int('watermark_delay_ms') !== undefined ? { watermarkDelayMs: int('watermark_delay_ms') } : {}),
      ...(int('idle_timeout_ms') !== undefined ? { idleTimeoutMs: int('idle_timeout_ms') } : {}),
      ...(bucket !== undefined ? { bucket } : {}),
      ...(prefix !== undefined ? { prefix } : {}),
      ...(opts.has('header') ? { header: opts.get('header') === 'true' } : {}),
      ...(primaryKey ? { primaryKey } : {}),
      ...(opts.has('table') ? { table: opts.get('table') } : {}),
      ...(int('parallelism') !== undefined ? { parallelism: int('parallelism') } : {}),
    };
    this.tables.set(name.toLowerCase(), def);
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
    if (!stream) {
      const parse = rowParser(def);
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
    const cols: ScopeColumn[] = def.columns.map((c) => ({ qualifier: q, name: c.name, type: c.type, get: (r: Row) => r[c.name], id: `${q}.${c.name}` }));
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

    const { relation: input, residual } = this.from(node.from, node.where);
    let rel = input;
    const where = residual;
    if (where) {
      if (containsAggregate(where)) throw c.error(where, 'aggregates are not allowed in WHERE: use HAVING', 'SQL_INVALID', 'WHERE');
      const cond = compileExpr(where, rel.scope, c);
      const f = cond.fn;
      rel = {
        ...rel,
        stream: rel.updating
          ? rel.stream.flatMap((u: Change) => onChange(u, (r) => (f(r) === true ? r : null)), { name: 'where' })
          : rel.stream.filter((r) => f(r) === true, { name: 'where' }),
      };
    }
    const grouped = !!node.groupby?.columns?.length || containsAggregate(node.columns) || !!node.having;
    return grouped ? this.aggregate(node, rel) : this.project(node, rel);
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

  // ------------------------------------------------------------------ projection

  private selectItems(node: AstNode, scope: Scope): Array<{ expr: AstNode; as: string | undefined } | { star: ScopeColumn[] }> {
    const out: Array<{ expr: AstNode; as: string | undefined } | { star: ScopeColumn[] }> = [];
    for (const item of node.columns === '*' ? [{ expr: { type: 'column_ref', table: null, column: '*' } }] : node.columns) {
      const e = item.expr;
      if (e?.type === 'column_ref' && columnName(e) === '*') {
        const q = e.table;
        const cols = q ? scope.columns.filter((x) => x.qualifier?.toLowerCase() === String(q).toLowerCase()) : [...scope.columns];
        if (q && !cols.length) throw this.ctx.error(e, `unknown table or alias "${q}" in ${q}.*`, 'SQL_UNKNOWN_TABLE', `${q}`);
        out.push({ star: cols });
      } else {
        out.push({ expr: e, as: item.as ?? undefined });
      }
    }
    return out;
  }

  private project(node: AstNode, rel: Relation): QueryOutput {
    const c = this.ctx;
    const fields: Array<{ name: string; fn: (r: Row) => unknown; type: ExprType; column?: ScopeColumn }> = [];
    let i = 0;
    for (const item of this.selectItems(node, rel.scope)) {
      if ('star' in item) {
        for (const col of item.star) fields.push({ name: col.name, fn: col.get, type: col.type, column: col });
      } else {
        if (item.expr?.type === 'function' && WINDOW_PROPERTIES.test(functionName(item.expr))) {
          throw c.error(item.expr, `${functionName(item.expr)}(...) needs GROUP BY ${functionName(item.expr).replace(/_.*$/, '')}(...)`, 'SQL_INVALID', functionName(item.expr));
        }
        const e = compileExpr(item.expr, rel.scope, c);
        fields.push({ name: item.as ?? e.name ?? `EXPR$${i}`, fn: e.fn, type: e.type, ...(e.column ? { column: e.column } : {}) });
      }
      i++;
    }
    this.checkNames(node, fields.map((f) => f.name));
    const names = fields.map((f) => f.name);
    const fns = fields.map((f) => f.fn);
    const select = (r: Row) => {
      const o: Record<string, unknown> = {};
      for (let j = 0; j < names.length; j++) o[names[j]!] = fns[j]!(r) ?? null;
      return o;
    };
    if (rel.updating) {
      // an updating input stays updating: both the new row and the one it replaces are projected
      const stream = rel.stream.flatMap((u: Change) => onChange(u, select), { name: 'select' });
      return { stream, columns: fields.map((f) => ({ name: f.name, type: f.type })), rowtime: undefined, shards: rel.shards, updating: true };
    }
    const stream = rel.stream.map(select, { name: 'select' });
    const rowtime = rel.rowtime ? fields.find((f) => f.column?.id === rel.rowtime!.id)?.name : undefined;
    return { stream, columns: fields.map((f) => ({ name: f.name, type: f.type })), rowtime, shards: rel.shards, updating: false };
  }

  private checkNames(node: AstNode, names: string[]): void {
    const seen = new Set<string>();
    for (const n of names) {
      if (seen.has(n.toLowerCase())) throw this.ctx.error(node, `two output columns are named "${n}": give one an alias (… AS other_name)`, 'SQL_INVALID', n);
      seen.add(n.toLowerCase());
    }
  }

  // ------------------------------------------------------------------ aggregation

  private aggregate(node: AstNode, rel: Relation): QueryOutput {
    const c = this.ctx;
    const scope = rel.scope;
    // GROUP BY: plain expressions and at most one window
    let window: { kind: string; node: AstNode; assigner: WindowAssigner; argsKey: string } | undefined;
    const groups: Array<{ key: string; compiled: Compiled; node: AstNode }> = [];
    for (const g of node.groupby?.columns ?? []) {
      const fname = g?.type === 'function' ? functionName(g) : '';
      if (WINDOW_FUNCTIONS.includes(fname)) {
        if (window) throw c.error(g, `GROUP BY has two windows (${window.kind} and ${fname}); group by one`, 'SQL_INVALID', fname);
        window = { kind: fname, node: g, assigner: this.windowAssigner(g, fname, rel), argsKey: canonical(functionArgs(g), scope) };
        continue;
      }
      if (g?.type === 'number') throw c.error(g, 'GROUP BY by position is not supported: name the column', 'SQL_UNSUPPORTED', String(g.value));
      if (containsAggregate(g)) throw c.error(g, 'aggregates are not allowed in GROUP BY', 'SQL_INVALID');
      groups.push({ key: canonical(g, scope), compiled: compileExpr(g, scope, c), node: g });
    }
    // aggregate calls of SELECT and HAVING, each computed once
    const slots: AggSlot[] = [];
    const slotKeys: string[] = [];
    const slotOf = (a: AstNode): number => {
      const k = canonical(a, scope);
      const known = slotKeys.indexOf(k);
      if (known >= 0) return known;
      const fname = String(a.name).toUpperCase();
      if (!AGGREGATES.includes(fname)) throw c.error(a, `unsupported aggregate ${fname} (supported: ${AGGREGATES.join(', ')}, COUNT(DISTINCT …))`, 'SQL_UNSUPPORTED', fname);
      const argNode = a.args?.expr;
      const distinct = /DISTINCT/i.test(String(a.args?.distinct ?? ''));
      if (distinct && fname !== 'COUNT') throw c.error(a, `${fname}(DISTINCT …) is not supported (COUNT(DISTINCT …) is)`, 'SQL_UNSUPPORTED', fname);
      const star = !argNode || argNode.type === 'star';
      if (star && fname !== 'COUNT') throw c.error(a, `${fname}(*) is not valid: name a column`, 'SQL_INVALID', fname);
      if (star && distinct) throw c.error(a, 'COUNT(DISTINCT *) is not valid: name a column', 'SQL_INVALID', fname);
      if (!star && containsAggregate(argNode)) throw c.error(a, 'aggregates cannot be nested: compute the inner one in a subquery', 'SQL_INVALID', fname);
      const arg = star ? undefined : compileExpr(argNode, scope, c);
      if (arg && (fname === 'SUM' || fname === 'AVG') && !['BIGINT', 'DOUBLE', 'ANY', 'NULL'].includes(arg.type)) {
        throw c.error(a, `${fname} needs a number, got ${arg.type}${arg.name ? ` (column ${arg.name})` : ''}`, 'SQL_INVALID', fname);
      }
      const kind: AggKind = distinct ? 'COUNT_DISTINCT' : (fname as AggKind);
      slots.push({ kind, arg: arg?.fn, type: arg?.type ?? 'BIGINT' });
      slotKeys.push(k);
      return slots.length - 1;
    };
    // post-aggregation rows: { g: group values, a: aggregate results, w: window bounds }
    const hook = (n: AstNode): Compiled | undefined => {
      if (!n || typeof n !== 'object' || Array.isArray(n)) return undefined;
      if (n.type === 'aggr_func') {
        const i = slotOf(n);
        return { fn: (r: Row) => r.a[i], type: resultType(slots[i]!) };
      }
      if (n.type === 'function') {
        const fname = functionName(n);
        const m = WINDOW_PROPERTIES.exec(fname);
        if (m) {
          if (!window) throw c.error(n, `${fname}(...) needs GROUP BY ${m[1]}(...)`, 'SQL_INVALID', fname);
          if (m[1] !== window.kind) throw c.error(n, `${fname}(...) does not match the GROUP BY window ${window.kind}(...): use ${window.kind}_${m[2]}`, 'SQL_INVALID', fname);
          if (canonical(functionArgs(n), scope) !== window.argsKey) throw c.error(n, `${fname}(...) must repeat the arguments of the GROUP BY's ${window.kind}(...)`, 'SQL_INVALID', fname);
          const part = m[2];
          return { fn: part === 'START' ? (r: Row) => r.w.start : part === 'END' ? (r: Row) => r.w.end : (r: Row) => r.w.end - 1, type: 'TIMESTAMP', name: `${m[1]!.toLowerCase()}_${part!.toLowerCase()}` };
        }
      }
      if (n.type === 'column_ref' || n.type === 'function' || n.type === 'binary_expr' || n.type === 'unary_expr' || n.type === 'cast' || n.type === 'case') {
        const k = canonical(n, scope);
        const gi = groups.findIndex((g) => g.key === k);
        if (gi >= 0) {
          const g = groups[gi]!;
          return { fn: (r: Row) => r.g[gi], type: g.compiled.type, ...(g.compiled.name ? { name: g.compiled.name } : {}), ...(g.compiled.column ? { column: g.compiled.column } : {}) };
        }
        if (n.type === 'column_ref' && columnName(n) !== '*') {
          const name = columnName(n);
          compileExpr(n, scope, c); // unknown or ambiguous columns fail first, with their own message
          throw c.error(n, `column "${n.table ? `${n.table}.` : ''}${name}" must appear in GROUP BY or be inside an aggregate (COUNT, SUM, MIN, MAX, AVG)`, 'SQL_INVALID', n.table ? `${n.table}.${name}` : name);
        }
      }
      return undefined;
    };
    const fields: Array<{ name: string; fn: (r: Row) => unknown; type: ExprType; rowtime: boolean; group?: number }> = [];
    let i = 0;
    for (const item of this.selectItems(node, scope)) {
      if ('star' in item) throw c.error(node, 'SELECT * is not allowed in a grouped query: list the grouped columns and aggregates', 'SQL_INVALID', '*');
      const e = compileExpr(item.expr, scope, c, hook);
      const isRowtime = item.expr?.type === 'function' && /_ROWTIME$/.test(functionName(item.expr));
      const gi = groups.findIndex((g) => g.key === canonical(item.expr, scope));
      fields.push({ name: item.as ?? e.name ?? `EXPR$${i}`, fn: e.fn, type: e.type, rowtime: isRowtime, ...(gi >= 0 ? { group: gi } : {}) });
      i++;
    }
    this.checkNames(node, fields.map((f) => f.name));
    const having = node.having ? compileExpr(node.having, scope, c, hook) : undefined;

    const groupFns = groups.map((g) => g.compiled.fn);
    const keyOf = (r: Row) => JSON.stringify(groupFns.map((f) => f(r) ?? null));
    const parallelism = groups.length === 0 ? 1 : (this.options.parallelism ?? rel.shards);
    const retracting = rel.updating === true;
    if (retracting && window) throw c.error(window.node, `${rel.label} is an updating result (a GROUP BY without a window): it has no event time to window by`, 'SQL_UNSUPPORTED', window.kind);
    // over an updating input, every change becomes a retraction of the replaced row and an addition of the new one
    const keyed = retracting
      ? rel.stream
          .flatMap((u: Change) => [...(u.old ? [{ r: -1, row: u.old }] : []), ...(u.v ? [{ r: 1, row: u.v }] : [])], { name: 'retract' })
          .keyBy((m: { row: Row }) => keyOf(m.row), { parallelism })
      : rel.stream.keyBy(keyOf, { parallelism });
    const agg = retracting ? retractingAggregate(slots) : multiAggregate(slots);
    const names = fields.map((f) => f.name);
    const fns = fields.map((f) => f.fn);
    const toRow = (post: Row) => {
      const o: Record<string, unknown> = {};
      for (let j = 0; j < names.length; j++) o[names[j]!] = fns[j]!(post) ?? null;
      return o;
    };
    const havingFn = having?.fn;
    const label = window ? `${window.kind.toLowerCase()} window` : 'group';
    if (window) {
      let post = keyed.window(window.assigner).aggregate(agg, {
        name: `${label} aggregate`,
        result: (key, w, values) => ({ g: JSON.parse(String(key)) as unknown[], a: values, w: { start: w.start, end: w.end } }),
      });
      if (havingFn) post = post.filter((r) => havingFn(r) === true, { name: 'having' });
      const stream = post.map(toRow, { name: 'select' });
      const rowtime = fields.find((f) => f.rowtime)?.name;
      return { stream, columns: fields.map((f) => ({ name: f.name, type: f.type })), rowtime, shards: parallelism, updating: false };
    }
    // non-windowed: an updating result, one row per group, re-emitted after every input
    const accState = valueState<unknown[]>('acc');
    const fn: KeyedProcessFunction<string, Row, Row> = {
      state: [accState],
      processElement(row, ctx, out) {
        const s = ctx.getState(accState);
        const before = s.value();
        const acc = agg.add(row, before ?? agg.createAccumulator());
        s.update(acc);
        const g = JSON.parse(ctx.key) as unknown[];
        const rowOf = (a: unknown[] | undefined): Row | null => {
          if (!a || (retracting && agg.isEmpty(a))) return null; // a group whose every row was retracted is gone
          const post = { g, a: agg.getResult(a), w: null };
          return havingFn && havingFn(post) !== true ? null : toRow(post);
        };
        const v = rowOf(acc);
        const old = rowOf(before);
        if (JSON.stringify(v) === JSON.stringify(old)) return; // nothing visible changed
        const change: Change = { k: ctx.key, v, old };
        out.collect(change);
      },
    };
    const stream = keyed.process(fn, { name: `${label} aggregate` });
    // the key columns, when every GROUP BY expression is selected
    const keyColumns = groups.map((_, gi) => fields.find((f) => f.group === gi)?.name);
    return {
      stream,
      columns: fields.map((f) => ({ name: f.name, type: f.type })),
      rowtime: undefined,
      shards: parallelism,
      updating: true,
      ...(keyColumns.length && keyColumns.every((k) => k !== undefined) ? { keyColumns: keyColumns as string[] } : {}),
    };
  }

  private windowAssigner(g: AstNode, kind: string, rel: Relation): WindowAssigner {
    const c = this.ctx;
    const args = functionArgs(g);
    const want = kind === 'HOP' ? 3 : 2;
    const usage = kind === 'TUMBLE' ? 'TUMBLE(time_col, size)' : kind === 'HOP' ? 'HOP(time_col, slide, size)' : 'SESSION(time_col, gap)';
    if (args.length !== want) throw c.error(g, `${kind} takes ${want} arguments: ${usage}`, 'SQL_INVALID', kind);
    const time = compileExpr(args[0], rel.scope, c);
    if (!rel.rowtime) {
      throw c.error(g, `${rel.label} has no event time: declare its event-time column with 'event_time' = '<column>' in CREATE TABLE … WITH (…)${rel.label ? '' : ''}, or select a *_ROWTIME(...) column in the subquery`, 'SQL_INVALID', kind);
    }
    if (!time.column || time.column.id !== rel.rowtime.id) {
      throw c.error(args[0], `${kind} needs the event-time column of ${rel.label} (${rel.rowtime.name}), got ${time.name ?? 'an expression'}`, 'SQL_INVALID', time.name ?? kind);
    }
    const ms = args.slice(1).map((a: AstNode) => {
      const v = intervalMs(a, c);
      if (v === undefined || !Number.isInteger(v) || v <= 0) throw c.error(a, `${kind}: ${usage} needs positive INTERVAL literals, e.g. INTERVAL '10' SECOND`, 'SQL_INVALID', kind);
      return v;
    });
    if (kind === 'TUMBLE') return TumblingEventTimeWindows.of(ms[0]!);
    if (kind === 'HOP') return SlidingEventTimeWindows.of(ms[1]!, ms[0]!);
    return EventTimeSessionWindows.withGap(ms[0]!);
  }
}

let relationIds = 0;

/**
 * One change of an updating result: the row of key `k` is now `v` (null: it no longer exists, or no
 * longer passes HAVING/WHERE) and replaces `old` (null: it is new).
 */
interface Change {
  readonly k: string;
  readonly v: Row | null;
  readonly old: Row | null;
}

/** Applies `f` to both rows of a change (null: the row drops out); emits nothing when neither remains. */
function onChange(u: Change, f: (r: Row) => Row | null): Change[] {
  const v = u.v === null ? null : f(u.v);
  const old = u.old === null ? null : f(u.old);
  return v === null && old === null ? [] : [{ k: u.k, v, old }];
}

/** A SELECT's output seen as a table (a subquery in FROM). */
function outputAsRelation(out: QueryOutput, alias: string | undefined): Relation {
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

function containsAggregate(n: AstNode): boolean {
  if (!n || typeof n !== 'object') return false;
  if (Array.isArray(n)) return n.some(containsAggregate);
  if (n.type === 'aggr_func') return true;
  if (n.ast) return false; // a subquery has its own aggregates
  return Object.values(n).some(containsAggregate);
}

export type { SqlCompiler };
