/**
 * Tables a SQL job reads and writes: declared with `CREATE TABLE … WITH (…)` in the SQL text, or
 * given as a TypeScript catalog (the same shape). A table is a connector plus columns; whether it is
 * a source or a sink follows from where a query uses it.
 */

/** The value types rows carry. TIMESTAMP values are ms since the epoch (numbers). */
export type SqlType = 'BIGINT' | 'DOUBLE' | 'VARCHAR' | 'BOOLEAN' | 'TIMESTAMP';

export interface ColumnDef {
  readonly name: string;
  readonly type: SqlType;
}

export type Connector = 'kinesis' | 's3' | 'dynamodb' | 'collect';

export interface TableDef {
  readonly name: string;
  readonly columns: readonly ColumnDef[];
  /**
   * kinesis: a stream fed by producers (source), or an output stream (sink);
   * s3: bounded input read from objects under a prefix (source), or JSON-lines files (sink);
   * dynamodb: an upsert table (sink); collect: in-process results (sink, tests and local runs).
   */
  readonly connector: Connector;
  /** how records are encoded: one JSON object per record/line, or CSV in column order; @default 'json' */
  readonly format?: 'json' | 'csv';
  /** source: shards of the source stream; @default 1 */
  readonly shards?: number;
  /** kinesis: an existing stream instead of one the job creates */
  readonly stream?: string;
  /** source: the column holding event time (TIMESTAMP or BIGINT ms) */
  readonly eventTime?: string;
  /** source: how late records may be (bounded out-of-orderness); @default 0 */
  readonly watermarkDelayMs?: number;
  /** source: a shard silent this long (processing time) stops holding the watermark back */
  readonly idleTimeoutMs?: number;
  /** s3 source: the bucket (default: the job's) and key prefix of the objects */
  readonly bucket?: string;
  readonly prefix?: string;
  /** csv: the first line of each object is a header; @default false */
  readonly header?: boolean;
  /** dynamodb sink: the columns whose values form the row key */
  readonly primaryKey?: readonly string[];
  /** dynamodb sink: an existing table */
  readonly table?: string;
  /** parallelism of the stage that computes into this sink's key (grouped queries); @default the source's shards */
  readonly parallelism?: number;
}

/** A TypeScript catalog: table name → definition (the name field may be left out). */
export type Catalog = Record<string, Omit<TableDef, 'name'> & { name?: string }>;

const TYPE_ALIASES: Record<string, SqlType> = {
  BIGINT: 'BIGINT',
  INT: 'BIGINT',
  INTEGER: 'BIGINT',
  SMALLINT: 'BIGINT',
  TINYINT: 'BIGINT',
  DOUBLE: 'DOUBLE',
  FLOAT: 'DOUBLE',
  REAL: 'DOUBLE',
  DECIMAL: 'DOUBLE',
  NUMERIC: 'DOUBLE',
  VARCHAR: 'VARCHAR',
  STRING: 'VARCHAR',
  CHAR: 'VARCHAR',
  TEXT: 'VARCHAR',
  BOOLEAN: 'BOOLEAN',
  BOOL: 'BOOLEAN',
  TIMESTAMP: 'TIMESTAMP',
  TIMESTAMP_LTZ: 'TIMESTAMP',
  DATETIME: 'TIMESTAMP',
};

/** The SQL type a declared type name stands for, or undefined. */
export function sqlTypeOf(declared: string): SqlType | undefined {
  return TYPE_ALIASES[declared.toUpperCase().replace(/\(.*$/, '').trim()];
}

export const SUPPORTED_TYPES = Object.keys(TYPE_ALIASES);

/** Converts one field of a decoded record to its column's type; throws (→ dead letter) when it cannot. */
export function coerce(value: unknown, col: ColumnDef): unknown {
  if (value === undefined || value === null || (value === '' && col.type !== 'VARCHAR')) return null;
  switch (col.type) {
    case 'BIGINT':
    case 'DOUBLE': {
      const n = typeof value === 'number' ? value : Number(value);
      if (!Number.isFinite(n)) throw new Error(`column ${col.name} (${col.type}): ${JSON.stringify(value)} is not a number`);
      return col.type === 'BIGINT' ? Math.trunc(n) : n;
    }
    case 'VARCHAR':
      return typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
    case 'BOOLEAN':
      if (typeof value === 'boolean') return value;
      if (value === 'true' || value === '1' || value === 1) return true;
      if (value === 'false' || value === '0' || value === 0) return false;
      throw new Error(`column ${col.name} (BOOLEAN): ${JSON.stringify(value)} is not a boolean`);
    case 'TIMESTAMP': {
      if (typeof value === 'number') return value;
      const s = String(value);
      const n = /^-?\d+$/.test(s) ? Number(s) : Date.parse(/Z|[+-]\d\d:?\d\d$/.test(s) ? s : `${s.replace(' ', 'T')}Z`);
      if (!Number.isFinite(n)) throw new Error(`column ${col.name} (TIMESTAMP): ${JSON.stringify(value)} is neither ms since the epoch nor an ISO date-time`);
      return n;
    }
  }
}

/** Splits one CSV line (RFC 4180 quoting) into fields. */
export function splitCsvLine(line: string): string[] {
  const out: string[] = [];
  let i = 0;
  for (;;) {
    if (line[i] === '"') {
      let v = '';
      for (i++; i < line.length; i++) {
        if (line[i] === '"') {
          if (line[i + 1] === '"') {
            v += '"';
            i++;
          } else break;
        } else v += line[i];
      }
      out.push(v);
      i++; // closing quote
      const comma = line.indexOf(',', i);
      if (comma < 0) return out;
      i = comma + 1;
    } else {
      const comma = line.indexOf(',', i);
      if (comma < 0) {
        out.push(line.slice(i).replace(/\r$/, ''));
        return out;
      }
      out.push(line.slice(i, comma));
      i = comma + 1;
    }
  }
}

/**
 * Turns a decoded source record (a JSON value, or a CSV line) into a row of the table's columns.
 * Every column is converted (a bad value sends the record to the dead letters whether a query reads
 * it or not), but with `kept` only the columns it names are in the row: what no query reads is not
 * carried to the next stage. `kept` is filled while the script compiles, so it is read at the first
 * record, not before.
 */
export function rowParser(table: TableDef, kept?: ReadonlySet<string>): (raw: unknown) => Record<string, unknown> {
  const cols = table.columns;
  let keep: boolean[] | undefined;
  const keeps = () => (keep ??= cols.map((c) => !kept || kept.has(c.name)));
  if (table.format === 'csv') {
    return (raw) => {
      const line = typeof raw === 'string' ? raw : raw instanceof Uint8Array ? new TextDecoder().decode(raw) : String(raw);
      const fields = splitCsvLine(line);
      if (fields.length !== cols.length) throw new Error(`table ${table.name}: a CSV line has ${fields.length} fields, the table declares ${cols.length} columns`);
      const k = keeps();
      const row: Record<string, unknown> = {};
      cols.forEach((c, i) => {
        const v = coerce(fields[i], c);
        if (k[i]) row[c.name] = v;
      });
      return row;
    };
  }
  // JSON: match field names exactly, else case-insensitively
  return (raw) => {
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new Error(`table ${table.name}: a record must be a JSON object, got ${JSON.stringify(raw)?.slice(0, 80)}`);
    const obj = raw as Record<string, unknown>;
    const k = keeps();
    const row: Record<string, unknown> = {};
    let lower: Map<string, unknown> | undefined;
    for (let i = 0; i < cols.length; i++) {
      const c = cols[i]!;
      let v = obj[c.name];
      if (v === undefined) {
        lower ??= new Map(Object.entries(obj).map(([k, x]) => [k.toLowerCase(), x]));
        v = lower.get(c.name.toLowerCase());
      }
      const x = coerce(v, c);
      if (k[i]) row[c.name] = x;
    }
    return row;
  };
}
