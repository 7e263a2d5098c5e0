import { describe, expect, it } from 'vitest';
import { collectSink, job, kinesisSink, s3FileSink } from '../../api/index.js';
import { planJob } from '../../plan/planner.js';
import type { CollectSinkStore, StagedOutput } from '../../runtime/ports.js';
import { epochOfStagedKey, kinesisRecordId, publishedFileKey, stagedObjectKey, StagedSinkRouter } from './staged-sinks.js';

const out = (epoch: number, seq: number): StagedOutput => ({ producer: 's1:shardId-000000000001', epoch, seq, value: { seq } });

function recorder(): CollectSinkStore & { calls: string[] } {
  const calls: string[] = [];
  return { calls, stage: async (sink, outputs) => void calls.push(`${sink}:${outputs.length}`) };
}

describe('staged sink names', () => {
  it('stages under sinks/_staged/<sink>/<epoch>/<producer>/ and reads the epoch back', () => {
    const key = stagedObjectKey('files', 42, 's1:shardId-000000000001', 0, 9);
    expect(key).toBe('sinks/_staged/files/000000000042/s1_shardId-000000000001/000000000000-000000000009.json');
    expect(epochOfStagedKey('files', key)).toBe(42);
    expect(epochOfStagedKey('other', key)).toBeUndefined();
  });

  it('publishes under <prefix>/epoch=<e>/<producer>-<first seq>.jsonl and ids records by sink, epoch, producer and seq', () => {
    const plan = planJob(
      (() => {
        const j = job('names');
        j.source({ name: 'in' }).sinkTo(s3FileSink({ name: 'files', prefix: 'sinks/out/' }));
        return j;
      })(),
    );
    expect(publishedFileKey(plan.sinks[0]!, 7, 's1:shardId-000000000001', 10_000)).toBe('sinks/out/epoch=7/s1_shardId-000000000001-000000010000.jsonl');
    expect(kinesisRecordId('alerts', 7, 's1:shardId-000000000001', 3)).toBe('alerts/7/s1:shardId-000000000001/3');
  });
});

describe('StagedSinkRouter', () => {
  it('sends file and Kinesis sinks to S3 staging and collect sinks to the in-process registry', async () => {
    const j = job('route');
    const s = j.source({ name: 'in' });
    s.sinkTo(s3FileSink({ name: 'files' }));
    s.sinkTo(kinesisSink({ name: 'alerts' }));
    s.sinkTo(collectSink('mem'));
    const s3 = recorder();
    const mem = recorder();
    const router = new StagedSinkRouter(planJob(j), s3, mem);
    await router.stage('files', [out(1, 0), out(1, 1)]);
    await router.stage('alerts', [out(1, 0)]);
    await router.stage('mem', [out(2, 0)]);
    expect(s3.calls).toEqual(['files:2', 'alerts:1']);
    expect(mem.calls).toEqual(['mem:1']);
  });
});
