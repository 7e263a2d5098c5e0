/**
 * Values user functions make, not only the source, must reach the next stage (and the checkpoint)
 * as they were made, or fail their record whole with a reason: a string holding a lone surrogate
 * (UTF-8 has no form for it), a timer at a time the engine cannot keep, and job options beyond the
 * event-time range are refused.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, EventTimeSessionWindows, job, SlidingEventTimeWindows, TumblingEventTimeWindows, WatermarkStrategies } from '../api/index.js';
import { MAX_EVENT_TIME } from '../api/graph.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface In {
  k: string;
  ts: number;
  s?: string;
  at?: number;
}

/** records cross the test source as JSON (NaN would arrive as null): the bad times by key */
const timeOf = (v: In): number => ({ nan: Number.NaN, inf: Number.POSITIVE_INFINITY } as Record<string, number>)[v.k] ?? v.at!;

const reasons = (r: MemoryJobRunner) => r.deadLetters().map((l) => l.reason);

describe('values made by user functions', () => {
  it('a map whose result holds a lone surrogate fails its record (a dead letter), not a result changed on the wire', async () => {
    const j = job('user-surrogate-map');
    j.source<In>({ name: 'in', shards: 1, timestamp: (v) => v.ts })
      .map((v) => ({ ...v, s: v.s === 'bad' ? '\udc00' : v.s }))
      .keyBy((v) => v.k)
      .reduce((a) => a)
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    r.produce('in', [
      { k: 'a', ts: 0, s: 'bad' },
      { k: 'b', ts: 0, s: 'caf\u00e9 \ud83d\ude00' },
    ]);
    await r.drain();
    // without the check the first reached the reduce with s = "\ufffd\ufffd\ufffd"
    expect(r.published<In>('out')).toEqual([{ k: 'b', ts: 0, s: 'caf\u00e9 \ud83d\ude00' }]);
    expect(reasons(r)).toHaveLength(1);
    expect(reasons(r)[0]).toMatch(/RangeError: the string "\\udc00" holds a lone surrogate, which UTF-8 cannot carry/);
  });

  it('a key selector returning a lone surrogate fails its record: its state row would come back from a checkpoint under another key', async () => {
    const j = job('user-surrogate-key');
    j.source<In>({ name: 'in', shards: 1, timestamp: (v) => v.ts })
      // half of an emoji: the record itself is well formed, its key is not
      .keyBy((v) => v.k.slice(0, 1))
      .reduce((a) => a)
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    r.produce('in', [
      { k: '\ud83d\ude00', ts: 0 },
      { k: 'x', ts: 0 },
    ]);
    await r.drain();
    expect(r.published<In>('out')).toEqual([{ k: 'x', ts: 0 }]);
    expect(reasons(r)).toHaveLength(1);
    expect(reasons(r)[0]).toMatch(/the key selector returned a key UTF-8 cannot carry: the string "\\ud83d" holds a lone surrogate/);
  });

  it('timer times are whole ms (floored, as event times); a non-finite or out-of-range one fails its record instead of holding the job', async () => {
    const j = job('user-timer-times');
    j.source<In>({ name: 'in', shards: 1, timestamp: (v) => v.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
      .keyBy((v) => v.k)
      .process<string>({
        processElement(v, ctx) {
          ctx.timerService.registerEventTimeTimer(timeOf(v));
        },
        onTimer(time, ctx, out) {
          out.collect(`${String(ctx.key)}@${time}`);
        },
      })
      .sinkTo(collectSink('fired'));
    const r = new MemoryJobRunner(j);
    r.produce('in', [
      { k: 'frac', ts: 0, at: 10.7 },
      { k: 'nan', ts: 0 },
      { k: 'inf', ts: 0 },
      { k: 'far', ts: 0, at: 2 ** 53 },
      { k: 'edge', ts: 0, at: MAX_EVENT_TIME - 1 },
    ]);
    await r.drain();
    r.endOfInput();
    await r.drain();
    expect(r.published<string>('fired').sort()).toEqual([`edge@${MAX_EVENT_TIME - 1}`, 'frac@10']);
    const bad = reasons(r).sort();
    expect(bad).toHaveLength(3);
    expect(bad.join('\n')).toMatch(/registerEventTimeTimer\(NaN\): a timer's time must be a finite number of ms within ±1125899906842624/);
    expect(bad.join('\n')).toMatch(/registerEventTimeTimer\(Infinity\)/);
    expect(bad.join('\n')).toMatch(/registerEventTimeTimer\(9007199254740992\)/);
  });

  it('a processing-time timer at a non-finite time fails its record', async () => {
    const j = job('user-processing-timer');
    j.source<In>({ name: 'in', shards: 1, timestamp: (v) => v.ts })
      .keyBy((v) => v.k)
      .process<string>({
        processElement(v, ctx, out) {
          ctx.timerService.registerProcessingTimeTimer(timeOf(v));
          out.collect(v.k);
        },
      })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    r.produce('in', [
      { k: 'nan', ts: 0 },
      { k: 'ok', ts: 0, at: 1 },
    ]);
    await r.drain();
    expect(r.published<string>('out')).toEqual(['ok']);
    expect(reasons(r).join('\n')).toMatch(/registerProcessingTimeTimer\(NaN\)/);
  });
});

describe('job options beyond the event-time range', () => {
  it('a watermark idle timeout that is not a whole number of ms is refused, naming the source and field', () => {
    const source = (idleTimeoutMs: number) =>
      job('idle').source<In>({ name: 'in', timestamp: (v) => v.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0, { idleTimeoutMs }) });
    for (const t of [Number.NaN, -1, 1.5, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => source(t)).toThrow(/source in: watermarks.idleTimeoutMs must be a whole number of ms from 0 to 1125899906842624/);
    }
    for (const t of [0, 30_000, MAX_EVENT_TIME]) expect(() => source(t)).not.toThrow();
  });

  it('window sizes, slides, gaps, offsets and lateness beyond the event-time range are refused', () => {
    const keyed = () => job('w').source<In>({ name: 'in', timestamp: (v) => v.ts }).keyBy((v) => v.k);
    expect(() => keyed().window(TumblingEventTimeWindows.of(2 ** 51))).toThrow(/sizeMs must be a positive integer of ms up to 1125899906842624/);
    expect(() => keyed().window(SlidingEventTimeWindows.of(1000, 2 ** 53))).toThrow(/slideMs/);
    expect(() => keyed().window(EventTimeSessionWindows.withGap(2 ** 51))).toThrow(/gapMs/);
    expect(() => keyed().window(TumblingEventTimeWindows.of(1000, 0.5))).toThrow(/offsetMs must be an integer/);
    expect(() => keyed().window(TumblingEventTimeWindows.of(1000), { allowedLatenessMs: Number.NaN })).toThrow(/allowedLatenessMs/);
    expect(() => keyed().window(TumblingEventTimeWindows.of(MAX_EVENT_TIME, 5), { allowedLatenessMs: 10 })).not.toThrow();
  });
});
