/**
 * In memory, every transactional sink (collect, S3 file, Kinesis) stages into the CollectRegistry
 * and is published at commit: a job written for S3 or Kinesis output runs unchanged in unit tests.
 */
import { describe, expect, it } from 'vitest';
import { job, kinesisSink, s3FileSink, valueState } from '../../api/index.js';
import { MemoryJobRunner } from '../../testing/memory-job-runner.js';

describe('transactional sinks in memory', () => {
  it('publishes file and Kinesis sink outputs exactly once at commit, like a collect sink', async () => {
    const count = valueState<number>('count');
    const j = job('mem-tx', { maxParallelism: 8 });
    const counts = j
      .source<{ user: string }>({ name: 'in', shards: 2 })
      .keyBy((e) => e.user, { parallelism: 2 })
      .process<string>({
        state: [count],
        processElement(e, ctx, out) {
          const n = (ctx.getState(count).value() ?? 0) + 1;
          ctx.getState(count).update(n);
          out.collect(`${e.user}:${n}`);
        },
      });
    counts.sinkTo(s3FileSink<string>({ name: 'files' }));
    counts.sinkTo(kinesisSink<string>({ name: 'stream' }));
    const r = new MemoryJobRunner(j, { seed: 3 });
    const users = ['a', 'b', 'c', 'a', 'a', 'b'];
    r.produce('in', users.map((user) => ({ user })));
    await r.drain();
    const want = ['a:1', 'a:2', 'a:3', 'b:1', 'b:2', 'c:1'];
    expect([...r.published<string>('files')].sort()).toEqual(want);
    expect([...r.published<string>('stream')].sort()).toEqual(want);
  });
});
