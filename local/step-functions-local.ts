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
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type * as Ddb from '@aws-sdk/client-dynamodb';
import { StateMachine, ExecutionError, ExecutionTimeoutError, type StateMachineDefinition } from 'aws-local-stepfunctions';
import { SfnApiError, serveStepFunctionsApi, type StepFunctionsApi } from './step-functions-local-api.js';
import {
  DYNAMO_OPTIMIZED,
  DYNAMO_SDK,
  LAMBDA_ARN,
  LAMBDA_INVOKE,
  LAMBDA_INVOKE_TOKEN,
  MAX_TASK_TIMEOUT_SECONDS,
  START_EXECUTION,
  StatesError,
  TOKEN_PLACEHOLDER,
  deepClone,
  functionName,
  lambdaFailure,
  runDynamoTask,
  substituteToken,
} from './step-functions-local-tasks.js';

export { SfnApiError } from './step-functions-local-api.js';
export { StatesError } from './step-functions-local-tasks.js';

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
export type ExecutionStatus = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'TIMED_OUT' | 'ABORTED';

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

export interface ExecutionSummary {
  arn: string;
  name: string;
  status: ExecutionStatus;
  startDate: Date;
  stopDate?: Date;
  input: unknown;
  output?: unknown;
  /** the Error name, for FAILED / TIMED_OUT / ABORTED */
  error?: string;
  cause?: string;
}

type TaskState = { Type: 'Task'; Resource: string; TimeoutSeconds?: number; TimeoutSecondsPath?: string; HeartbeatSeconds?: number };

interface PendingTask {
  executionArn: string;
  stateName: string;
  resolve(v: unknown): void;
  reject(e: unknown): void;
  heartbeatMs?: number;
  heartbeatTimer?: NodeJS.Timeout;
  timeoutTimer?: NodeJS.Timeout;
}

interface ExecutionRecord extends ExecutionSummary {
  stateMachineArn: string;
  inputJson: string;
  abort?: () => void;
  /** rejects every task promise still running in this execution */
  abortTasks: Set<(err: unknown) => void>;
  done: Promise<void>;
  history: unknown[];
  /** billed state transitions so far: states entered plus retries (AWS counts both) */
  transitions: number;
  /** the same, by state name */
  transitionsByState: Map<string, number>;
}

const HISTORY_LIMIT = 1_000;

function summaryOf(r: ExecutionRecord): ExecutionSummary {
  const { arn, name, status, startDate, stopDate, input, output, error, cause } = r;
  return { arn, name, status, startDate, stopDate, input, output, error, cause };
}
const DEFAULT_CLOSED_RETENTION = 100;
/** Tokens of closed tasks remembered for a TaskTimedOut answer; older ones get InvalidToken (the engine treats both as stale). */
const CLOSED_TOKENS_KEPT = 10_000;

export class LocalStepFunctions {
  readonly stateMachineArn: string;
  private readonly name: string;
  private readonly region: string;
  private readonly account: string;
  private readonly definition: StateMachineDefinition;
  private readonly machine: StateMachine;
  private readonly tasks = new Map<string, TaskState>();
  private readonly execs = new Map<string, ExecutionRecord>();
  private readonly pending = new Map<string, PendingTask>();
  /** tokens whose task has closed: AWS answers TaskTimedOut for them */
  private readonly closedTokens = new Set<string>();
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
    this.collectTasks(this.definition as unknown as { States?: Record<string, unknown> });
    this.machine = new StateMachine(this.definition, {
      validationOptions: opts.validate === false ? { noValidate: true } : { checkArn: true, checkPaths: true },
    });
  }

  /** Walks the machine, including Parallel branches and Map processors; fixes Task timeouts; rejects resources that cannot run. */
  private collectTasks(machine: { States?: Record<string, unknown> }): void {
    for (const [stateName, raw] of Object.entries(machine.States ?? {})) {
      const state = raw as Record<string, unknown>;
      if (state.Type === 'Task') {
        const task = state as unknown as TaskState;
        if (this.tasks.has(stateName)) throw new Error(`LocalStepFunctions: state name ${stateName} is used twice`);
        if (task.TimeoutSeconds === undefined && task.TimeoutSecondsPath === undefined) {
          task.TimeoutSeconds = MAX_TASK_TIMEOUT_SECONDS;
        }
        const override = this.opts.taskTimeoutOverrides?.[stateName];
        if (override !== undefined) {
          if (task.Resource !== LAMBDA_INVOKE_TOKEN && !String(task.Resource).endsWith('.waitForTaskToken')) {
            throw new Error(`LocalStepFunctions: taskTimeoutOverrides names ${stateName}, which is not a task-token task`);
          }
          if (task.HeartbeatSeconds === undefined) {
            // the timer in withTaskToken fails the state; the interpreter's own never fires first
            task.TimeoutSeconds = MAX_TASK_TIMEOUT_SECONDS;
            delete task.TimeoutSecondsPath;
          }
        }
        if (!this.canRun(task.Resource)) {
          throw new Error(
            `LocalStepFunctions: Task ${stateName} uses Resource ${task.Resource}, which cannot run locally; ` +
              `supported: ${LAMBDA_INVOKE}[.waitForTaskToken], Lambda function ARNs, arn:aws:states:::states:startExecution[.sync|.sync:2|.waitForTaskToken], ` +
              `DynamoDB (with the dynamodb option), or pass resourceHandlers[${JSON.stringify(task.Resource)}]`,
          );
        }
        this.tasks.set(stateName, task);
      }
      for (const branch of (state.Branches as unknown[] | undefined) ?? []) this.collectTasks(branch as { States?: Record<string, unknown> });
      for (const key of ['Iterator', 'ItemProcessor']) {
        if (state[key]) this.collectTasks(state[key] as { States?: Record<string, unknown> });
      }
    }
  }

  private canRun(resource: string): boolean {
    if (this.opts.resourceHandlers?.[resource]) return true;
    if (resource === LAMBDA_INVOKE || resource === LAMBDA_INVOKE_TOKEN || LAMBDA_ARN.test(resource)) return true;
    if (START_EXECUTION.test(resource)) return true;
    return !!this.opts.dynamodb && (DYNAMO_OPTIMIZED.test(resource) || DYNAMO_SDK.test(resource));
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
        taskResourceLocalHandlers: this.handlersFor(rec),
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
    void (async () => {
      try {
        for await (const ev of run.eventLogs) {
          rec.history.push(ev);
          if (rec.history.length > HISTORY_LIMIT) rec.history.shift();
          const e = ev as { type?: string; state?: { name?: string } };
          if (e.type === 'StateEntered' || e.type === 'StateRetried') {
            rec.transitions++;
            const name = e.state?.name ?? '?';
            rec.transitionsByState.set(name, (rec.transitionsByState.get(name) ?? 0) + 1);
          }
          if (rec.status !== 'RUNNING') break;
        }
      } catch {
        // history is best effort
      }
    })();
    rec.done = run.result.then(
      (output) => {
        if (rec.status !== 'RUNNING') return; // aborted: the interpreter resolved with null
        rec.status = 'SUCCEEDED';
        rec.output = output;
      },
      (err: unknown) => {
        if (rec.status !== 'RUNNING') return;
        if (err instanceof ExecutionTimeoutError) {
          rec.status = 'TIMED_OUT';
          rec.error = 'States.Timeout';
        } else {
          const cause = err instanceof ExecutionError ? (err.cause as Error | undefined) : (err as Error);
          rec.status = 'FAILED';
          rec.error = cause?.name ?? 'States.Runtime';
          rec.cause = cause?.message ?? String(err);
        }
      },
    ).finally(() => this.closeExecution(rec));
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
    for (const [token, p] of this.pending) {
      if (p.executionArn === rec.arn) this.closeToken(token);
    }
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
  // Task handlers

  private handlersFor(rec: ExecutionRecord): Record<string, (input: unknown) => Promise<never>> {
    const out: Record<string, (input: unknown) => Promise<never>> = {};
    for (const [stateName, task] of this.tasks) {
      // The interpreter checks its abort signal only between states: a Retry's backoff ends at the
      // abort and calls the task again. An aborted execution runs no more tasks; otherwise that call
      // would never settle and the interpreter's TimeoutSeconds timer would hold the process open.
      out[stateName] = (input) =>
        (rec.status === 'RUNNING' ? this.guard(rec, this.runTask(rec, stateName, task, input)) : Promise.reject(abortedError())) as Promise<never>;
    }
    return out;
  }

  /** Races a task against its execution's abort, so aborted executions settle (and free their timers). */
  private guard<T>(rec: ExecutionRecord, task: Promise<T>): Promise<T> {
    let onAbort!: (err: unknown) => void;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = reject;
    });
    rec.abortTasks.add(onAbort);
    return Promise.race([task, aborted]).finally(() => rec.abortTasks.delete(onAbort));
  }

  private async runTask(rec: ExecutionRecord, stateName: string, task: TaskState, input: unknown): Promise<unknown> {
    const resource = task.Resource;
    const custom = this.opts.resourceHandlers?.[resource];
    if (custom) return deepClone(await custom(deepClone(input)));

    if (resource === LAMBDA_INVOKE || resource === LAMBDA_INVOKE_TOKEN) {
      const params = (input ?? {}) as { FunctionName?: string; Payload?: unknown; InvocationType?: string };
      if (typeof params.FunctionName !== 'string') {
        throw new StatesError('States.Runtime', `Task ${stateName}: Parameters.FunctionName is missing`);
      }
      if (resource === LAMBDA_INVOKE_TOKEN) {
        return this.withTaskToken(rec, stateName, task, params.Payload, (payload) =>
          this.invokeLambda(params.FunctionName!, payload, params.InvocationType === 'Event'),
        );
      }
      const isEvent = params.InvocationType === 'Event';
      const result = await this.invokeLambda(params.FunctionName, params.Payload, isEvent);
      return {
        ExecutedVersion: '$LATEST',
        Payload: isEvent ? '' : result,
        SdkHttpMetadata: { HttpStatusCode: isEvent ? 202 : 200 },
        SdkResponseMetadata: { RequestId: randomUUID() },
        StatusCode: isEvent ? 202 : 200,
      };
    }

    if (LAMBDA_ARN.test(resource)) return this.invokeLambda(resource, input, false);

    const start = START_EXECUTION.exec(resource);
    if (start) return this.startChild(rec, stateName, task, input, start[1]);

    return runDynamoTask(this.opts.dynamodb, resource, input);
  }

  private async invokeLambda(fn: string, payload: unknown, asEvent: boolean): Promise<unknown> {
    const handlers = this.opts.lambdaHandlers;
    const handler =
      handlers[fn] ?? Object.entries(handlers).find(([k]) => functionName(k) === functionName(fn))?.[1];
    if (!handler) {
      throw new StatesError('Lambda.ResourceNotFoundException', `Function not found: ${fn} (no local handler registered)`);
    }
    const call = Promise.resolve().then(() => handler(deepClone(payload)));
    if (asEvent) {
      call.catch(() => undefined); // an Event invocation's outcome is not the state's
      return null;
    }
    try {
      return deepClone(await call);
    } catch (err) {
      throw lambdaFailure(err);
    }
  }

  /**
   * The callback pattern: a fresh token is swapped into the input, registered before the call (the
   * callee may answer before it returns), and the state waits for SendTask* on that token. A failed
   * call fails the task, unless the token was already answered.
   */
  private async withTaskToken(
    rec: ExecutionRecord,
    stateName: string,
    task: TaskState,
    input: unknown,
    call: (input: unknown) => Promise<unknown>,
  ): Promise<unknown> {
    const token = randomBytes(32).toString('base64url');
    const { promise, resolve, reject } = (Promise as unknown as {
      withResolvers<T>(): { promise: Promise<T>; resolve(v: T): void; reject(e: unknown): void };
    }).withResolvers<unknown>();
    const entry: PendingTask = { executionArn: rec.arn, stateName, resolve, reject };
    this.pending.set(token, entry);
    const overrideMs = this.opts.taskTimeoutOverrides?.[stateName];
    if (overrideMs !== undefined && task.HeartbeatSeconds === undefined) {
      entry.timeoutTimer = setTimeout(() => {
        if (this.pending.get(token) === entry) entry.reject(new StatesError('States.Timeout', `task timed out after ${overrideMs} ms`));
      }, overrideMs);
      entry.timeoutTimer.unref();
    } else if (task.TimeoutSeconds !== undefined) {
      // The interpreter rejects the state at this time; the token closes with it.
      entry.timeoutTimer = setTimeout(() => this.closeToken(token), task.TimeoutSeconds * 1000);
      entry.timeoutTimer.unref();
    }
    if (task.HeartbeatSeconds !== undefined) {
      entry.heartbeatMs = overrideMs ?? task.HeartbeatSeconds * 1000;
      this.armHeartbeat(token, entry);
    }
    promise.catch(() => undefined).finally(() => this.closeToken(token));
    try {
      await call(substituteToken(input, token));
    } catch (err) {
      if (this.pending.has(token)) reject(err);
    }
    return promise;
  }

  private armHeartbeat(token: string, entry: PendingTask): void {
    if (entry.heartbeatMs === undefined) return;
    clearTimeout(entry.heartbeatTimer);
    entry.heartbeatTimer = setTimeout(() => {
      if (this.pending.get(token) === entry) entry.reject(new StatesError('States.Timeout', `no heartbeat for ${entry.heartbeatMs} ms`));
    }, entry.heartbeatMs);
    entry.heartbeatTimer.unref();
  }

  private closeToken(token: string): void {
    const entry = this.pending.get(token);
    if (!entry) return;
    clearTimeout(entry.heartbeatTimer);
    clearTimeout(entry.timeoutTimer);
    this.pending.delete(token);
    this.closedTokens.add(token);
    if (this.closedTokens.size > CLOSED_TOKENS_KEPT) this.closedTokens.delete(this.closedTokens.values().next().value!);
  }

  private async startChild(rec: ExecutionRecord, stateName: string, task: TaskState, input: unknown, mode: string | undefined): Promise<unknown> {
    let target: LocalStepFunctions = this;
    const run = async (params: unknown) => {
      const p = (params ?? {}) as { StateMachineArn?: string; Input?: unknown; Name?: string };
      const found = p.StateMachineArn === this.stateMachineArn ? this : this.opts.nested?.find((m) => m.stateMachineArn === p.StateMachineArn);
      if (!found) {
        const known = [this.stateMachineArn, ...(this.opts.nested ?? []).map((m) => m.stateMachineArn)].join(', ');
        throw new StatesError('StepFunctions.StateMachineDoesNotExistException', `State Machine Does Not Exist: '${String(p.StateMachineArn)}' (only ${known} run locally)`);
      }
      target = found;
      let childInput = p.Input ?? {};
      if (typeof childInput === 'string') {
        try {
          childInput = JSON.parse(childInput);
        } catch {
          throw new StatesError('StepFunctions.InvalidExecutionInputException', 'Input is not valid JSON');
        }
      }
      try {
        return await target.startExecution(childInput, p.Name);
      } catch (err) {
        if (err instanceof SfnApiError) throw new StatesError(`StepFunctions.${err.type}Exception`, err.message);
        throw err;
      }
    };
    if (mode === '.waitForTaskToken') return this.withTaskToken(rec, stateName, task, input, run);
    const started = await run(input);
    if (!mode) return { ExecutionArn: started.executionArn, StartDate: started.startDate.getTime() };
    // .sync / .sync:2: wait for the child and fail like it did.
    const d = await target.waitFor(started.executionArn, 2 ** 31 - 1);
    if (d.status !== 'SUCCEEDED') {
      throw new StatesError('States.TaskFailed', JSON.stringify({ ExecutionArn: d.arn, Status: d.status, Error: d.error, Cause: d.cause }));
    }
    return {
      ExecutionArn: d.arn,
      Input: mode === '.sync:2' ? d.input : JSON.stringify(d.input),
      Name: d.name,
      Output: mode === '.sync:2' ? d.output : JSON.stringify(d.output),
      StartDate: d.startDate.getTime(),
      StateMachineArn: target.stateMachineArn,
      Status: d.status,
      StopDate: d.stopDate?.getTime(),
    };
  }

  // -------------------------------------------------------------------------------------------
  // Callback API (also reachable over HTTP)

  private taskFor(token: unknown): PendingTask {
    if (typeof token !== 'string' || token.length === 0) throw new SfnApiError('InvalidToken', 'Invalid Token: empty');
    const entry = this.pending.get(token);
    if (entry) return entry;
    if (this.closedTokens.has(token)) {
      throw new SfnApiError('TaskTimedOut', 'Task Timed Out: the task for this token has already closed');
    }
    throw new SfnApiError('InvalidToken', `Invalid Token: '${token.slice(0, 32)}...'`);
  }

  sendTaskSuccess(taskToken: string, output: string): void {
    const entry = this.taskFor(taskToken);
    let parsed: unknown;
    try {
      parsed = JSON.parse(output);
    } catch {
      throw new SfnApiError('InvalidOutput', 'Invalid Output: not JSON');
    }
    entry.resolve(parsed);
    this.closeToken(taskToken);
  }

  sendTaskFailure(taskToken: string, error?: string, cause?: string): void {
    const entry = this.taskFor(taskToken);
    // AWS leaves Error empty when none is given; the interpreter matches names, and every Task error matches States.TaskFailed.
    entry.reject(new StatesError(error || 'States.TaskFailed', cause ?? ''));
    this.closeToken(taskToken);
  }

  sendTaskHeartbeat(taskToken: string): void {
    const entry = this.taskFor(taskToken);
    this.armHeartbeat(taskToken, entry);
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
    for (const token of [...this.pending.keys()]) this.closeToken(token);
    const api = this.api;
    this.api = undefined;
    if (api) await api.close();
  }
}

function abortedError(): StatesError {
  return new StatesError('States.Aborted', 'execution aborted');
}
