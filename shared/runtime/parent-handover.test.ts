import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { createMemoryPorts } from '../adapters/memory/memory-ports.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import { mergedOutsideTheJob, mergeParents, type ParentHandover, type ParentShare } from './parent-handover.js';
import { StageInstance } from './stage-instance.js';

const parent = (id: string, epoch: number, generation: number, reshard: readonly number[] = []): ParentShare => ({
  handover: {
    id,
    epoch,
    settled: true,
    reshard,
    generation,
    topology: [2, 2],
    processingTime: 0,
    finished: false,
    broadcast: [],
    dirtyRows: [],
    timers: [],
    watermark: { watermark: 0, channels: [], source: undefined },
    seen: new Map(),
    ended: [],
    operatorLists: [],
  } as unknown as ParentHandover,
  childIndex: 0,
  children: 1,
});

describe('a child shard starting from its parents', () => {
  it("takes its parents' timers in one order, whichever parent comes first (the order it fires them in)", () => {
    const withTimers = (id: string, timers: ParentHandover['timers']): ParentShare => {
      const p = parent(id, 2, 1);
      return { ...p, handover: { ...p.handover, timers } };
    };
    const a = withTimers('s1:a', [
      ['event-time', 'w', 'z', 1, 9],
      ['event-time', 'w', 'b', 1, 9],
    ]);
    const b = withTimers('s1:b', [
      ['event-time', 'w', 'm', 2, 9],
      ['event-time', 'w', 'a', 2, 4],
    ]);
    const keys = (ps: ParentShare[]) => mergeParents('s1:c', ps).timers.map((t) => t[2]);
    expect(keys([a, b])).toEqual(['a', 'b', 'm', 'z']);
    expect(keys([b, a])).toEqual(['a', 'b', 'm', 'z']);
  });

  it('parents of a merge made by the job are in one epoch: parents in two epochs are refused', () => {
    expect(() => mergeParents('s1:c', [parent('s1:a', 2, 1), parent('s1:b', 3, 1)])).toThrow(/epochs 2 and 3/);
  });

  it('source shards merged outside the job: one parent may have put barrier 3 out and the other not; the child goes on in the later epoch', () => {
    const s = mergeParents('s0:c', [parent('s0:a', 2, 1), parent('s0:b', 3, 4)], { sourceStage: 0 });
    expect(s.epoch).toBe(3);
    expect(s.generation).toBe(5);
  });

  it("a merge of source shards is the job's own when the checkpoint its parents ended at announced the stage's reshard", () => {
    expect(mergedOutsideTheJob([parent('s0:a', 3, 1, [0]), parent('s0:b', 3, 1, [0])], 0)).toBe(false);
    expect(mergedOutsideTheJob([parent('s0:a', 2, 1), parent('s0:b', 3, 1)], 0)).toBe(true);
    // a reshard of another stage's stream says nothing about this one's
    expect(mergedOutsideTheJob([parent('s0:a', 3, 1, [1]), parent('s0:b', 3, 1, [1])], 0)).toBe(true);
  });

  describe('at a stage instance (StageInstance.inherit)', () => {
    const j = job('inherit', { maxParallelism: 8 });
    j.source<{ k: string }>({ name: 'in', shards: 2 }).keyBy((x) => x.k, { parallelism: 2 }).process({ processElement() {} }).sinkTo(collectSink('out'));
    const plan = planJob(j);
    const names = resourceNames(plan, 'test');
    const child = (stage: number) => new StageInstance(j, plan, plan.stages[stage]!, 'shardId-000000000009', names, createMemoryPorts().ports);

    it("the job's own in-place merge of its source (announced by the parents' checkpoint) refuses parents in two epochs", () => {
      expect(() => child(0).inherit([parent('s0:a', 2, 1, [0]), parent('s0:b', 3, 1, [0])])).toThrow(/epochs 2 and 3/);
    });

    it('a merge of source shards made outside the job takes the later epoch; an inner stage’s merge still refuses two epochs', () => {
      const c = child(0);
      c.inherit([parent('s0:a', 2, 1), parent('s0:b', 3, 1)]);
      expect(c.epoch).toBe(3);
      expect(() => child(1).inherit([parent('s1:a', 2, 1), parent('s1:b', 3, 1)])).toThrow(/epochs 2 and 3/);
    });
  });
});
