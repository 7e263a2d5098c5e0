/**
 * Checks that a job's functions are deterministic, as exactly-once recovery needs (a replay must
 * re-emit the same records under the same ids). The job runs over the input with every batch landing
 * in a fresh environment, so each batch restores the last snapshot and replays the shard up to
 * itself: a function that reads the clock, draws unseeded random numbers or depends on the order of
 * something unordered then emits other content under ids it used before, and that is reported.
 * (Two separate runs may legitimately differ: records of one key from two producers interleave as
 * they arrive. Replay within a run may not.)
 */
import type { Job } from '../api/job.js';
import { MemoryJobRunner } from './memory-job-runner.js';

export interface DeterminismReport {
  readonly deterministic: boolean;
  /** what differed, readable */
  readonly differences: string[];
}

/** `inputs`: records per source name, produced in this order. */
export async function checkDeterminism(job: Job, inputs: Record<string, readonly unknown[]>, options: { checkpoints?: number } = {}): Promise<DeterminismReport> {
  const run = async (seed: number, batchSize: number, recycle: number) => {
    const r = new MemoryJobRunner(job, { seed, batchSize, environments: 2, recycleProbability: recycle });
    const rounds = options.checkpoints ?? 4;
    for (let i = 0; i < rounds; i++) {
      for (const [source, records] of Object.entries(inputs)) {
        const per = Math.ceil(records.length / rounds);
        r.produce(source, records.slice(i * per, (i + 1) * per));
      }
      await r.runUntilIdle();
      await r.checkpoint();
    }
    r.endOfInput();
    await r.drain();
    return r;
  };
  // every batch in a fresh environment: each restores its shard's last snapshot and replays it,
  // re-emitting earlier outputs under their ids — which must come out byte for byte the same
  const b = await run(1, 3, 1);
  const differences: string[] = [];
  if (b.collect.conflicts) differences.push(`${b.collect.conflicts} outputs were emitted again under the same id with other content during replay`);
  if (b.mem.state.conflicts) differences.push(`${b.mem.state.conflicts} state rows of one checkpoint were written twice with other values`);
  if (b.mem.control.deltaConflicts) differences.push(`${b.mem.control.deltaConflicts} snapshots were made twice with other content`);
  return { deterministic: differences.length === 0, differences };
}
