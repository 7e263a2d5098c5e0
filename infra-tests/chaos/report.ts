/** What a chaos run reports: each seed's result and line, and the sum over seeds. */
import type { FaultKind } from '../../local/chaos/faults.js';
import type { ChaosVariant } from './job.js';
import type { Verdict } from './oracle.js';
import type { SeedPhase, StackCpu } from './usage.js';

export interface SeedResult {
  readonly seed: number;
  readonly variant: ChaosVariant;
  readonly profile: string;
  /** shards of the source stream and of each inner stream */
  readonly shards: string;
  readonly records: number;
  /** poison records produced */
  readonly poison: number;
  /** dead letters found (objects) */
  readonly deadLettered: number;
  readonly faults: ReadonlyMap<FaultKind, number>;
  readonly totalFaults: number;
  readonly observed: ReadonlyMap<string, number>;
  readonly verdict: Verdict;
  /** upsert rows seen moving backwards while the job ran */
  readonly regressions: number;
  readonly checkpoints: { completed: number; aborted: number; quietCompleted: number };
  /** the quiet phase got its checkpoints */
  readonly live: boolean;
  readonly cacheHitRate: number;
  readonly durationMs: number;
  /** time to start the runner, of the fault phase, of the quiet phase, of the verdict, of the teardown (not in durationMs) */
  readonly phasesMs: { start: number; fault: number; quiet: number; verdict?: number; stop?: number };
  /** the seed's share of the stack's CPU per phase (see usage.ts: exact with one seed at a time) */
  readonly cpuMs?: Partial<Record<SeedPhase, number>>;
  /** set when the seed could not run to the end */
  readonly error?: string;
}

export interface ChaosSummary {
  readonly seeds: number;
  readonly faults: number;
  readonly kinds: number;
  readonly outputs: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly mismatched: number;
  readonly deadLettered: number;
  readonly poison: number;
  readonly stalled: number;
  readonly results: SeedResult[];
  readonly faultsByKind: Map<FaultKind, number>;
  /** `chaos: seeds=N faults=F kinds=K outputs=O lost=L duplicated=D mismatched=M dead-lettered=X poison=P` */
  readonly line: string;
  /** `duration: W s wall, cpu C s (…), S seeds/min, …`: what the run cost (when measured) */
  readonly durationLine?: string;
  /** `admission: <the rule in effect>; reached N at once (mean M)` (when run by runChaos) */
  readonly admissionLine?: string;
  readonly ok: boolean;
}

/** The line printed for a seed. */
export function seedLine(r: SeedResult): string {
  const faults = [...r.faults].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}=${n}`).join(' ');
  const obs = [...r.observed].filter(([k]) => /fenced|zombie@|barrier|entries|lost-response|hard-timeout@|sdk-hang|kpl|narrowed|CacheMiss|PutRecordsRetried|InvocationErrors|BatchAlreadyProcessed/.test(k)).map(([k, n]) => `${k}=${n}`).join(' ');
  const v = r.verdict;
  const bad = v.lost || v.duplicated || v.mismatched || r.deadLettered !== r.poison || !r.live || r.error !== undefined;
  return (
    `seed=${r.seed} ${r.variant} shards=${r.shards} profile=${r.profile} records=${r.records} faults=${r.totalFaults} [${faults}]` +
    ` observed[${obs}] checkpoints=${r.checkpoints.completed}/${r.checkpoints.aborted}aborted hit=${r.cacheHitRate.toFixed(2)}` +
    ` outputs=${v.outputs} lost=${v.lost} duplicated=${v.duplicated} mismatched=${v.mismatched} dead-lettered=${r.deadLettered} poison=${r.poison}` +
    ` ${(r.durationMs / 1000).toFixed(1)}s (start ${secs(r.phasesMs.start)} fault ${secs(r.phasesMs.fault)} quiet ${secs(r.phasesMs.quiet)})` +
    (r.phasesMs.verdict !== undefined ? ` verdict ${secs(r.phasesMs.verdict)}` : '') +
    (r.phasesMs.stop !== undefined ? ` stop ${secs(r.phasesMs.stop)}` : '') +
    (r.cpuMs ? ` cpu ${secs(cpuTotal(r.cpuMs))}s (${PHASES.filter((p) => r.cpuMs![p] !== undefined).map((p) => `${p} ${secs(r.cpuMs![p]!)}`).join(' ')})` : '') +
    (bad ? ' FAIL' : '') +
    (bad || v.problems.length ? `\n  ${[...(r.error !== undefined ? [`error: ${r.error}`] : []), ...v.problems].join('\n  ')}` : '')
  );
}

const PHASES: readonly SeedPhase[] = ['start', 'fault', 'quiet', 'verdict', 'stop'];
const secs = (ms: number) => (ms / 1000).toFixed(1);
const cpuTotal = (c: Partial<Record<SeedPhase, number>>) => PHASES.reduce((a, p) => a + (c[p] ?? 0), 0);

/** What the whole run cost: wall and CPU time, seeds at once, 1-minute load averages seen as seeds ended. */
export interface RunUsage {
  readonly wallMs: number;
  readonly cpu: StackCpu;
  /** seeds at once: `2`, or `auto (at most 4, peak 3, mean 2.6)` */
  readonly concurrency: string;
  readonly loads: readonly number[];
  /** under `auto`: checks the CPU rule decided, and how many of them admitted nothing */
  readonly admission?: { readonly checks: number; readonly starved: number };
}

/** `duration: 136.0s wall, cpu 148.2s (harness 70.1 kinesis 76.0 s3 2.1) = 14.8s/seed, 4.41 seeds/min, concurrency 2, load 1.8–4.3 (mean 3.0)`; under `auto`, how often admission was starved after the concurrency */
export function durationLine(seeds: number, u: RunUsage): string {
  const c = u.cpu;
  const perSeed = seeds ? ` = ${secs(c.totalMs / seeds)}s/seed` : '';
  const rate = u.wallMs > 0 ? ((seeds * 60_000) / u.wallMs).toFixed(2) : '0';
  const loads = u.loads.length
    ? `, load ${Math.min(...u.loads).toFixed(1)}–${Math.max(...u.loads).toFixed(1)} (mean ${(u.loads.reduce((a, b) => a + b, 0) / u.loads.length).toFixed(1)})`
    : '';
  const starved = u.admission ? `, starved at ${u.admission.starved} of ${u.admission.checks} checks` : '';
  return `duration: ${secs(u.wallMs)}s wall, cpu ${secs(c.totalMs)}s (harness ${secs(c.harnessMs)} kinesis ${secs(c.kinesisMs)} s3 ${secs(c.s3Ms)})${perSeed}, ${rate} seeds/min, concurrency ${u.concurrency}${starved}${loads}`;
}

export function summarize(results: SeedResult[], usage?: RunUsage): ChaosSummary {
  const faultsByKind = new Map<FaultKind, number>();
  for (const r of results) for (const [k, n] of r.faults) if (n > 0) faultsByKind.set(k, (faultsByKind.get(k) ?? 0) + n);
  const sum = (f: (r: SeedResult) => number) => results.reduce((a, r) => a + f(r), 0);
  const s = {
    seeds: results.length,
    faults: sum((r) => r.totalFaults),
    kinds: faultsByKind.size,
    outputs: sum((r) => r.verdict.outputs),
    lost: sum((r) => r.verdict.lost),
    duplicated: sum((r) => r.verdict.duplicated),
    mismatched: sum((r) => r.verdict.mismatched),
    deadLettered: sum((r) => r.deadLettered),
    poison: sum((r) => r.poison),
    stalled: results.filter((r) => !r.live).length,
  };
  const line = `chaos: seeds=${s.seeds} faults=${s.faults} kinds=${s.kinds} outputs=${s.outputs} lost=${s.lost} duplicated=${s.duplicated} mismatched=${s.mismatched} dead-lettered=${s.deadLettered} poison=${s.poison}`;
  const ok = s.lost === 0 && s.duplicated === 0 && s.mismatched === 0 && s.deadLettered === s.poison && s.stalled === 0 && results.every((r) => r.error === undefined);
  return { ...s, results, faultsByKind, line, ok, ...(usage ? { durationLine: durationLine(results.length, usage) } : {}) };
}
