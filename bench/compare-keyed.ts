/**
 * The `handler` (or `window`) part's keyed stage of two checkouts in one process, taking turns round by round
 * (a round: the data batches of one checkpoint interval, then its barrier), with the fair loop's
 * turn after both, so that all three see the same moments of a loaded machine. Each checkout runs
 * its own modules (engine and bench) on the same job, input shape and ports as the `handler` part.
 * It runs two passes of `rounds` rounds, the second with the checkouts' places swapped (the one in
 * the second place ran 5–10 % faster when a checkout was run against a copy of itself).
 * Prints each checkout's wall and CPU time of its data batches and of its checkpoints, the fair
 * loop's, and the second checkout's time ÷ the first's as the geometric mean of the two passes:
 * summed over a pass, as the median of its rounds, and over its fastest tenth of the rounds.
 *
 *   npx tsx bench/compare-keyed.ts DIR_BEFORE DIR_AFTER [rounds=30] [count|window]
 *
 * (`window`: the `window` part's stage instead, the tumbling window job against its fair loop)
 *
 * (a checkout of the commit before, e.g. `git worktree add --detach /tmp/before <commit>`, with a
 * node_modules link). It writes no results.
 */
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import type { KinesisStreamEvent } from 'aws-lambda';
import type * as Operator from '../functions/operator.js';
import type * as Planner from '../shared/plan/planner.js';
import type * as Runner from '../shared/runtime/stage-runner.js';
import type { OutgoingRecord, RuntimePorts } from '../shared/runtime/ports.js';
import type * as Fair from './fair-loops.js';
import type * as Handler from './handler.js';
import type * as Jobs from './jobs.js';
import type * as Input from './stage1-input.js';

const [a, b] = [process.argv[2], process.argv[3]];
if (!a || !b) throw new Error('usage: compare-keyed.ts DIR_BEFORE DIR_AFTER [rounds] [count|window]');
const rounds = Number(process.argv[4] ?? 30);
if (!Number.isInteger(rounds) || rounds < 4) throw new Error('rounds: an integer ≥ 4');
const path = process.argv[5] ?? 'count';
if (path !== 'count' && path !== 'window') throw new Error(`path: count or window, not ${path}`);
const WARMUP = 2;
const shape = { eventsPerPacket: 500, packetsPerBatch: 10, batchesPerRound: 4 };

const imp = async <T>(dir: string, file: string) => (await import(pathToFileURL(resolve(dir, file)).href)) as T;

interface Side {
  readonly run: (e: KinesisStreamEvent) => Promise<unknown>;
  readonly rounds: ReadonlyArray<{ readonly batches: KinesisStreamEvent[]; readonly barrier: KinesisStreamEvent }>;
  readonly sent: OutgoingRecord[];
  /** per timed round: data wall, data CPU, checkpoint wall, checkpoint CPU (ms) */
  readonly times: number[][];
}

async function side(dir: string): Promise<Side> {
  const handler = await imp<typeof Handler>(dir, 'bench/handler.ts');
  const jobs = await imp<typeof Jobs>(dir, 'bench/jobs.ts');
  const input = await imp<typeof Input>(dir, 'bench/stage1-input.ts');
  const planner = await imp<typeof Planner>(dir, 'shared/plan/planner.ts');
  const runner = await imp<typeof Runner>(dir, 'shared/runtime/stage-runner.ts');
  const operator = await imp<typeof Operator>(dir, 'functions/operator.ts');
  const job = path === 'count' ? jobs.keyedCountEmitJob() : jobs.windowEmitJob();
  const plan = planner.planJob(job);
  // the `handler` (or `window`) part's input and ports (bench/handler.ts), with its seed
  const encoded = input.encodeRounds(jobs.makeEvents(20_000 * rounds, 10_000, path === 'count' ? 7 : 3), shape, plan.maxParallelism, plan.stages.map((s) => s.parallelism));
  const sent: OutgoingRecord[] = [];
  const loaded = input.loadRounds(job, encoded, (p): RuntimePorts => {
    const store = handler.benchStateStore();
    return {
      ...p,
      state: { getRows: (ids) => store.getRows(ids), applyRows: (n, f, rows) => store.applyRows(n, f, rows) },
      writer: {
        async putAll(_stream, records) {
          for (const r of records) sent.push(r);
        },
      },
    };
  });
  const r = runner.createStageRunner(loaded);
  return {
    run: (e) => operator.handleKinesisBatch(r, e),
    rounds: loaded.rounds.map((x) => ({ batches: x.batches.map((bt) => handler.kinesisEvent(loaded.stream, loaded.shardId, bt)), barrier: handler.kinesisEvent(loaded.stream, loaded.shardId, x.barrier) })),
    sent,
    times: [],
  };
}

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** One pass: both sides and the fair loop take turns for `rounds` rounds; per timed round, each side's times and the fair loop's. */
async function pass(before: Side, after: Side): Promise<{ before: number[][]; after: number[][]; fair: number[][] }> {
  const fairs = await imp<typeof Fair>(b!, 'bench/fair-loops.ts');
  const fair = path === 'count' ? new fairs.FairCount(128) : new fairs.FairWindow(128);
  const fairTimes: number[][] = [];
  for (let r = 0; r < rounds; r++) {
    for (const s of r % 2 ? [after, before] : [before, after]) {
      const round = s.rounds[r]!;
      const c0 = cpu();
      const t0 = performance.now();
      for (const e of round.batches) await s.run(e);
      const c1 = cpu();
      const t1 = performance.now();
      await s.run(round.barrier);
      const c2 = cpu();
      const t2 = performance.now();
      s.sent.length = 0;
      if (r >= WARMUP) s.times.push([t1 - t0, c1 - c0, t2 - t1, c2 - c1]);
    }
    const round = after.rounds[r]!;
    const c0 = cpu();
    const t0 = performance.now();
    for (const e of round.batches) fair.handle(e);
    fair.handle(round.barrier);
    if (r >= WARMUP) fairTimes.push([performance.now() - t0, cpu() - c0]);
    fair.sent.length = 0;
  }
  return { before: before.times, after: after.times, fair: fairTimes };
}

// the checkout in the second place of a pass ran 5–10 % faster than the first when a checkout was
// run against a copy of itself (whichever was set up first): the second pass swaps the places, and
// the ratios are the geometric mean of the two passes
const first = await pass(await side(a), await side(b));
const swapped = await pass(await side(b), await side(a));
const second = { before: swapped.after, after: swapped.before, fair: swapped.fair };

const sum = (xs: readonly number[]) => xs.reduce((p, q) => p + q, 0);
const col = (t: readonly number[][], i: number) => t.map((x) => x[i]!);
const median = (xs: readonly number[]) => [...xs].sort((p, q) => p - q)[xs.length >> 1]!;
const fastest = (xs: readonly number[]) => sum([...xs].sort((p, q) => p - q).slice(0, Math.max(1, Math.floor(xs.length / 10))));
const ms = (x: number) => `${x.toFixed(0)} ms`;
const events = 2 * (rounds - WARMUP) * 20_000;
console.log(`${path}: ${events} events timed per checkout (two passes), 20 k per checkpoint, 10 k keys`);
const all = { before: [...first.before, ...second.before], after: [...first.after, ...second.after], fair: [...first.fair, ...second.fair] };
for (const name of ['before', 'after'] as const) {
  const t = all[name];
  console.log(`${name.padEnd(6)}: data ${ms(sum(col(t, 0)))} wall, ${ms(sum(col(t, 1)))} CPU; checkpoints ${ms(sum(col(t, 2)))} wall, ${ms(sum(col(t, 3)))} CPU; fair loop ÷ total wall ${(sum(col(all.fair, 0)) / (sum(col(t, 0)) + sum(col(t, 2)))).toFixed(3)}`);
}
console.log(`fair  : ${ms(sum(col(all.fair, 0)))} wall, ${ms(sum(col(all.fair, 1)))} CPU`);
const geo = (f: (p: { before: number[][]; after: number[][] }) => number) => Math.sqrt(f(first) * f(second));
// (the places' own difference cancels: the first pass has it in after ÷ before, the second in before ÷ after)
const ratio = (i: number) => {
  const total = geo((p) => sum(col(p.after, i)) / sum(col(p.before, i)));
  const med = geo((p) => median(p.after.map((r, k) => r[i]! / p.before[k]![i]!)));
  const fast = geo((p) => fastest(col(p.after, i)) / fastest(col(p.before, i)));
  return `${total.toFixed(3)} (median of rounds ${med.toFixed(3)}, fastest tenth ${fast.toFixed(3)})`;
};
console.log(`after ÷ before, geometric mean of the two passes: data wall ${ratio(0)}; data CPU ${ratio(1)}; checkpoints wall ${ratio(2)}; checkpoints CPU ${ratio(3)}`);
