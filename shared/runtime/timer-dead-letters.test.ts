/**
 * Poison handling of timers (dead-letter policy): a timer callback that throws goes to the dead
 * letters with its key and time, like a record that makes user code throw — never only a counter.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, WatermarkStrategies } from '../api/index.js';
import type { CountingTelemetry } from '../adapters/telemetry.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface Ev {
  readonly key: string;
  readonly ts: number;
}

describe('timer callbacks that throw', () => {
  it('are dead-lettered with their key, key group and time, and counted (timer dead letters)', async () => {
    const j = job('timer-poison', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<Ev>({ name: 'ev', shards: 1, timestamp: (e) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
      .keyBy((e) => e.key, { parallelism: 2 })
      .process<{ key: string; at: number }>({
        processElement(e, ctx) {
          ctx.timerService.registerEventTimeTimer(e.ts + 10);
        },
        onTimer(time, ctx, out) {
          if (ctx.key === 'bad') throw new Error('the timer of bad fails');
          out.collect({ key: String(ctx.key), at: time });
        },
      })
      .sinkTo(collectSink('fired'));
    const r = new MemoryJobRunner(j, { batchSize: 3 });
    r.produce('ev', [
      { key: 'good', ts: 1_000 },
      { key: 'bad', ts: 1_000 },
      { key: 'good', ts: 5_000 },
    ]);
    await r.drain();
    r.endOfInput();
    await r.drain();
    expect(r.published<{ key: string; at: number }>('fired').map((o) => `${o.key}@${o.at}`).sort()).toEqual(['good@1010', 'good@5010']);
    const letters = r.deadLetters();
    expect(letters).toHaveLength(1);
    expect(letters[0]!.reason).toContain('key "bad"');
    expect(letters[0]!.reason).toContain('event-time timer at 1010');
    expect(letters[0]!.reason).toContain('the timer of bad fails');
    expect(JSON.parse(new TextDecoder().decode(letters[0]!.data))).toMatchObject({ timer: { key: 'bad', time: 1010, domain: 'event-time' } });
    expect(letters[0]!.subSequence).toBeLessThan(0);
    const counters = r.mem.telemetry as CountingTelemetry;
    expect(counters.get('DeadLetters')).toBe(1);
    expect(counters.get('TimerFailures')).toBe(1);
  });
});
