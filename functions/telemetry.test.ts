/**
 * The functions' metrics are summed per execution environment and written as one EMF document
 * about once a minute: what the documents hold (sums, the time of the first value), when they are
 * written, and that counts an alarm watches are never held back.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
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
  const telemetry = (metricsPeriodMs?: number) => new PowertoolsTelemetry('job', 's0', { now: () => clock, ...(metricsPeriodMs !== undefined ? { metricsPeriodMs } : {}) });

  it('sums the counts of many invocations into one document a minute, stamped with the first value\'s time', () => {
    const t = telemetry();
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
    t.count('CheckpointCompleted');
    t.flush();
    expect(documents()).toHaveLength(1);
    t.flush(true);
    expect(documents()).toHaveLength(2);
    expect(documents()[1]!.CheckpointCompleted).toBe(1);
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
