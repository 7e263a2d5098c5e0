/**
 * Exceptions from users' code, named by the operator whose function threw, so a dead letter says
 * `map "enrich" (op3-map): TypeError: …` rather than pointing into the engine.
 */
import { errorMessage, SluiceError } from './errors.js';

/** What names an operator in messages: its kind, the name given to it, its id. */
export interface NamedOperator {
  readonly id: string;
  readonly kind: string;
  readonly name: string;
}

export function operatorLabel(op: NamedOperator): string {
  // an exchange is named for the call that made it (keyBy, rebalance, broadcast)
  const kind = op.kind === 'exchange' ? op.name : op.kind;
  return op.name && op.name !== kind ? `${kind} "${op.name}" (${op.id})` : `${kind} (${op.id})`;
}

/** A user's function threw, or returned what the engine cannot use. */
export class UserFunctionError extends SluiceError {
  override readonly name = 'UserFunctionError';
  constructor(
    readonly operator: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${operator}: ${message}`, 'USER_FUNCTION_FAILED', false, options);
  }
}

/** Tags an exception with the operator it came from; one already tagged (by an operator downstream) passes through. */
export function operatorError(op: NamedOperator, err: unknown): UserFunctionError {
  if (err instanceof UserFunctionError) return err;
  return new UserFunctionError(operatorLabel(op), errorMessage(err), { cause: err });
}

/** `push` of an operator, whose exceptions name the operator. */
export function withOperatorErrors<M>(op: NamedOperator, push: (value: unknown, meta: M) => void): (value: unknown, meta: M) => void {
  return (value, meta) => {
    try {
      push(value, meta);
    } catch (err) {
      throw operatorError(op, err);
    }
  };
}
