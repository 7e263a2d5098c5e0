/**
 * Runs the Task states of one local state machine's executions: Lambda invokes (plain, Event and
 * the task-token callback), child executions (`startExecution`, `.sync`, `.sync:2`,
 * `.waitForTaskToken`), DynamoDB and custom resources — each raced against its execution's abort.
 */
import { randomUUID } from 'node:crypto';
import type { LocalStateMachineOptions, LocalStepFunctions } from './step-functions-local.js';
import { SfnApiError } from './step-functions-local-api.js';
import type { TaskState } from './step-functions-local-definition.js';
import { abortedError, type ExecutionRecord } from './step-functions-local-execution.js';
import type { TaskTokens } from './step-functions-local-tokens.js';
import {
  LAMBDA_ARN,
  LAMBDA_INVOKE,
  LAMBDA_INVOKE_TOKEN,
  START_EXECUTION,
  StatesError,
  deepClone,
  functionName,
  lambdaFailure,
  runDynamoTask,
  substituteToken,
} from './step-functions-local-tasks.js';

export class TaskRunner {
  constructor(
    /** the machine whose tasks these are: a `startExecution` of its own ARN starts it again */
    private readonly machine: LocalStepFunctions,
    private readonly opts: LocalStateMachineOptions,
    private readonly tasks: ReadonlyMap<string, TaskState>,
    private readonly tokens: TaskTokens,
  ) {}

  /** The interpreter's `taskResourceLocalHandlers` for one execution, by state name. */
  handlersFor(rec: ExecutionRecord): Record<string, (input: unknown) => Promise<never>> {
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
    const overrideMs = this.opts.taskTimeoutOverrides?.[stateName];
    const { token, answer } = this.tokens.open(rec.arn, {
      ...(overrideMs !== undefined ? { overrideMs } : {}),
      ...(task.TimeoutSeconds !== undefined ? { timeoutSeconds: task.TimeoutSeconds } : {}),
      ...(task.HeartbeatSeconds !== undefined ? { heartbeatMs: overrideMs ?? task.HeartbeatSeconds * 1000 } : {}),
    });
    try {
      await call(substituteToken(input, token));
    } catch (err) {
      this.tokens.failIfOpen(token, err);
    }
    return answer;
  }

  private async startChild(rec: ExecutionRecord, stateName: string, task: TaskState, input: unknown, mode: string | undefined): Promise<unknown> {
    const self = this.machine;
    let target: LocalStepFunctions = self;
    const run = async (params: unknown) => {
      const p = (params ?? {}) as { StateMachineArn?: string; Input?: unknown; Name?: string };
      const found = p.StateMachineArn === self.stateMachineArn ? self : this.opts.nested?.find((m) => m.stateMachineArn === p.StateMachineArn);
      if (!found) {
        const known = [self.stateMachineArn, ...(this.opts.nested ?? []).map((m) => m.stateMachineArn)].join(', ');
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
}
