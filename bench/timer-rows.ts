/**
 * A checkpoint's timer rows written again (a timer is written into every delta until it fires):
 * from plain rows (`TimerIndex.toJSON`) against from the bytes kept on each timer
 * (`TimerIndex.snapshotRows`), in one process, taking turns. 6 300 timers of one window, the
 * `window` part's count at a checkpoint. (That part's own checkpoints write each timer once: its
 * checkpoints are 20 s of event time apart, its windows 10 s long.)
 *
 *   npx tsx bench/timer-rows.ts
 *
 * It writes no results.
 */
import { encodeDelta } from '../shared/codec/snapshot.js';
import { TimerIndex } from '../shared/runtime/timers.js';

const idx = new TimerIndex();
for (let i = 0; i < 6300; i++) idx.add({ domain: 'event-time', operatorId: 'window', key: `user-${(i * 7919) % 10000}`, keyGroup: i % 128, time: 1_700_000_010_000 });
const base = { channels: [], watermark: null, processingTime: 0, source: null };
const ways = { plain: () => encodeDelta([], { ...base, timers: idx.toJSON() }), kept: () => encodeDelta([], { ...base, timers: idx.snapshotRows() }) };
const ms: Record<keyof typeof ways, number[]> = { plain: [], kept: [] };
for (let r = 0; r < 12; r++) {
  for (const name of ['plain', 'kept'] as const) {
    const start = process.cpuUsage();
    for (let i = 0; i < 50; i++) ways[name]();
    const used = process.cpuUsage(start);
    ms[name].push((used.user + used.system) / 50 / 1000);
  }
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!.toFixed(2);
console.log(`6 300 timers written again: plain rows ${median(ms.plain)} ms, kept bytes ${median(ms.kept)} ms of CPU per delta (median of 12 turns of 50)`);
