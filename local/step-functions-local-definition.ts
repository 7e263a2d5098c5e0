/**
 * A state machine definition's Task states, prepared for the local interpreter: found through
 * Parallel branches and Map processors, given AWS's default (unlimited) timeout where the
 * interpreter would use 60 s, and checked to name a resource that can run locally.
 */
import type { LocalStateMachineOptions } from './step-functions-local.js';
import {
  DYNAMO_OPTIMIZED,
  DYNAMO_SDK,
  LAMBDA_ARN,
  LAMBDA_INVOKE,
  LAMBDA_INVOKE_TOKEN,
  MAX_TASK_TIMEOUT_SECONDS,
  START_EXECUTION,
} from './step-functions-local-tasks.js';

export type TaskState = { Type: 'Task'; Resource: string; TimeoutSeconds?: number; TimeoutSecondsPath?: string; HeartbeatSeconds?: number };

type TaskOptions = Pick<LocalStateMachineOptions, 'taskTimeoutOverrides' | 'resourceHandlers' | 'dynamodb'>;
type Machine = { States?: Record<string, unknown> };

/**
 * The Task states of `definition` by name, fixing their timeouts in place (so the interpreter,
 * given the same object, sees them); throws for a name used twice or a resource that cannot run.
 */
export function prepareTasks(definition: Machine, opts: TaskOptions): Map<string, TaskState> {
  const tasks = new Map<string, TaskState>();
  collectTasks(definition, opts, tasks);
  return tasks;
}

function collectTasks(machine: Machine, opts: TaskOptions, tasks: Map<string, TaskState>): void {
  for (const [stateName, raw] of Object.entries(machine.States ?? {})) {
    const state = raw as Record<string, unknown>;
    if (state.Type === 'Task') {
      const task = state as unknown as TaskState;
      if (tasks.has(stateName)) throw new Error(`LocalStepFunctions: state name ${stateName} is used twice`);
      if (task.TimeoutSeconds === undefined && task.TimeoutSecondsPath === undefined) {
        task.TimeoutSeconds = MAX_TASK_TIMEOUT_SECONDS;
      }
      const override = opts.taskTimeoutOverrides?.[stateName];
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
      if (!canRun(task.Resource, opts)) {
        throw new Error(
          `LocalStepFunctions: Task ${stateName} uses Resource ${task.Resource}, which cannot run locally; ` +
            `supported: ${LAMBDA_INVOKE}[.waitForTaskToken], Lambda function ARNs, arn:aws:states:::states:startExecution[.sync|.sync:2|.waitForTaskToken], ` +
            `DynamoDB (with the dynamodb option), or pass resourceHandlers[${JSON.stringify(task.Resource)}]`,
        );
      }
      tasks.set(stateName, task);
    }
    for (const branch of (state.Branches as unknown[] | undefined) ?? []) collectTasks(branch as Machine, opts, tasks);
    for (const key of ['Iterator', 'ItemProcessor']) {
      if (state[key]) collectTasks(state[key] as Machine, opts, tasks);
    }
  }
}

function canRun(resource: string, opts: TaskOptions): boolean {
  if (opts.resourceHandlers?.[resource]) return true;
  if (resource === LAMBDA_INVOKE || resource === LAMBDA_INVOKE_TOKEN || LAMBDA_ARN.test(resource)) return true;
  if (START_EXECUTION.test(resource)) return true;
  return !!opts.dynamodb && (DYNAMO_OPTIMIZED.test(resource) || DYNAMO_SDK.test(resource));
}
