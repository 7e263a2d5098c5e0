/**
 * `sluice/sql`: streaming SQL. A script of `CREATE TABLE` and `INSERT INTO … SELECT` statements
 * compiles to a job through the public job API (see docs/sql.md in the repository).
 *
 * @module sluice/sql
 */
export { compileSql, sqlJob } from './compiler.js';
export type { BoundedSourceSpec, CompiledSql, SqlJobOptions } from './compiler.js';
export type { Catalog, ColumnDef, Connector, SqlType, TableDef } from './catalog.js';
export { SqlError } from './errors.js';
