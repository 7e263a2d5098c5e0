/**
 * What a finished local run holds, in the one shape `sluice run --out` writes and `sluice run
 * --chaos` compares: every sink's records, the dead letters (with input file and line) and the
 * checkpoint statistics.
 */
import type { LocalJobRunner, LocatedDeadLetter } from './runner.js';

export interface RunOutput {
  readonly sinks: Record<string, unknown[]>;
  readonly deadLetters: LocatedDeadLetter[];
  readonly checkpoints: { completed: number; aborted: number; meanDurationMs: number; recordsIn: number; finished: boolean };
}

/** Reads every sink, the dead letters and the statistics of a run. */
export async function readRunOutput(runner: LocalJobRunner, finished: boolean): Promise<RunOutput & { batches: number; cacheHitRate: number }> {
  const sinks: Record<string, unknown[]> = {};
  for (const sink of runner.plan.sinks) sinks[sink.name] = await runner.readSink(sink.name);
  const deadLetters = await runner.deadLettersWithLines();
  const s = await runner.stats();
  return {
    sinks,
    deadLetters,
    checkpoints: { completed: s.completed, aborted: s.aborted, meanDurationMs: Math.round(s.meanCheckpointMs), recordsIn: s.recordsIn, finished },
    batches: s.batches,
    cacheHitRate: s.cacheHitRate,
  };
}

/** The `--out` file's content. */
export function formatRunOutput(o: RunOutput): string {
  const { sinks, deadLetters, checkpoints } = o;
  return `${JSON.stringify({ sinks, deadLetters, checkpoints }, null, 2)}\n`;
}
