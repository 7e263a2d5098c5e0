/** Errors of the SQL front end: where (file:line:column) and what a user can do about it. */
import { SluiceError, type ErrorCode } from '../util/errors.js';

export type SqlErrorCode = Extract<ErrorCode, `SQL_${string}`>;

/**
 * A statement that cannot be parsed or compiled. `code` is one of SQL_SYNTAX, SQL_UNKNOWN_TABLE,
 * SQL_UNKNOWN_COLUMN, SQL_AMBIGUOUS_COLUMN, SQL_UNSUPPORTED, SQL_INVALID (a construct that is
 * supported but used wrongly: a column neither grouped nor aggregated, a bad table option...).
 */
export class SqlError extends SluiceError {
  override readonly name = 'SqlError';
  constructor(
    readonly origin: string,
    readonly line: number,
    readonly column: number,
    readonly detail: string,
    code: SqlErrorCode,
  ) {
    super(`${origin}:${line}:${column}: ${detail}`, code);
  }
}
