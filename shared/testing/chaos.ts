/**
 * `chaosCheck` for users' tests: runs a job on the emulated AWS stack under a seeded fault schedule
 * and again without faults, and reports every sink key whose records differ (see local/chaos/check.ts).
 * Loaded on first use, so that importing `sluice/testing` stays light for tests that never call it.
 */
import type { Job } from '../api/job.js';
import type { ChaosCheckOptions, ChaosReport } from '../../local/chaos/check.js';

export type { ChaosCheckOptions, ChaosReport, SinkDifference } from '../../local/chaos/check.js';

/**
 * @example
 * ```ts
 * import { chaosCheck, formatChaosReport } from 'sluice/testing';
 * const report = await chaosCheck(job, { seed: 7, records: { clicks: [{ userId: 'u1', url: '/a', ts: 1 }] } });
 * expect(report.ok, formatChaosReport(report).join('\n')).toBe(true);
 * ```
 */
export async function chaosCheck(job: Job, options: ChaosCheckOptions): Promise<ChaosReport> {
  const { chaosCheck: run } = await import('../../local/chaos/check.js');
  return run(job, options);
}

/** The report as readable lines, its summary line (`chaos: … faults=N … differences=D`) last. */
export async function formatChaosReport(report: ChaosReport, limit?: number): Promise<string[]> {
  const { formatChaosReport: format } = await import('../../local/chaos/check.js');
  return format(report, limit);
}
