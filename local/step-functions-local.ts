/**
 * Runs a Step Functions state machine (ASL JSON) in process with `aws-local-stepfunctions`, and
 * serves the part of the Step Functions API that the engine and the CLI use (the awsJson1_0 wire
 * protocol on 127.0.0.1), so code written against `@aws-sdk/client-sfn` runs unchanged with
 * AWS_ENDPOINT_URL_SFN pointing here.
 *
 * Task resources run locally:
 * - `arn:aws:states:::lambda:invoke` → `lambdaHandlers[FunctionName](Payload)`, output shaped like
 *   the real integration (`{ Payload, StatusCode: 200, ... }`);
 * - `arn:aws:states:::lambda:invoke.waitForTaskToken` → the handler is called with a fresh task
 *   token in its payload; the state completes on SendTaskSuccess / SendTaskFailure for that token;
 * - a plain Lambda ARN as Resource → the handler's raw result;
 * - `arn:aws:states:::states:startExecution` (also `.sync`, `.sync:2`, `.waitForTaskToken`) → a
 *   new local execution of this same machine (continue-as-new) or of a `nested` one;
 * - DynamoDB (`arn:aws:states:::dynamodb:*`, `arn:aws:states:::aws-sdk:dynamodb:*`) when a client
 *   is given; anything else through `resourceHandlers`.
 *
 * Interpreter gaps worked around here (aws-local-stepfunctions 3.0.0):
 * - `$$.Task.Token` does not exist in its context object. Each execution's context carries a
 *   placeholder token; the task handler replaces it in the resolved input with a fresh token per
 *   task (this also covers tokens used inside intrinsics such as States.Format).
 * - A Task without TimeoutSeconds times out after 60 s there; AWS's default is effectively
 *   unlimited, so such tasks get the longest timeout a Node timer allows (~24.8 days).
 * - Aborting an execution does not settle a running task: task promises are raced against the
 *   execution's abort, so the interpreter's own timers get cleared.
 * - HeartbeatSeconds is not implemented there; it is here, and a missed heartbeat fails the task
 *   with `States.Timeout` (AWS also offers `States.HeartbeatTimeout`; the interpreter matches
 *   error names exactly, so only one name can be used).
 * - It needs `Promise.withResolvers` (Node 22); a polyfill is installed when missing.
 * Not supported by the interpreter: JSONata, `Assign`/variables, `$$.State.*`, `$$.Task.*`
 * (other than the token), Distributed Map, Activities.
 *
 * This module holds the executions; the Task states are prepared in `-definition`, run in
 * `-task-runner` (with `-tasks` for the resources and `-tokens` for the callback pattern), an
 * execution's record is kept in `-execution`, and the HTTP API is served by `-api`.
 */
import { randomUUID } from 'node:crypto';
import type * as Ddb from '@aws-sdk/client-dynamodb';
import { StateMachine, type StateMachineDefinition } from 'aws-local-stepfunctions';
import { SfnApiError, serveStepFunctionsApi, type StepFunctionsApi } from './step-functions-local-api.js';
import { prepareTasks } from './step-functions-local-definition.js';
import {
  abortedError,
  recordEvents,
  settleFrom,
  summaryOf,
  type ExecutionRecord,
  type ExecutionStatus,
  type ExecutionSummary,
} from './step-functions-local-execution.js';
import { TaskRunner } from './step-functions-local-task-runner.js';
import { TaskTokens } from './step-functions-local-tokens.js';
import { TOKEN_PLACEHOLDER, deepClone } from './step-functions-local-tasks.js';

export { SfnApiError } from './step-functions-local-api.js';
export { StatesError } from './step-functions-local-tasks.js';
export type { ExecutionStatus, ExecutionSummary } from './step-functions-local-execution.js';

// Polyfill before any execution starts (the interpreter calls it inside Task states).
{
  const P = Promise as unknown as { withResolvers?: unknown };
  if (typeof P.withResolvers !== 'function') {
    P.withResolvers = function withResolvers<T>() {
      let resolve!: (v: T | PromiseLike<T>) => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<T>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    };
  }
}

export type LambdaHandler = (payload: unknown) => Promise<unknown>;

export interface LocalStateMachineOptions {
  /** ASL JSON with no CloudFormation tokens left. */
  definition: object;
  /** e.g. arn:aws:states:us-east-1:000000000000:stateMachine:<name> */
  stateMachineArn: string;
  /** Keyed by function ARN or name, as it appears in a Resource or Parameters.FunctionName. */
  lambdaHandlers: Record<string, LambdaHandler>;
  /** Milliseconds per Wait state name, replacing its Seconds/Timestamp. */
  waitTimeOverrides?: Record<string, number>;
  /**
   * Milliseconds per task-token Task state name, replacing its HeartbeatSeconds when it has one,
   * else its TimeoutSeconds (the coordinator's Commit state, whose heartbeat timeout is the pause
   * between checkpoints). The state fails with `States.Timeout` when it passes, as on AWS.
   */
  taskTimeoutOverrides?: Record<string, number>;
  /** Milliseconds per state name (or per retrier, as an array), replacing Retry intervals. */
  retryIntervalOverrides?: Record<string, number | number[]>;
  /** Runs `arn:aws:states:::dynamodb:*` and `arn:aws:states:::aws-sdk:dynamodb:*` tasks. */
  dynamodb?: Ddb.DynamoDBClient;
  /** Handlers for any other Task Resource (exact string); checked first. */
  resourceHandlers?: Record<string, (input: unknown) => Promise<unknown>>;
  /** Validate the definition with asl-validator (as the interpreter does). @default true */
  validate?: boolean;
  /**
   * Other state machines this one's `startExecution` tasks may start (by their ARN), e.g. the
   * coordinator's Express rounds; stopped with this one.
   */
  nested?: readonly LocalStepFunctions[];
  /**
   * How many closed executions are kept for DescribeExecution, ListExecutions and `history` (AWS
   * keeps closed executions for a retention period; a long-running job's coordinator and its Express
   * rounds close one every few seconds). An older one answers ExecutionDoesNotExist. @default 100
   */
  closedExecutionRetention?: number;
}

const DEFAULT_CLOSED_RETENTION = 100;

export class LocalStepFunctions {
  readonly stateMachineArn: string;
  private readonly name: string;
  private readonly region: string;
  private readonly account: string;
  private readonly definition: StateMachineDefinition;
  private readonly machine: StateMachine;
  private readonly execs = new Map<string, ExecutionRecord>();
  private readonly tokens = new TaskTokens();
  private readonly runner: TaskRunner;
  /** closed executions still kept, oldest first */
  private readonly closed = new Set<string>();
  /** billed transitions of the closed executions no longer kept */
  private droppedTransitions = 0;
  private readonly retention: number;
  private api?: StepFunctionsApi;
  private stopped = false;

  constructor(private readonly opts: LocalStateMachineOptions) {
    const arnParts = opts.stateMachineArn.split(':');
    if (arnParts.length < 7 || arnParts[2] !== 'states' || arnParts[5] !== 'stateMachine') {
      throw new TypeError(`LocalStepFunctions: stateMachineArn must look like arn:aws:states:<region>:<account>:stateMachine:<name>, got ${opts.stateMachineArn}`);
    }
    this.stateMachineArn = opts.stateMachineArn;
    this.retention = opts.closedExecutionRetention ?? DEFAULT_CLOSED_RETENTION;
    if (!Number.isInteger(this.retention) || this.retention < 1) {
      throw new TypeError(`LocalStepFunctions: closedExecutionRetention must be an integer ≥ 1, got ${opts.closedExecutionRetention}`);
    }
    this.region = arnParts[3];
    this.account = arnParts[4];
    this.name = arnParts[6];
    this.definition = deepClone(opts.definition) as StateMachineDefinition;
    const tasks = prepareTasks(this.definition as unknown as { States?: Record<string, unknown> }, opts);
    this.runner = new TaskRunner(this, opts, tasks, this.tokens);
    this.machine = new StateMachine(this.definition, {
      validationOptions: opts.validate === false ? { noValidate: true } : { checkArn: true, checkPaths: true },
    });
  }

  // -------------------------------------------------------------------------------------------
  // Executions

  async startExecution(input: unknown = {}, name?: string): Promise<{ executionArn: string; startDate: Date }> {
    if (this.stopped) throw new Error('LocalStepFunctions: stopped');
    const execName = name ?? randomUUID();
    // AWS: 1-80 characters, no whitespace, brackets, wildcards, control or listed special characters.
    if (execName.length < 1 || execName.length > 80 || /[\s<>{}[\]?*"#%\\^|~`$&,;:/\u0000-\u001f\u007f-\u009f]/.test(execName)) {
      throw new SfnApiError('InvalidName', `Invalid Name: '${execName}'`);
    }
    const arn = `arn:aws:states:${this.region}:${this.account}:execution:${this.name}:${execName}`;
    const inputJson = JSON.stringify(input ?? {});
    const existing = this.execs.get(arn);
    if (existing) {
      // StartExecution is idempotent for a running execution with the same name and input.
      if (existing.status === 'RUNNING' && existing.inputJson === inputJson) return { executionArn: arn, startDate: existing.startDate };
      throw new SfnApiError('ExecutionAlreadyExists', `Execution Already Exists: '${arn}'`);
    }
    const rec: ExecutionRecord = {
      arn,
      name: execName,
      stateMachineArn: this.stateMachineArn,
      status: 'RUNNING',
      startDate: new Date(),
      input: deepClone(input ?? {}),
      inputJson,
      abortTasks: new Set(),
      done: Promise.resolve(),
      history: [],
      transitions: 0,
      transitionsByState: new Map(),
    };
    this.execs.set(arn, rec);
    const run = this.machine.run(deepClone(rec.input) as never, {
      overrides: {
        taskResourceLocalHandlers: this.runner.handlersFor(rec),
        waitTimeOverrides: this.opts.waitTimeOverrides,
        retryIntervalOverrides: this.opts.retryIntervalOverrides,
      },
      noThrowOnAbort: true,
      context: {
        Execution: { Id: arn, Name: execName, RoleArn: `arn:aws:iam::${this.account}:role/sluice-local-sfn`, StartTime: rec.startDate.toISOString() },
        StateMachine: { Id: this.stateMachineArn, Name: this.name },
        // The interpreter has no $$.Task.Token: a placeholder, swapped per task (see module doc).
        Task: { Token: TOKEN_PLACEHOLDER },
      },
    });
    rec.abort = run.abort;
    void recordEvents(rec, run.eventLogs);
    rec.done = settleFrom(rec, run.result).finally(() => this.closeExecution(rec));
    return { executionArn: arn, startDate: rec.startDate };
  }

  /** Billed state transitions of every execution this machine ran, including closed ones no longer kept. */
  totalTransitions(): number {
    let n = this.droppedTransitions;
    for (const rec of this.execs.values()) n += rec.transitions;
    return n;
  }

  /** Billed state transitions of an execution so far (states entered plus retries), in total and by state. */
  transitions(executionArn: string): { total: number; byState: Record<string, number> } {
    const rec = this.execs.get(executionArn);
    if (!rec) throw new SfnApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${executionArn}'`);
    return { total: rec.transitions, byState: Object.fromEntries(rec.transitionsByState) };
  }

  /** Aborts a running execution (StopExecution). */
  stopExecution(executionArn: string, error?: string, cause?: string): { stopDate: Date } {
    const rec = this.execs.get(executionArn);
    if (!rec) throw new SfnApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${executionArn}'`);
    if (rec.status === 'RUNNING') {
      rec.status = 'ABORTED';
      rec.error = error;
      rec.cause = cause;
      rec.stopDate = new Date();
      rec.abort?.();
      const abortErr = abortedError();
      for (const f of [...rec.abortTasks]) f(abortErr);
      this.closeExecution(rec);
    }
    return { stopDate: rec.stopDate ?? new Date() };
  }

  private closeExecution(rec: ExecutionRecord): void {
    rec.stopDate ??= new Date();
    this.tokens.closeAll(rec.arn);
    if (this.closed.has(rec.arn) || this.execs.get(rec.arn) !== rec) return;
    this.closed.add(rec.arn);
    // beyond the retention the oldest closed execution is forgotten (as AWS does after its retention period)
    for (const arn of this.closed) {
      if (this.closed.size <= this.retention) break;
      this.closed.delete(arn);
      this.droppedTransitions += this.execs.get(arn)?.transitions ?? 0;
      this.execs.delete(arn);
    }
  }

  executions(): Array<{ arn: string; status: ExecutionStatus; error?: unknown }> {
    return [...this.execs.values()].map((r) => ({ arn: r.arn, status: r.status, ...(r.error !== undefined ? { error: r.error } : {}) }));
  }

  describe(executionArn: string): ExecutionSummary {
    const r = this.execs.get(executionArn);
    if (!r) throw new SfnApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${executionArn}'`);
    return summaryOf(r);
  }

  /** The interpreter's event log of an execution (StateEntered, StateRetried, StateCaught, ...), last 1000 events. */
  history(executionArn: string): unknown[] {
    return [...(this.execs.get(executionArn)?.history ?? [])];
  }

  /** Resolves when the execution is no longer RUNNING. */
  async waitFor(executionArn: string, timeoutMs = 30_000): Promise<ExecutionSummary> {
    const rec = this.execs.get(executionArn);
    if (!rec) throw new SfnApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${executionArn}'`);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`execution ${executionArn} still ${rec.status} after ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([rec.done, timeout]);
    } finally {
      clearTimeout(timer);
    }
    return summaryOf(rec); // it may no longer be kept once closed
  }

  // -------------------------------------------------------------------------------------------
  // Callback API (also reachable over HTTP)

  sendTaskSuccess(taskToken: string, output: string): void {
    this.tokens.succeed(taskToken, output);
  }

  sendTaskFailure(taskToken: string, error?: string, cause?: string): void {
    this.tokens.fail(taskToken, error, cause);
  }

  sendTaskHeartbeat(taskToken: string): void {
    this.tokens.heartbeat(taskToken);
  }

  /** Serves the Step Functions API for this machine on 127.0.0.1 (once; later calls return the same endpoint). */
  async listen(): Promise<{ endpoint: string }> {
    if (!this.api) this.api = await serveStepFunctionsApi(this);
    return { endpoint: this.api.endpoint };
  }

  /** Aborts running executions, closes the server. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const rec of this.execs.values()) {
      if (rec.status === 'RUNNING') this.stopExecution(rec.arn, 'States.Aborted', 'LocalStepFunctions stopped');
    }
    await Promise.allSettled([...this.execs.values()].map((r) => r.done));
    for (const m of this.opts.nested ?? []) await m.stop();
    this.tokens.closeAll();
    const api = this.api;
    this.api = undefined;
    if (api) await api.close();
  }
}
