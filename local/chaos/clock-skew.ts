/**
 * `clock-skew`: the coordinator's tasks run in Lambda execution environments whose wall clocks
 * disagree by up to ±CLOCK_SKEW_MAX_MS. The coordinator is where the engine reads the wall clock
 * for decisions: the time a barrier carries (processing time enters the log there: timers, state
 * TTL and source idleness at the instances all run on it), a checkpoint's start and progress
 * times (its timeout), a commit's and an Express round's age. The stage functions read their own
 * clock only for what decides nothing (the lease's takenAt and snapshotAt, a duration metric, log
 * timestamps), so skewing them would test nothing; see docs/guarantees.md.
 *
 * Each task lands in an environment of its own: the schedule decides, task by task, whether its
 * clock is off and by how much. The coordinator reads the clock through the `now` it is built
 * with (runner option `coordinatorClock`); a read outside any task (the loop's own bookkeeping
 * between tasks) sees the clock of the task that ran last.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { FaultSchedule } from './schedule.js';

/** How far a skewed environment's clock is off at most, either way. */
export const CLOCK_SKEW_MAX_MS = 3_000;

export interface CoordinatorClockSkew {
  /** the coordinator's clock: the wall clock of the environment the current task runs in */
  readonly now: () => Date;
  /** runs one coordinator task in an environment drawn by the schedule */
  inTask<T>(task: () => Promise<T>): Promise<T>;
}

/**
 * The skew of the task running now, and whose clock it is. One store for every run in the process:
 * on Node 20 an AsyncLocalStorage, once run, stays in async_hooks' list for good, and each one in
 * that list adds work to every promise created from then on. One per run made each seed of a long
 * chaos run dearer than the one before (measured: CPU per seed 16 s over the first 20 seeds, 50 s
 * after 180).
 */
const taskSkew = new AsyncLocalStorage<{ readonly clock: object; readonly skew: number }>();

export function coordinatorClockSkew(schedule: FaultSchedule, maxMs = CLOCK_SKEW_MAX_MS): CoordinatorClockSkew {
  const clock = {};
  let last = 0;
  const current = (): number | undefined => {
    const s = taskSkew.getStore();
    return s?.clock === clock ? s.skew : undefined;
  };
  return {
    now: () => new Date(Date.now() + (current() ?? last)),
    inTask(task) {
      let skew = 0;
      if (schedule.roll('clock-skew')) {
        // at least a quarter second off, either way
        const off = 250 + schedule.int(maxMs - 249);
        skew = schedule.random() < 0.5 ? -off : off;
        schedule.observe(skew < 0 ? 'clock-behind' : 'clock-ahead');
      }
      last = skew;
      return taskSkew.run({ clock, skew }, task);
    },
  };
}
