/**
 * The source stage of two checkouts in one process, taking turns call by call, so that both see
 * the same moments of a loaded machine: each checkout's own modules (engine and bench), the
 * `source` part's job, input and ports (its `engineSide`), without a fair loop. Prints the
 * engine's events over CPU time of the timed rounds, per call, and the second checkout's rate ÷
 * the first's per turn.
 *
 *   npx tsx bench/compare-source.ts DIR_BEFORE DIR_AFTER [turns=8] [rounds=12]
 *
 * (a checkout of the commit before, e.g. `git archive <commit> | tar -x -C /tmp/before`, with a
 * node_modules link). It writes no results.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FULL_SIZE } from './handler.js';
import type * as Handler from './handler.js';

const [a, b] = [process.argv[2], process.argv[3]];
if (!a || !b) throw new Error('usage: compare-source.ts DIR_BEFORE DIR_AFTER [turns] [rounds]');
const turns = Number(process.argv[4] ?? 8);
const rounds = Number(process.argv[5] ?? 12);
if (!Number.isInteger(turns) || turns < 1 || !Number.isInteger(rounds) || rounds < 3) throw new Error('turns: an integer ≥ 1; rounds: an integer ≥ 3');
const load = async (dir: string) => {
  const handler = (await import(pathToFileURL(resolve(dir, 'bench/handler.ts')).href)) as Partial<typeof Handler>;
  if (!handler.engineSide || !handler.idleSide || !handler.measurePath) throw new Error(`${dir}: its bench/handler.ts has no engineSide (a checkout from before the sides)`);
  return handler as typeof Handler;
};
const sides = [await load(a), await load(b)];
// plain data, so this checkout's sizes drive both checkouts' stages
const spec: Handler.PathSpec = { ...FULL_SIZE, path: 'source', rounds, warmupRounds: 2 };
const rates: number[][] = [[], []];
for (let t = 0; t < turns; t++) {
  // alternate who goes first
  for (const s of t % 2 ? [1, 0] : [0, 1]) {
    const handler = sides[s]!;
    const f = await handler.measurePath(spec, { engine: handler.engineSide(spec), fair: handler.idleSide(rounds) });
    rates[s]!.push(f.engine.cpuEps);
  }
}
const k = (x: number) => (x / 1000).toFixed(0);
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
for (const [i, dir] of [a, b].entries()) console.log(`${dir}: engine k ev/s over CPU ${rates[i]!.map(k).join(' ')} (median ${k(median(rates[i]!))})`);
const ratio = rates[1]!.map((r, i) => r / rates[0]![i]!);
console.log(`after ÷ before, per turn: ${ratio.map((r) => r.toFixed(2)).join(' ')} (mean ${(ratio.reduce((x, y) => x + y, 0) / ratio.length).toFixed(3)})`);
