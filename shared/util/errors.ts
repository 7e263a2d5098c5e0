/**
 * One error base for the whole project: a machine-readable `code`, whether retrying can help, and
 * the original `cause`. Messages say what was received and what is allowed.
 */
export class SluiceError extends Error {
  override readonly name: string = 'SluiceError';
  constructor(
    message: string,
    readonly code: string,
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
