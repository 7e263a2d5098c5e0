import { describe, expect, it } from 'vitest';
import { mergedOutsideTheJob, mergeParents, type ParentHandover, type ParentShare } from './parent-handover.js';

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
  it('parents of a merge made by the job are in one epoch: parents in two epochs are refused', () => {
    expect(() => mergeParents('s1:c', [parent('s1:a', 2, 1), parent('s1:b', 3, 1)])).toThrow(/epochs 2 and 3/);
  });

  it('source shards merged outside the job: one parent may have put barrier 3 out and the other not; the child goes on in the later epoch', () => {
    const s = mergeParents('s0:c', [parent('s0:a', 2, 1), parent('s0:b', 3, 4)], { sourceMerge: true });
    expect(s.epoch).toBe(3);
    expect(s.generation).toBe(5);
  });

  it("a merge of source shards is the job's own when the checkpoint its parents ended at announced the stage's reshard", () => {
    expect(mergedOutsideTheJob([parent('s0:a', 3, 1, [0]), parent('s0:b', 3, 1, [0])], 0)).toBe(false);
    expect(mergedOutsideTheJob([parent('s0:a', 2, 1), parent('s0:b', 3, 1)], 0)).toBe(true);
    // a reshard of another stage's stream says nothing about this one's
    expect(mergedOutsideTheJob([parent('s0:a', 3, 1, [1]), parent('s0:b', 3, 1, [1])], 0)).toBe(true);
  });
});
