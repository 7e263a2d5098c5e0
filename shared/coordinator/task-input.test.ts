/**
 * The workflow's task input as `run` reads it: the defaults of the fields a state may leave out, and
 * what `await` answers the workflow with.
 */
import { describe, expect, it } from 'vitest';
import { coordinatorOnTwins } from './on-twins.test-support.js';

describe('the task input', () => {
  it('allocate takes an ordinary checkpoint unless the input asks for a savepoint', async () => {
    const s = coordinatorOnTwins();
    expect(await s.coord.run({ action: 'allocate' })).toEqual({ checkpointId: 1 });
    expect((await s.coord.get(1))!.savepoint).toBe(false);
    await s.coord.abort(1, 'test');
    expect(await s.coord.run({ action: 'allocate', savepoint: true })).toEqual({ checkpointId: 2 });
    expect((await s.coord.get(2))!.savepoint).toBe(true);
  });

  it('a savepoint request with an id and no stop is a savepoint the job goes on after', async () => {
    const s = coordinatorOnTwins();
    expect(await s.coord.run({ action: 'savepoint', savepointId: 'keep-going' })).toMatchObject({ id: 'keep-going', stop: false, status: 'REQUESTED' });
    await s.coord.allocate();
    expect((await s.store.readState()).stopping).toBeUndefined();
  });

  it('a stop-with-savepoint request without an id still stops the job after it', async () => {
    const s = coordinatorOnTwins();
    expect(await s.coord.run({ action: 'savepoint', stop: true })).toMatchObject({ stop: true, status: 'REQUESTED' });
    await s.coord.allocate();
    expect((await s.store.readState()).stopping).toBe(1);
  });

  it('await answers the workflow with the checkpoint it waited for', async () => {
    const s = coordinatorOnTwins();
    await s.coord.allocate();
    await s.ackAll(1);
    await s.coord.run({ action: 'await', checkpointId: 1, taskToken: 'tok' });
    expect(s.m.notifier.succeeded).toEqual([{ taskToken: 'tok', output: { checkpointId: 1 } }]);
  });
});
