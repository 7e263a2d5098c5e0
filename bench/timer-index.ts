/**
 * The timer index alone in the `window` part's pattern, two checkouts' `TimerIndex` in one process,
 * taking turns: 40 windows of 10 k registrations over 10 k uniform keys (the part's events), each
 * window fired whole just after the next began (200 registrations in), and a snapshot's rows
 * (`toJSON`) before every second firing, as the part's checkpoints come. Prints each checkout's CPU for registering, firing and snapshots per run of 40
 * windows (the total over all turns ÷ turns), and the second's ÷ the first's.
 *
 *   npx tsx bench/timer-index.ts DIR_BEFORE DIR_AFTER [turns=16] [keys=10000]
 *
 * (a checkout of the commit before, e.g. `git worktree add --detach /tmp/before <commit>`). It
 * writes no results.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as Timers from '../shared/runtime/timers.js';
import { makeEvents } from './jobs.js';

const dirs = [process.argv[2], process.argv[3]];
if (!dirs[0] || !dirs[1]) throw new Error('usage: timer-index.ts DIR_BEFORE DIR_AFTER [turns] [keys]');
const TURNS = Number(process.argv[4] ?? 16);
const KEYS = Number(process.argv[5] ?? 10_000);
const WINDOWS = 40;
const PER_WINDOW = 10_000;

// the `window` part's keys (its events, seed 3), each a string of its own, as the payload decoder
// makes them: the guide's keys and a bucket's are then equal, not the same
const keys = makeEvents(WINDOWS * PER_WINDOW, KEYS, 3).map((e) => e.k.split('').join(''));

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
interface Times {
  register: number;
  fire: number;
  snapshot: number;
}

function run(Index: typeof Timers.TimerIndex): Times {
  const idx = new Index();
  const t: Times = { register: 0, fire: 0, snapshot: 0 };
  const start = cpu();
  for (let w = 0; w < WINDOWS; w++) {
    const end = (w + 1) * PER_WINDOW - 1;
    for (let i = 0; i < PER_WINDOW; i++) {
      idx.register('event-time', 'window', keys[w * PER_WINDOW + i]!, 0, end);
      if (i !== 200 || w === 0) continue;
      // the last window fires just after this one began; a checkpoint before every second firing
      let c = cpu();
      if (w % 2 === 0) {
        idx.toJSON();
        t.snapshot += cpu() - c;
        c = cpu();
      }
      const upTo = w * PER_WINDOW - 1;
      idx.peekDue('event-time', upTo);
      while (idx.popDue('event-time', upTo));
      t.fire += cpu() - c;
    }
  }
  t.register = cpu() - start - t.fire - t.snapshot;
  return t;
}

const mods = await Promise.all(dirs.map(async (d) => (await import(pathToFileURL(resolve(d!, 'shared/runtime/timers.ts')).href)) as typeof Timers));
const total: Times[] = dirs.map(() => ({ register: 0, fire: 0, snapshot: 0 }));
for (let r = 0; r < TURNS; r++) {
  for (const i of r % 2 ? [1, 0] : [0, 1]) {
    const x = run(mods[i]!.TimerIndex);
    total[i]!.register += x.register;
    total[i]!.fire += x.fire;
    total[i]!.snapshot += x.snapshot;
  }
}
const ms = (x: number) => (x / TURNS).toFixed(1);
for (let i = 0; i < 2; i++) console.log(`${dirs[i]}: register ${ms(total[i]!.register)} ms, fire ${ms(total[i]!.fire)} ms, snapshots ${ms(total[i]!.snapshot)} ms of CPU per ${WINDOWS} windows`);
const [a, b] = total as [Times, Times];
const q = (x: number, y: number) => (y / x).toFixed(3);
console.log(`second ÷ first: register ${q(a.register, b.register)}, fire ${q(a.fire, b.fire)}, snapshots ${q(a.snapshot, b.snapshot)}, fire + snapshots ${q(a.fire + a.snapshot, b.fire + b.snapshot)} (total over ${TURNS} turns each)`);
