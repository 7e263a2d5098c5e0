/**
 * `sluice/testing`: run a job in-process, on in-memory twins of Kinesis, DynamoDB and S3 with the
 * real engine, fast enough for unit tests; check that a job's functions are deterministic (naming
 * the ones that are not); and put a job through seeded faults on the emulated AWS stack, comparing
 * every sink with a fault-free run (`chaosCheck`).
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
export type { DeterminismReport, NondeterministicFunction } from './determinism.js';
export { chaosCheck, formatChaosReport } from './chaos.js';
export type { ChaosCheckOptions, ChaosReport, SinkDifference } from './chaos.js';
