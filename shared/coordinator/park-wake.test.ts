/**
 * Parking and waking the idle coordinator (loop.ts, wake.ts) on the twins: the park leaves its token
 * on every source lease item, and a source batch's position write returns it, so a batch learns
 * whether the coordinator is parked without a read of its own.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { MemoryCheckpointStore, memoryLoopPorts, type MemoryWorkflow } from '../adapters/memory/checkpoint-store.js';
import type { PortOp } from '../adapters/memory/memory-faults.js';
import { prng } from '../adapters/memory/memory-ports.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import type { BatchOutcome } from '../runtime/stage-runner.js';
import { CoordinatorLoop, type BeginOutput } from './loop.js';
import { CoordinatorWake, LOOP_ERRORS } from './wake.js';

function setup(seed = 1) {
  const j = job('park', { maxParallelism: 8 });
  j.source<{ k: string }>({ name: 'in', shards: 2 }).sinkTo(collectSink('out'));
  let wake: CoordinatorWake | undefined;
  const r = new MemoryJobRunner(j, { seed, afterBatch: (o: BatchOutcome) => (o.wake && wake ? wake.afterBatch(o.instanceId, o.wake) : Promise.resolve()) });
  // the loop's store with the twins' fault hooks: its calls are counted and interleaved too
  const ports = memoryLoopPorts(r.mem, new MemoryCheckpointStore(r.mem.control, r.mem.faults));
  wake = new CoordinatorWake(ports.store, ports.workflow);
  const loop = new CoordinatorLoop({ plan: r.plan, names: r.names, ports, run: (input) => r.coordinator.run(input), idle: true, pauseMs: 1000 });
  const ops: PortOp[] = [];
  r.mem.faults.before = async (op) => {
    ops.push(op);
  };
  return { r, ports, loop, ops, workflow: ports.workflow as MemoryWorkflow };
}

/** Input on both shards, processed and committed: the next begin finds the job quiet. */
async function committedInput(r: MemoryJobRunner, keys: string[]): Promise<void> {
  r.produce('in', keys.map((k) => ({ k })));
  await r.runUntilIdle();
  await r.checkpoint();
}

const idleReads = (ops: readonly PortOp[]) => ops.filter((op) => op === 'checkpoints.idleToken' || op === 'checkpoints.takeIdle').length;

describe('parking the idle coordinator on the source leases', () => {
  it('a source batch after the park wakes it through its position write, and no batch reads the parked token', async () => {
    const { r, ports, loop, ops, workflow } = setup();
    await committedInput(r, ['a', 'b', 'c', 'd', 'e', 'f']);
    // busy: batches with input while the coordinator is not parked touch neither the idle item nor the token
    ops.length = 0;
    for (let i = 0; i < 5; i++) {
      r.produce('in', [{ k: `x${i}` }, { k: `y${i}` }]);
      await r.runUntilIdle();
    }
    expect(ops.filter((op) => op === 'control.commitPosition').length).toBeGreaterThanOrEqual(5);
    expect(idleReads(ops)).toBe(0);
    await r.checkpoint();

    expect(await loop.run({ action: 'begin', taskToken: 'park-1' })).toEqual({ idle: true });
    expect(await ports.store.idleToken()).toBe('park-1');
    ops.length = 0;
    r.produce('in', [{ k: 'late' }]);
    await r.runUntilIdle();
    expect(workflow.failed).toEqual([{ taskToken: 'park-1', error: LOOP_ERRORS.inputArrived, cause: 'a source stage received input' }]);
    // one conditional take, no read of the idle item; the mark is gone from the lease that woke it
    expect(ops.filter((op) => op === 'checkpoints.idleToken')).toEqual([]);
    expect(ops.filter((op) => op === 'checkpoints.takeIdle')).toHaveLength(1);
    // the other shard's mark is stale now: its next batch with input costs one failed take, then none
    await r.checkpoint();
    ops.length = 0;
    for (let i = 0; i < 4; i++) {
      r.produce('in', [{ k: `z${i}` }, { k: `w${i}` }, { k: `v${i}` }]);
      await r.runUntilIdle();
    }
    expect(ops.filter((op) => op === 'checkpoints.takeIdle').length).toBeLessThanOrEqual(1);
    expect(workflow.failed).toHaveLength(1);
  });

  it('a batch that died after its position write leaves the token on its lease: the retry wakes the coordinator', async () => {
    const { r, loop, workflow } = setup();
    await committedInput(r, ['a', 'b', 'c', 'd']);
    expect(await loop.run({ action: 'begin', taskToken: 'park-1' })).toEqual({ idle: true });
    let died = false;
    r.mem.faults.after = async (op) => {
      if (op === 'control.commitPosition' && !died) {
        died = true;
        throw new Error('the function dies after its position write');
      }
    };
    r.produce('in', [{ k: 'late' }]);
    await expect(r.runUntilIdle()).rejects.toThrow('dies after its position write');
    expect(workflow.failed).toEqual([]);
    // the mapping hands the batch over again: its position is committed already, the token is still on the lease
    await r.runUntilIdle();
    expect(workflow.failed.map((f) => f.taskToken)).toEqual(['park-1']);
  });

  it('an instance newer than the park (a reshard\'s child) reads the parked token on its first position', async () => {
    const { r, loop, workflow, ops } = setup();
    await committedInput(r, ['a', 'b', 'c', 'd']);
    expect(await loop.run({ action: 'begin', taskToken: 'park-1' })).toEqual({ idle: true });
    const stream = r.names.streamOf(r.plan.stages[0]!);
    r.mem.kinesis.reshard(stream, 3);
    ops.length = 0;
    r.produce('in', [{ k: 'x' }, { k: 'y' }, { k: 'z' }]);
    await r.runUntilIdle();
    expect(workflow.failed.map((f) => f.taskToken)).toEqual(['park-1']);
    expect(ops.filter((op) => op === 'checkpoints.idleToken').length).toBeGreaterThan(0);
  });

  it('a batch holding only the end of a bounded input wakes the parked coordinator, and the job finishes', async () => {
    const { r, loop, workflow } = setup();
    await committedInput(r, ['a', 'b', 'c', 'd']);
    expect(await loop.run({ action: 'begin', taskToken: 'park-1' })).toEqual({ idle: true });
    // the last batch of each shard is the end record alone
    r.endOfInput();
    await r.runUntilIdle();
    expect(workflow.failed.map((f) => f.taskToken)).toEqual(['park-1']);
    // woken, the coordinator finds the end unread by any checkpoint: it takes one, whose commit finishes the job
    const begun = await loop.run({ action: 'begin', taskToken: 'begin-2' });
    expect(begun).toMatchObject({ ckpt: { checkpointId: expect.any(Number) } });
    const n = (begun as BeginOutput).ckpt.checkpointId;
    await r.coordinator.await(n, 'await-2');
    await r.runUntilIdle();
    await r.coordinator.commit(n);
    expect(await r.coordinator.jobStatus()).toEqual({ finishedAt: n, stoppedAt: n });
  });

  it('a park racing a source batch never leaves the coordinator parked while input waits (seeded interleavings)', async () => {
    let parkedWithInput = 0;
    let woken = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const { r, loop, workflow } = setup(seed);
      await committedInput(r, ['a', 'b', 'c', 'd']);
      // every store and stream call yields a seeded number of turns: the park and the batch interleave
      const rnd = prng(seed);
      r.mem.faults.before = async () => {
        for (let i = Math.floor(rnd() * 4); i > 0; i--) await new Promise<void>((res) => setImmediate(res));
      };
      const token = `park-${seed}`;
      const [begun] = await Promise.all([
        loop.run({ action: 'begin', taskToken: token }),
        (async () => {
          for (let i = Math.floor(rnd() * 6); i > 0; i--) await new Promise<void>((res) => setImmediate(res));
          r.produce('in', [{ k: `late-${seed}` }]);
          await r.runUntilIdle();
        })(),
      ]);
      r.mem.faults.before = undefined;
      const failed = workflow.failed.some((f) => f.taskToken === token);
      if (failed) woken++;
      const stillParked = (begun as { idle?: boolean }).idle === true && !failed;
      if (stillParked && !(await loop.quiet())) parkedWithInput++;
    }
    expect(parkedWithInput).toBe(0);
    expect(woken).toBeGreaterThan(0);
  });
});
