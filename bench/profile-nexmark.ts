/**
 * One Nexmark query of the `nexmark` part, alone, for a profiler: the same job, input and ports as
 * `npm run bench -- --only nexmark`, run `times` times in one process.
 *
 *   npx node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/profile-nexmark.ts [q5] [times=1]
 *
 * Prints each run's events per second per core and each stage's CPU; it writes no results.
 */
import { NEXMARK_QUERIES, runNexmark, type NexmarkQuery } from './nexmark.js';

const q = process.argv[2] ?? 'q5';
if (!(NEXMARK_QUERIES as readonly string[]).includes(q)) throw new Error(`query: one of ${NEXMARK_QUERIES.join(', ')}, not ${q}`);
const times = Number(process.argv[3] ?? 1);
if (!Number.isInteger(times) || times < 1) throw new Error(`times: an integer ≥ 1, not ${process.argv[3]}`);
for (let i = 0; i < times; i++) {
  // the full-size part's options (bench/main.ts, `sizes`)
  const f = await runNexmark(q as NexmarkQuery, { events: 200_000, checkpointEvery: 20_000, batch: 500, ratePerSecond: 10_000 });
  console.log(
    `${q}: ${f.events} events through ${f.stages} stages, ${f.cpuMs.toFixed(0)} ms CPU (by stage ${f.stageCpuMs.map((c) => c.toFixed(0)).join(' / ')} for ${f.stageRecords.join(' / ')} records; the twins' Kinesis's ${f.twinKinesisCpuMs.toFixed(0)} ms left out): ${(f.epsPerCore / 1000).toFixed(1)} k ev/s per core; ${f.outputs} results`,
  );
}
