/**
 * One execution of the local Step Functions: its record (status, outcome, the interpreter's event
 * log and the billed state transitions), filled from the interpreter's run.
 */
import { ExecutionError, ExecutionTimeoutError } from 'aws-local-stepfunctions';
import { StatesError } from './step-functions-local-tasks.js';

export type ExecutionStatus = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'TIMED_OUT' | 'ABORTED';

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

export interface ExecutionRecord extends ExecutionSummary {
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

export function summaryOf(r: ExecutionRecord): ExecutionSummary {
  const { arn, name, status, startDate, stopDate, input, output, error, cause } = r;
  return { arn, name, status, startDate, stopDate, input, output, error, cause };
}

/** Keeps the last events of the run's log and counts its billed transitions, until the execution closes. */
export async function recordEvents(rec: ExecutionRecord, eventLogs: AsyncIterable<unknown>): Promise<void> {
  try {
    for await (const ev of eventLogs) {
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
}

/** Sets the execution's outcome from the run's result, unless it was aborted first. */
export function settleFrom(rec: ExecutionRecord, result: Promise<unknown>): Promise<void> {
  return result.then(
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
  );
}

export function abortedError(): StatesError {
  return new StatesError('States.Aborted', 'execution aborted');
}
