import { describe, expect, it } from 'vitest';
import { dynamoUpsertSink, job, kinesisSink, s3FileSink, type Job } from '../api/index.js';
import type { SinkDefinition } from '../api/graph.js';
import { describePlan } from './describe.js';
import { planJob } from './planner.js';

function withSink(sink: SinkDefinition<unknown>): Job {
  const j = job('tx');
  j.source({ name: 'in' }).sinkTo(sink);
  return j;
}

describe('transactional sinks in the plan', () => {
  it('plans an S3 file sink with its prefix and format, and a Kinesis sink with its stream', () => {
    const j = job('tx');
    const s = j.source({ name: 'in' });
    s.sinkTo(s3FileSink({ name: 'archive' }));
    s.sinkTo(kinesisSink({ name: 'alerts', streamName: 'team-alerts' }));
    const plan = planJob(j);
    expect(plan.sinks.map((k) => [k.kind, k.name, k.prefix, k.format, k.streamName])).toEqual([
      ['s3-file', 'archive', 'sinks/archive', 'jsonl', undefined],
      ['kinesis', 'alerts', undefined, undefined, 'team-alerts'],
    ]);
  });

  it('rejects a file prefix outside sinks/, inside the staging area, or with ".."', () => {
    expect(() => planJob(withSink(s3FileSink({ name: 'a', prefix: 'out/files' })))).toThrow(/prefix: must start with "sinks\/"/);
    expect(() => planJob(withSink(s3FileSink({ name: 'a', prefix: 'sinks/_staged/x' })))).toThrow(/holds staged outputs/);
    expect(() => planJob(withSink(s3FileSink({ name: 'a', prefix: 'sinks/../deltas' })))).toThrow(/plain S3 key prefix/);
    expect(() => planJob(withSink(s3FileSink({ name: 'a', prefix: 'sinks' })))).toThrow(/must start with "sinks\/"/);
  });

  it('describe prints each sink with where it writes, its guarantee and its latency, and the checkpoint limits', () => {
    const j = job('tx');
    const s = j.source<{ id: string }>({ name: 'in' });
    s.sinkTo(s3FileSink({ name: 'archive' }));
    s.sinkTo(kinesisSink({ name: 'alerts' }));
    s.sinkTo(dynamoUpsertSink({ name: 'rows', key: (v: { id: string }) => v.id }));
    const text = describePlan(planJob(j));
    expect(text).toContain('archive (s3-file, s3://sluice-tx-data/sinks/archive/epoch=<e>/ (jsonl)): exactly-once');
    expect(text).toContain('alerts (kinesis, stream sluice-tx-out-alerts): exactly-once with consumer-side dedupe by record id');
    expect(text).toContain('latency: about one checkpoint interval');
    expect(text).toContain('latency: immediate');
    expect(text).toMatch(/checkpoints in flight: at most 1; 3 completed checkpoints retained/);
  });
});
