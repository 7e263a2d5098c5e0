/**
 * What the stack's EventBridge rules do for the coordinator, done for a local run: a coordinator
 * execution that failed or timed out is started again (a stopped one, or one of a stopped or finished
 * job, is left alone; a status event can be lost on purpose, and then only the watchdog helps), and
 * the watchdog task runs on its schedule.
 */
import type { CountingTelemetry } from '../shared/adapters/telemetry.js';
import type { Coordinator } from '../shared/coordinator/coordinator.js';
import type { LocalStepFunctions } from './step-functions-local.js';

export interface CoordinatorSchedulesContext {
  readonly stepFunctions: LocalStepFunctions;
  readonly coordinator: Coordinator;
  readonly telemetry: CountingTelemetry;
  /** false once the run stopped: nothing is started any more */
  isRunning(): boolean;
  /** fault injection: the status-change event of this failed execution is lost */
  readonly statusEventLost?: (executionArn: string) => boolean;
  /** @default never */
  readonly watchdogIntervalMs?: number;
  runWatchdog(): Promise<unknown>;
}

/** Starts the restart rule and the watchdog schedule; the returned function ends both. */
export function startCoordinatorSchedules(x: CoordinatorSchedulesContext): () => void {
  // as the stack's EventBridge rule does on AWS: a coordinator execution that failed or timed out
  // is started again (a stopped one is left alone)
  let restarting = false;
  const lost = new Set<string>();
  const restartTimer = setInterval(() => {
    const latest = x.stepFunctions.executions().at(-1);
    if (restarting || !latest || (latest.status !== 'FAILED' && latest.status !== 'TIMED_OUT') || !x.isRunning()) return;
    if (lost.has(latest.arn)) return;
    if (x.statusEventLost?.(latest.arn)) {
      lost.add(latest.arn);
      x.telemetry.log('warn', 'coordinator execution ended; its status event was lost', { execution: latest.arn });
      return;
    }
    restarting = true;
    void x.coordinator
      .jobStatus()
      .then(async (st) => {
        // a stopped or finished job takes no more checkpoints: its workflow stays down
        if (st.stoppedAt !== undefined) return;
        x.telemetry.log('warn', 'coordinator execution ended; starting a new one', { execution: latest.arn, error: latest.error });
        await x.stepFunctions.startExecution({ iteration: 0 });
      })
      .catch(() => undefined)
      .finally(() => (restarting = false));
  }, 1_000);
  restartTimer.unref();
  let watchdogTimer: NodeJS.Timeout | undefined;
  if (x.watchdogIntervalMs !== undefined) {
    let watching = false;
    watchdogTimer = setInterval(() => {
      if (watching || !x.isRunning()) return;
      watching = true;
      void x
        .runWatchdog()
        .catch((err: unknown) => x.telemetry.log('warn', 'watchdog failed', { error: String(err) }))
        .finally(() => (watching = false));
    }, x.watchdogIntervalMs);
    watchdogTimer.unref();
  }
  return () => {
    clearInterval(restartTimer);
    if (watchdogTimer) clearInterval(watchdogTimer);
  };
}
