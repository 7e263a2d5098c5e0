import { executionAsyncResource } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { CLOCK_SKEW_MAX_MS, coordinatorClockSkew } from './clock-skew.js';
import { FaultSchedule } from './schedule.js';

const alwaysSkewed = (seed: number) => new FaultSchedule({ seed, rates: { 'clock-skew': 1 } });

/**
 * Context slots a promise made now carries. AsyncLocalStorage (async_hooks-based, Node 20 and 22)
 * copies one slot per storage ever run onto every new async resource: the work each later promise
 * costs.
 */
async function contextSlots(): Promise<number> {
  await null;
  return Object.getOwnPropertySymbols(executionAsyncResource()).length;
}

describe('coordinatorClockSkew', () => {
  it('a task reads its own environment\'s clock; between tasks, the clock of the task that ran last', async () => {
    const skew = coordinatorClockSkew(alwaysSkewed(7));
    const inTask = await skew.inTask(async () => {
      await null;
      return skew.now().getTime() - Date.now();
    });
    expect(Math.abs(inTask)).toBeGreaterThanOrEqual(240);
    expect(Math.abs(inTask)).toBeLessThanOrEqual(CLOCK_SKEW_MAX_MS + 50);
    const after = skew.now().getTime() - Date.now();
    expect(Math.abs(after - inTask)).toBeLessThan(50);
  });

  it('a task of one run does not set the clock of another run', async () => {
    const a = coordinatorClockSkew(new FaultSchedule({ seed: 1, rates: {} }));
    const b = coordinatorClockSkew(alwaysSkewed(2));
    const seenByA = await b.inTask(async () => {
      await null;
      return a.now().getTime() - Date.now();
    });
    expect(Math.abs(seenByA)).toBeLessThan(50);
  });

  it('runs after runs add no async context to every later promise (one storage for the process, not one per run)', async () => {
    await coordinatorClockSkew(alwaysSkewed(0)).inTask(async () => undefined);
    const first = await contextSlots();
    for (let seed = 1; seed <= 40; seed++) await coordinatorClockSkew(alwaysSkewed(seed)).inTask(async () => undefined);
    expect(await contextSlots()).toBe(first);
  });
});
