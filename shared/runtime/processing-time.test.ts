/**
 * Processing time reaches a job through the coordinator's clock: each barrier carries it and each
 * source instance forwards it as a tick. Coordinator tasks run in environments whose clocks
 * disagree, so a later barrier can carry an earlier time; an instance keeps the later one. (An inner
 * instance also ignores an older tick; with every source ignoring older barriers and aligned channels
 * its ticks arrive in order anyway, so this file proves the source's rule, and
 * infra-tests/chaos/fault-kinds.test.ts the two together under skewed clocks.)
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import type { KeyedProcessFunction } from '../api/types.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface In {
  readonly user: string;
  readonly seq: number;
}
interface Out extends In {
  /** processing time the source stage's map saw */
  readonly sourcePt: number;
  /** processing time the keyed function saw */
  readonly keyedPt: number;
}

function ptJob() {
  const seen: KeyedProcessFunction<string, In & { sourcePt: number }, Out> = {
    processElement(x, ctx, out) {
      out.collect({ ...x, keyedPt: ctx.timerService.currentProcessingTime() });
    },
  };
  const j = job('pt', { maxParallelism: 8 });
  j.source<In>({ name: 'in', shards: 1 })
    .map((x, ctx) => ({ ...x, sourcePt: ctx.currentProcessingTime() }))
    .keyBy((x) => x.user, { parallelism: 1 })
    .process(seen, { name: 'seen' })
    .sinkTo(collectSink<Out>('out'));
  return j;
}

describe('processing time at an instance', () => {
  it('never goes back when a barrier carries an earlier coordinator time than one before it (a source ignores it, and so its records and ticks keep the later time)', async () => {
    // the coordinator's clock as its tasks read it: the second checkpoint's task runs 6 s behind
    const times = [10_000, 4_000, 30_000];
    let at = 0;
    const r = new MemoryJobRunner(ptJob(), { now: () => times[Math.min(at, times.length - 1)]! });
    let seq = 0;
    const batch = () => Array.from({ length: 4 }, () => ({ user: `u${seq % 2}`, seq: seq++ }));
    for (let ck = 0; ck < times.length; ck++) {
      r.produce('in', batch());
      await r.runUntilIdle();
      await r.checkpoint();
      at++;
    }
    r.produce('in', batch());
    await r.drain();
    const out = r.published<Out>('out').sort((a, b) => a.seq - b.seq);
    expect(out.map((o) => o.seq)).toEqual(Array.from({ length: seq }, (_, i) => i));
    const wentBack = (pick: (o: Out) => number) => out.filter((o, i) => i > 0 && pick(o) < pick(out[i - 1]!)).map((o) => `${o.seq}: ${pick(o)}`);
    expect(wentBack((o) => o.sourcePt)).toEqual([]);
    expect(wentBack((o) => o.keyedPt)).toEqual([]);
    // the earlier time was there to be ignored: records between barriers 2 and 3 kept barrier 1's time
    expect(out.filter((o) => o.seq >= 8 && o.seq < 12).map((o) => o.sourcePt)).toEqual([10_000, 10_000, 10_000, 10_000]);
    expect(out.at(-1)!.sourcePt).toBe(30_000);
  });
});
