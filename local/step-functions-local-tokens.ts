/**
 * The callback pattern's task tokens of the local Step Functions: a task waiting on a token, its
 * TimeoutSeconds and heartbeat timers, and the answers SendTaskSuccess/Failure/Heartbeat get — a
 * closed task's token answers TaskTimedOut, an unknown one InvalidToken, as AWS does.
 */
import { randomBytes } from 'node:crypto';
import { SfnApiError } from './step-functions-local-api.js';
import { StatesError } from './step-functions-local-tasks.js';

/** Tokens of closed tasks remembered for a TaskTimedOut answer; older ones get InvalidToken (the engine treats both as stale). */
const CLOSED_TOKENS_KEPT = 10_000;

interface PendingTask {
  executionArn: string;
  resolve(v: unknown): void;
  reject(e: unknown): void;
  heartbeatMs?: number;
  heartbeatTimer?: NodeJS.Timeout;
  timeoutTimer?: NodeJS.Timeout;
}

export interface TokenTimeouts {
  /** the task fails with States.Timeout after this long (a local override of TimeoutSeconds) */
  overrideMs?: number;
  /** the state's TimeoutSeconds: the interpreter fails the state then; the token closes with it */
  timeoutSeconds?: number;
  /** the state's HeartbeatSeconds (or the override) */
  heartbeatMs?: number;
}

export class TaskTokens {
  private readonly pending = new Map<string, PendingTask>();
  /** tokens whose task has closed: AWS answers TaskTimedOut for them */
  private readonly closed = new Set<string>();

  /** A fresh token for a task of `executionArn`, and the promise its answer settles. */
  open(executionArn: string, t: TokenTimeouts): { token: string; answer: Promise<unknown> } {
    const token = randomBytes(32).toString('base64url');
    const { promise, resolve, reject } = (Promise as unknown as {
      withResolvers<T>(): { promise: Promise<T>; resolve(v: T): void; reject(e: unknown): void };
    }).withResolvers<unknown>();
    const entry: PendingTask = { executionArn, resolve, reject };
    this.pending.set(token, entry);
    if (t.overrideMs !== undefined && t.heartbeatMs === undefined) {
      entry.timeoutTimer = setTimeout(() => {
        if (this.pending.get(token) === entry) entry.reject(new StatesError('States.Timeout', `task timed out after ${t.overrideMs} ms`));
      }, t.overrideMs);
      entry.timeoutTimer.unref();
    } else if (t.timeoutSeconds !== undefined) {
      entry.timeoutTimer = setTimeout(() => this.close(token), t.timeoutSeconds * 1000);
      entry.timeoutTimer.unref();
    }
    if (t.heartbeatMs !== undefined) {
      entry.heartbeatMs = t.heartbeatMs;
      this.armHeartbeat(token, entry);
    }
    promise.catch(() => undefined).finally(() => this.close(token));
    return { token, answer: promise };
  }

  /** Fails a task whose call failed, unless its token was answered already. */
  failIfOpen(token: string, err: unknown): void {
    this.pending.get(token)?.reject(err);
  }

  private armHeartbeat(token: string, entry: PendingTask): void {
    if (entry.heartbeatMs === undefined) return;
    clearTimeout(entry.heartbeatTimer);
    entry.heartbeatTimer = setTimeout(() => {
      if (this.pending.get(token) === entry) entry.reject(new StatesError('States.Timeout', `no heartbeat for ${entry.heartbeatMs} ms`));
    }, entry.heartbeatMs);
    entry.heartbeatTimer.unref();
  }

  close(token: string): void {
    const entry = this.pending.get(token);
    if (!entry) return;
    clearTimeout(entry.heartbeatTimer);
    clearTimeout(entry.timeoutTimer);
    this.pending.delete(token);
    this.closed.add(token);
    if (this.closed.size > CLOSED_TOKENS_KEPT) this.closed.delete(this.closed.values().next().value!);
  }

  /** Closes the tokens of one execution (it ended), or all of them. */
  closeAll(executionArn?: string): void {
    for (const [token, p] of [...this.pending]) if (executionArn === undefined || p.executionArn === executionArn) this.close(token);
  }

  private taskFor(token: unknown): PendingTask {
    if (typeof token !== 'string' || token.length === 0) throw new SfnApiError('InvalidToken', 'Invalid Token: empty');
    const entry = this.pending.get(token);
    if (entry) return entry;
    if (this.closed.has(token)) throw new SfnApiError('TaskTimedOut', 'Task Timed Out: the task for this token has already closed');
    throw new SfnApiError('InvalidToken', `Invalid Token: '${token.slice(0, 32)}...'`);
  }

  succeed(token: string, output: string): void {
    const entry = this.taskFor(token);
    let parsed: unknown;
    try {
      parsed = JSON.parse(output);
    } catch {
      throw new SfnApiError('InvalidOutput', 'Invalid Output: not JSON');
    }
    entry.resolve(parsed);
    this.close(token);
  }

  fail(token: string, error?: string, cause?: string): void {
    const entry = this.taskFor(token);
    // AWS leaves Error empty when none is given; the interpreter matches names, and every Task error matches States.TaskFailed.
    entry.reject(new StatesError(error || 'States.TaskFailed', cause ?? ''));
    this.close(token);
  }

  heartbeat(token: string): void {
    this.armHeartbeat(token, this.taskFor(token));
  }
}
