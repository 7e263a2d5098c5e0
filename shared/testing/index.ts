/**
 * `sluice/testing`: run a job in-process, on in-memory twins of Kinesis, DynamoDB and S3 with the
 * real engine, fast enough for unit tests; and check that a job's functions are deterministic.
 *
 * @example
 * ```ts
 * import { MemoryJobRunner } from 'sluice/testing';
 * import job from './job.js';
 *
 * const r = new MemoryJobRunner(job);
 * r.produce('clicks', [{ userId: 'u1', url: '/a', ts: 1 }]);
 * r.endOfInput();
 * await r.drain();
 * console.log(r.upserts('clicks-per-user'));
 * ```
 * @module sluice/testing
 */
export { MemoryJobRunner, MemoryBlobStore } from './memory-job-runner.js';
export type { MemoryJobRunnerOptions } from './memory-job-runner.js';
export { checkDeterminism } from './determinism.js';
export type { DeterminismReport } from './determinism.js';
