/**
 * A Coordinator given only its ports (as a deployment without transactional sinks or telemetry
 * builds it): the wall clock, nothing to publish, nothing to log, and every task still does its work.
 */
import { describe, expect, it } from 'vitest';
import { memoryCoordinatorPorts } from '../adapters/memory/checkpoint-store.js';
import { Coordinator } from './coordinator.js';
import { coordinatorOnTwins, snapshotAndAck } from './on-twins.test-support.js';

function bare() {
  const s = coordinatorOnTwins();
  return { ...s, coord: new Coordinator(s.plan, s.names, memoryCoordinatorPorts(s.plan, s.m)) };
}

describe('a coordinator given only its ports', () => {
  it('stamps checkpoints with the wall clock, publishes nothing and finishes a bounded job', async () => {
    const s = bare();
    const before = Date.now();
    await s.coord.allocate();
    const started = Date.parse((await s.coord.get(1))!.startedAt);
    expect(started).toBeGreaterThanOrEqual(before);
    expect(started).toBeLessThanOrEqual(Date.now());
    for (const id of (await s.coord.get(1))!.missing!) await snapshotAndAck(s.m, 1, id, { finished: true });
    expect(await s.coord.commit(1)).toMatchObject({ checkpointId: 1, published: 0 });
    expect(await s.coord.jobStatus()).toEqual({ stoppedAt: 1, finishedAt: 1 });
  });

  it('aborts checkpoints that look stalled without an alarm to raise', async () => {
    const s = bare();
    for (let n = 1; n <= 3; n++) {
      await s.coord.allocate();
      for (const id of (await s.coord.get(n))!.missing!.slice(1)) await s.m.control.ack(n, id);
      expect(await s.coord.abort(n, 'timeout')).toEqual({ checkpointId: n });
    }
    expect(await s.coord.stalled()).toBeDefined();
  });
});
