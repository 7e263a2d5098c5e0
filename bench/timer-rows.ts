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
// CPU of every turn summed, per delta: the total, not a median of turns
const cpuMs: Record<keyof typeof ways, number> = { plain: 0, kept: 0 };
const TURNS = 12;
const PER_TURN = 50;
for (let r = 0; r < TURNS; r++) {
  for (const name of ['plain', 'kept'] as const) {
    const start = process.cpuUsage();
    for (let i = 0; i < PER_TURN; i++) ways[name]();
    const used = process.cpuUsage(start);
    cpuMs[name] += (used.user + used.system) / 1000;
  }
}
const perDelta = (name: keyof typeof ways) => (cpuMs[name] / (TURNS * PER_TURN)).toFixed(2);
console.log(`6 300 timers written again: plain rows ${perDelta('plain')} ms, kept bytes ${perDelta('kept')} ms of CPU per delta (total CPU of ${TURNS} alternating turns of ${PER_TURN} deltas each)`);
