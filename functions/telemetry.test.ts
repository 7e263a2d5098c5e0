/**
 * The functions' metrics are summed per execution environment and written as one EMF document
 * about once a minute: what the documents hold (sums, the time of the first value), when they are
 * written, and that counts an alarm watches are never held back.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DETAILED_METRICS, DETAILED_METRICS_ENV, STEADY_METRICS, WATCHED_METRICS_ENV } from '../shared/runtime/metric-names.js';
import { METRICS_PERIOD_MS, PowertoolsTelemetry } from './telemetry.js';

interface EmfDocument {
  readonly _aws: { readonly Timestamp: number; readonly CloudWatchMetrics: Array<{ readonly Metrics: Array<{ readonly Name: string }> }> };
  readonly [metric: string]: unknown;
}

describe('PowertoolsTelemetry metrics', () => {
  let lines: string[];
  let clock: number;
  const T0 = Date.parse('2026-12-01T12:00:00Z');

  beforeEach(() => {
    lines = [];
    clock = T0;
    // Powertools writes EMF documents through its own console on stdout
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => {
      lines.push(String(chunk));
      return true;
    });
  });
  afterEach(() => vi.restoreAllMocks());

  const documents = (): EmfDocument[] =>
    lines.flatMap((l) => l.split('\n')).filter((l) => l.includes('"_aws"')).map((l) => JSON.parse(l) as EmfDocument);
  const telemetry = (metricsPeriodMs?: number, detailedMetrics?: boolean) =>
    new PowertoolsTelemetry('job', 's0', { now: () => clock, ...(metricsPeriodMs !== undefined ? { metricsPeriodMs } : {}), ...(detailedMetrics !== undefined ? { detailedMetrics } : {}) });
  const names = (d: EmfDocument) => d._aws.CloudWatchMetrics.flatMap((m) => m.Metrics.map((x) => x.Name)).sort();

  it('sums the counts of many invocations into one document a minute, stamped with the first value\'s time', () => {
    const t = telemetry(undefined, true);
    for (let i = 0; i < 30; i++) {
      t.count('RecordsIn', 10);
      t.timing('CheckpointDurationMs', 100 + i);
      t.flush();
      clock += 1000;
    }
    expect(documents()).toHaveLength(0);
    clock = T0 + METRICS_PERIOD_MS;
    t.count('RecordsIn', 5);
    t.flush();
    const docs = documents();
    expect(docs).toHaveLength(1);
    expect(docs[0]!.RecordsIn).toBe(305);
    expect(docs[0]!.CheckpointDurationMs).toHaveLength(30);
    expect(docs[0]!._aws.Timestamp).toBe(T0);
    expect(docs[0]!.job).toBe('job');
    expect(docs[0]!.stage).toBe('s0');
    // nothing pending: no document, not even an empty one
    clock += 2 * METRICS_PERIOD_MS;
    t.flush();
    expect(documents()).toHaveLength(1);
  });

  it('writes at once when a count an alarm watches is pending, or when asked', () => {
    const t = telemetry();
    t.count('RecordsIn', 3);
    t.count('DeadLetters');
    t.flush();
    expect(documents()).toHaveLength(1);
    expect(documents()[0]!.RecordsIn).toBe(3);
    t.count('RecordsOut');
    t.flush();
    expect(documents()).toHaveLength(1);
    t.flush(true);
    expect(documents()).toHaveLength(2);
    expect(documents()[1]!.RecordsOut).toBe(1);
  });

  it('publishes the steady names the detailed set leaves out only with detailedMetrics (the option or the construct\'s environment)', () => {
    const every = [...STEADY_METRICS.stage, ...STEADY_METRICS.coordinator, ...DETAILED_METRICS.stage, ...DETAILED_METRICS.coordinator, 'CacheMiss', 'DeadLetters'];
    const publish = (t: PowertoolsTelemetry) => {
      for (const n of every) (n.endsWith('Ms') ? t.timing(n, 5) : t.count(n));
      t.flush(true);
      return names(documents().at(-1)!);
    };
    const steady = [...STEADY_METRICS.stage, ...STEADY_METRICS.coordinator, 'CacheMiss', 'DeadLetters'].sort();
    expect(publish(telemetry())).toEqual(steady);
    expect(publish(telemetry(undefined, true))).toEqual([...every].sort());
    vi.stubEnv(DETAILED_METRICS_ENV, '1');
    try {
      expect(publish(telemetry())).toEqual([...every].sort());
    } finally {
      vi.unstubAllEnvs();
    }
    // only detailed names pending: nothing to write by default
    const quiet = telemetry();
    const before = documents().length;
    quiet.count('CacheHit');
    quiet.timing('CheckpointDurationMs', 3);
    quiet.flush(true);
    expect(documents()).toHaveLength(before);
  });

  it('publishes the watched names (CheckpointCompleted) only where the construct says an alarm or the dashboard reads them', () => {
    const completed = (t: PowertoolsTelemetry) => {
      t.count('CheckpointCompleted');
      t.count('RecordsIn');
      t.flush(true);
      return documents().at(-1)!.CheckpointCompleted;
    };
    expect(completed(telemetry())).toBeUndefined();
    expect(completed(telemetry(undefined, true))).toBe(1);
    expect(completed(new PowertoolsTelemetry('job', 'coordinator', { watchedMetrics: ['CheckpointCompleted'] }))).toBe(1);
    vi.stubEnv(WATCHED_METRICS_ENV, 'CheckpointCompleted');
    try {
      expect(completed(telemetry())).toBe(1);
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('writes every invocation with a period of 0', () => {
    const t = telemetry(0);
    t.count('RecordsIn');
    t.flush();
    t.count('RecordsIn');
    t.flush();
    expect(documents().map((d) => d.RecordsIn)).toEqual([1, 1]);
  });
});
