/**
 * Every machine-readable error code. Callers branch on these (retry, dead-letter, report), so a new
 * failure gets a code here, not a free string.
 */
export type ErrorCode =
  // a job's definition or a call of the API or a tool that cannot work as given
  | 'PLAN_INVALID'
  | 'USAGE_INVALID'
  | 'CONFIG_INVALID'
  | 'QUERY_INVALID'
  | 'BATCH_INVALID'
  | 'BAD_INPUT'
  // SQL scripts (SqlError: file, line and column)
  | 'SQL_SYNTAX'
  | 'SQL_UNKNOWN_TABLE'
  | 'SQL_UNKNOWN_COLUMN'
  | 'SQL_AMBIGUOUS_COLUMN'
  | 'SQL_UNSUPPORTED'
  | 'SQL_INVALID'
  // a record the job cannot process (it goes to the dead letters)
  | 'POISON_RECORD'
  | 'USER_FUNCTION_FAILED'
  // the exactly-once protocol: fencing, checkpoints, replay, reshards and rescales
  | 'FENCED'
  | 'CHECKPOINT_IN_FLIGHT'
  | 'CHECKPOINT_ABORTED'
  | 'JOB_STOPPED'
  | 'NO_CHECKPOINT'
  | 'REPLAY_TRIMMED'
  | 'REPLAY_STALLED'
  | 'RESHARD_INVALID'
  | 'RESHARD_UNCOORDINATED'
  | 'RESCALE_PENDING'
  | 'TOPOLOGY_MISMATCH'
  // stored state
  | 'STATE_CORRUPT'
  | 'STATE_CONTENDED'
  | 'DELTA_CORRUPT'
  // savepoints
  | 'NO_SAVEPOINT'
  | 'SAVEPOINT_EXISTS'
  | 'SAVEPOINT_FORMAT'
  | 'SAVEPOINT_INCOMPATIBLE'
  | 'SAVEPOINT_INCONSISTENT'
  | 'SAVEPOINT_PENDING';

/**
 * One error base for the whole project: a machine-readable `code`, whether retrying can help, and
 * the original `cause`. Messages say what was received and what is allowed.
 */
export class SluiceError extends Error {
  override readonly name: string = 'SluiceError';
  constructor(
    message: string,
    readonly code: ErrorCode,
    readonly retryable = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A job definition that cannot be planned. `path` names the bad operator or field. */
export class PlanError extends SluiceError {
  override readonly name = 'PlanError';
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`, 'PLAN_INVALID');
  }
}

/**
 * A call the job's code or a tool makes that cannot work as given, found while the job runs (the
 * plan-time kind is `PlanError`): names the operator (or API call) and the field.
 */
export class UsageError extends SluiceError {
  override readonly name = 'UsageError';
  constructor(
    readonly operator: string,
    readonly field: string,
    message: string,
  ) {
    super(`${operator}: ${field} ${message}`, 'USAGE_INVALID');
  }
}

/** A write refused because a newer owner holds the lease (a zombie invocation). */
export class FencedError extends SluiceError {
  override readonly name = 'FencedError';
  constructor(message: string) {
    super(message, 'FENCED', true);
  }
}

/** A record that cannot be decoded or that made user code throw. */
export class PoisonRecordError extends SluiceError {
  override readonly name = 'PoisonRecordError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 'POISON_RECORD', false, options);
  }
}

/** A configuration value (environment variable) missing or malformed. */
export class ConfigError extends SluiceError {
  override readonly name = 'ConfigError';
  constructor(message: string) {
    super(message, 'CONFIG_INVALID');
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
