/** What a chaos run reports: each seed's result and line, and the sum over seeds. */
import type { FaultKind } from '../../local/chaos/faults.js';
import type { ChaosVariant } from './job.js';
import type { Verdict } from './oracle.js';

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
  /** time to start the runner, of the fault phase, of the quiet phase */
  readonly phasesMs: { start: number; fault: number; quiet: number };
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
  readonly ok: boolean;
}

/** The line printed for a seed. */
export function seedLine(r: SeedResult): string {
  const faults = [...r.faults].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}=${n}`).join(' ');
  const obs = [...r.observed].filter(([k]) => /fenced|zombie@|barrier|entries|lost-response|hard-timeout@|sdk-hang|kpl|narrowed|CacheMiss|PutRecordsRetried|InvocationErrors/.test(k)).map(([k, n]) => `${k}=${n}`).join(' ');
  const v = r.verdict;
  const bad = v.lost || v.duplicated || v.mismatched || r.deadLettered !== r.poison || !r.live || r.error !== undefined;
  return (
    `seed=${r.seed} ${r.variant} shards=${r.shards} profile=${r.profile} records=${r.records} faults=${r.totalFaults} [${faults}]` +
    ` observed[${obs}] checkpoints=${r.checkpoints.completed}/${r.checkpoints.aborted}aborted hit=${r.cacheHitRate.toFixed(2)}` +
    ` outputs=${v.outputs} lost=${v.lost} duplicated=${v.duplicated} mismatched=${v.mismatched} dead-lettered=${r.deadLettered} poison=${r.poison}` +
    ` ${(r.durationMs / 1000).toFixed(1)}s (start ${(r.phasesMs.start / 1000).toFixed(1)} fault ${(r.phasesMs.fault / 1000).toFixed(1)} quiet ${(r.phasesMs.quiet / 1000).toFixed(1)})${bad ? ' FAIL' : ''}` +
    (bad || v.problems.length ? `\n  ${[...(r.error !== undefined ? [`error: ${r.error}`] : []), ...v.problems].join('\n  ')}` : '')
  );
}

export function summarize(results: SeedResult[]): ChaosSummary {
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
  return { ...s, results, faultsByKind, line, ok };
}
