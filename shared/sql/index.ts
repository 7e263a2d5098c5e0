/** Streaming SQL on Sluice: a SQL script compiles to a job through the public job API. See docs/sql.md. */
export { compileSql, sqlJob } from './compiler.js';
export type { BoundedSourceSpec, CompiledSql, SqlJobOptions } from './compiler.js';
export type { Catalog, ColumnDef, Connector, SqlType, TableDef } from './catalog.js';
export { SqlError } from './errors.js';
