import { describe, expect, it } from 'vitest';
import { SourceWindow } from './source-window.js';

describe('SourceWindow', () => {
  it('frees room only at the barrier of a checkpoint that crossed, the newest first', async () => {
    const crossed = new Set<number>();
    const asked: number[] = [];
    const w = new SourceWindow(5, async (n) => {
      asked.push(n);
      return crossed.has(n);
    });
    for (let i = 0; i < 3; i++) w.count();
    w.barrier(1); // at 3
    expect(await w.room()).toBe(2);
    expect(asked).toEqual([]); // room left: no read
    w.count();
    w.count();
    w.barrier(2); // at 5
    expect(await w.room()).toBe(0);
    expect(asked).toEqual([2, 1]);
    crossed.add(1);
    expect(await w.room()).toBe(3); // 2 since barrier 1
    expect(w.inFlight).toBe(2);
    crossed.add(2);
    expect(await w.room()).toBe(3); // room left: barrier 2 is not asked for
    for (let i = 0; i < 3; i++) w.count();
    asked.length = 0;
    expect(await w.room()).toBe(2); // barrier 2 crossed: 3 since it
    expect(asked).toEqual([2]);
    expect(w.inFlight).toBe(3);
  });

  it('an aborted checkpoint frees nothing; the next one that crosses does', async () => {
    const crossed = new Set<number>([4]);
    const w = new SourceWindow(2, async (n) => crossed.has(n));
    w.count();
    w.count();
    w.barrier(3); // aborted: never crosses
    expect(await w.room()).toBe(0);
    w.barrier(4); // at the same, unchanged read position
    expect(await w.room()).toBe(2);
  });
});
