/** The summary line's targets, and which of them a run meets. */
import type { BenchResults } from './main.js';
import { summaryLine } from './report.js';

export interface Target {
  readonly field: string;
  /** at least (a rate or ratio) or at most (a cost) */
  readonly bound: 'min' | 'max';
  readonly value: number;
}

export const TARGETS: readonly Target[] = [
  { field: 'handler_eps', bound: 'min', value: 1_000_000 },
  { field: 'fair_ratio', bound: 'min', value: 0.65 },
  { field: 'source_eps', bound: 'min', value: 500_000 },
  { field: 'window_fair_ratio', bound: 'min', value: 0.65 },
  { field: 'ckpt_cpu_events_per_key', bound: 'max', value: 1.5 },
  { field: 'ckpt_wcu_uniform', bound: 'max', value: 1.5 },
  { field: 'ckpt_wcu_hot', bound: 'max', value: 3 },
  { field: 'ckpt_wcu_tail', bound: 'max', value: 2 },
  { field: 'nexmark_q5_eps_core', bound: 'min', value: 100_000 },
  { field: 'overhead_bytes', bound: 'max', value: 8 },
];

export interface TargetReading extends Target {
  /** undefined when the part that gives the figure did not run */
  readonly reading: number | undefined;
  readonly met: boolean;
}

/** Each target against the run's summary line (the one place the fields are named and rounded). */
export function readTargets(r: BenchResults): TargetReading[] {
  const fields = new Map<string, string>();
  for (const pair of summaryLine(r).split(' ').slice(1)) {
    const eq = pair.indexOf('=');
    fields.set(pair.slice(0, eq), pair.slice(eq + 1));
  }
  return TARGETS.map((t) => {
    const raw = fields.get(t.field);
    const reading = raw === undefined || raw === '-' ? undefined : Number(raw);
    const met = reading !== undefined && (t.bound === 'min' ? reading >= t.value : reading <= t.value);
    return { ...t, reading, met };
  });
}
