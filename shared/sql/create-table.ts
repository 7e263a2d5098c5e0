/**
 * CREATE TABLE: a table's columns, PRIMARY KEY and WITH options become a TableDef (the same shape a
 * catalog declared in TypeScript gives). Every option is checked here, at plan time, so a bad
 * connector, format, path or event-time column is reported at its place in the statement.
 */
import { sqlTypeOf, SUPPORTED_TYPES, type ColumnDef, type Connector, type TableDef } from './catalog.js';
import type { CompileContext } from './context.js';
import { columnName, stringValue, type AstNode } from './expressions.js';

/** The table a CREATE TABLE statement declares; `tables` are those declared before it (by lower-case name). */
export function tableDefinition(node: AstNode, ctx: CompileContext, tables: ReadonlyMap<string, TableDef>): TableDef {
  if (node.keyword !== 'table') throw ctx.error(node, `CREATE ${String(node.keyword).toUpperCase()} is not supported (only CREATE TABLE)`, 'SQL_UNSUPPORTED', 'CREATE');
  const name: string = node.table?.[0]?.table;
  if (node.query_expr || node.as) throw ctx.error(node, 'CREATE TABLE … AS SELECT is not supported: declare the table, then INSERT INTO it', 'SQL_UNSUPPORTED', name);
  if (tables.has(name.toLowerCase())) throw ctx.error(node, `table "${name}" is declared twice`, 'SQL_INVALID', name);
  const columns: ColumnDef[] = [];
  let primaryKey: string[] | undefined;
  for (const def of node.create_definitions ?? []) {
    if (def.resource === 'column') {
      const col = columnName(def.column);
      const declared = String(def.definition?.dataType ?? '');
      const type = sqlTypeOf(declared);
      if (!type) throw ctx.error(def.column, `column ${col}: unsupported type ${declared} (supported: ${SUPPORTED_TYPES.join(', ')})`, 'SQL_UNSUPPORTED', declared);
      if (columns.some((c) => c.name.toLowerCase() === col.toLowerCase())) throw ctx.error(def.column, `column ${col} is declared twice`, 'SQL_INVALID', col);
      columns.push({ name: col, type });
    } else if (def.resource === 'constraint' && /^primary ?key$/i.test(String(def.constraint_type))) {
      primaryKey = (def.definition ?? []).map((c: AstNode) => columnName(c));
    } else {
      throw ctx.error(def, `unsupported table element ${String(def.resource)} (columns and PRIMARY KEY (...) are)`, 'SQL_UNSUPPORTED', name);
    }
  }
  const opts = new Map<string, string>();
  for (const o of node.with ?? []) {
    const key = String(o.keyword?.value ?? o.keyword).toLowerCase().replace(/[.-]/g, '_');
    opts.set(key, o.value?.type === 'number' ? String(o.value.value) : stringValue(o.value ?? { value: '' }));
  }
  const known = ['connector', 'format', 'shards', 'stream', 'event_time', 'watermark_delay_ms', 'idle_timeout_ms', 'bucket', 'prefix', 'path', 'header', 'table', 'primary_key', 'parallelism'];
  for (const k of opts.keys()) {
    if (!known.includes(k)) throw ctx.error(node, `table ${name}: unknown option '${k}' (options: ${known.join(', ')})`, 'SQL_INVALID', `'${k}'`);
  }
  const connector = (opts.get('connector') ?? '').toLowerCase();
  if (!['kinesis', 's3', 'dynamodb', 'collect'].includes(connector)) {
    throw ctx.error(node, `table ${name}: 'connector' must be 'kinesis', 's3', 'dynamodb' or 'collect', got ${connector ? `'${connector}'` : 'none'}`, 'SQL_INVALID', opts.has('connector') ? "'connector'" : name);
  }
  const int = (k: string): number | undefined => {
    const v = opts.get(k);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw ctx.error(node, `table ${name}: '${k}' must be a non-negative integer, got '${v}'`, 'SQL_INVALID', `'${k}'`);
    return n;
  };
  const format = (opts.get('format') ?? 'json').toLowerCase();
  if (format !== 'json' && format !== 'csv') throw ctx.error(node, `table ${name}: 'format' must be 'json' or 'csv', got '${format}'`, 'SQL_INVALID', "'format'");
  let bucket = opts.get('bucket');
  let prefix = opts.get('prefix');
  const path = opts.get('path');
  if (path) {
    const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(path);
    if (!m) throw ctx.error(node, `table ${name}: 'path' must look like s3://bucket/prefix, got '${path}'`, 'SQL_INVALID', "'path'");
    bucket = m[1];
    prefix = m[2];
  }
  const eventTime = opts.get('event_time');
  if (eventTime !== undefined) {
    const col = columns.find((c) => c.name.toLowerCase() === eventTime.toLowerCase());
    if (!col) throw ctx.error(node, `table ${name}: event_time names column '${eventTime}', which is not declared (columns: ${columns.map((c) => c.name).join(', ')})`, 'SQL_UNKNOWN_COLUMN', "'event_time'");
    if (col.type !== 'TIMESTAMP' && col.type !== 'BIGINT') throw ctx.error(node, `table ${name}: the event_time column ${col.name} must be TIMESTAMP or BIGINT (ms since the epoch), not ${col.type}`, 'SQL_INVALID', "'event_time'");
  }
  if (opts.has('primary_key')) primaryKey = opts.get('primary_key')!.split(',').map((s) => s.trim()).filter(Boolean);
  for (const k of primaryKey ?? []) {
    if (columns.length && !columns.some((c) => c.name.toLowerCase() === k.toLowerCase())) {
      throw ctx.error(node, `table ${name}: PRIMARY KEY names column ${k}, which is not declared`, 'SQL_UNKNOWN_COLUMN', k);
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
  return def;
}
