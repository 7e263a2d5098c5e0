/**
 * The `handler` (or `window`, or `source`) part's stage alone, for a profiler: the same job, input
 * shape and ports as `npm run bench -- --only handler` (or `window`, `source`), for more rounds and
 * without its fair loop (a loop that does nothing takes its turns), so that a profile holds the
 * engine's work and little else.
 *
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/profile-handler.ts [rounds=40] [count|window|source]
 *
 * Prints the engine's CPU of its data batches and of its checkpoints; it writes no results.
 */
import { engineSide, FULL_SIZE, idleSide, measurePath, type PathFigures, type PathSpec } from './handler.js';

const rounds = Number(process.argv[2] ?? 40);
if (!Number.isInteger(rounds) || rounds < 3) throw new Error(`rounds: an integer ≥ 3, not ${process.argv[2]}`);
const path = process.argv[3] ?? 'count';
if (path !== 'count' && path !== 'window' && path !== 'source') throw new Error(`path: count, window or source, not ${path}`);
// the bench's own part, in this process, longer; a fair side that does nothing takes its turns
const spec: PathSpec = { ...FULL_SIZE, path, rounds, warmupRounds: 2 };
const f: PathFigures = await measurePath(spec, { engine: engineSide(spec), fair: idleSide(rounds) });
const k = (eps: number) => `${(eps / 1000).toFixed(0)} k ev/s`;
console.log(
  `${path === 'source' ? 'source stage' : `keyed ${path}`}, ${f.engine.events} events timed: CPU ${f.engine.cpuMs.toFixed(0)} ms (${k(f.engine.cpuEps)}); data batches ${f.engineData.cpuMs.toFixed(0)} ms (${k(f.engineData.cpuEps)}); ${f.checkpoints.count} checkpoints ${f.checkpoints.cpuMs.toFixed(0)} ms`,
);
