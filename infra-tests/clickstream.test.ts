/**
 * The example job end to end on the emulated stack: producer → source stream → stage s0 → stage
 * stream → stage s1 → DynamoDB sink, with the CDK-synthesized coordinator committing checkpoints,
 * environments recycled at random and batches routed across environments. The sink must equal the
 * oracle exactly, and every malformed line must be in the dead letters.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import job from '../examples/clickstream/job.js';
import { LocalJobRunner } from '../local/runner.js';
import { clickstreamOracle } from './oracles.js';

const lines = readFileSync(new URL('../examples/clickstream/sample-events.jsonl', import.meta.url), 'utf8').trim().split('\n');

describe('clickstream example on the emulated stack', () => {
  let runner: LocalJobRunner;

  beforeAll(async () => {
    runner = await LocalJobRunner.start(job, { checkpointIntervalMs: 300, recycleProbability: 0.2, seed: 42, batchSize: 50 });
    await runner.produce('clicks', lines.map((l) => new TextEncoder().encode(l)));
    await runner.awaitCheckpoints(2, new Date(), 90_000);
  });

  afterAll(async () => {
    await runner?.stop();
  });

  it('writes exactly the counts computed from the input', async () => {
    const { counts } = clickstreamOracle(lines);
    const rows = await runner.readUpsertSink<{ pk: string; clicks: number; lastClickTs: number }>('clicks-per-user-page');
    const got = new Map(rows.map((r) => [r.pk, { clicks: r.clicks, lastClickTs: r.lastClickTs }]));
    expect(got.size).toBe(counts.size);
    for (const [key, want] of counts) expect(got.get(key), key).toEqual(want);
  });

  it('sends every malformed line to the dead letters, once per record, with its position and reason', async () => {
    const { malformed } = clickstreamOracle(lines);
    const letters = await runner.readDeadLetters();
    expect(malformed).toBeGreaterThan(0);
    expect(letters).toHaveLength(malformed);
    for (const l of letters) {
      expect(l.stage).toBe('s0');
      expect(l.sequenceNumber).toMatch(/^\d+$/);
      expect(l.reason).toMatch(/cannot decode json record/);
    }
  });

  it('commits checkpoints through the synthesized coordinator, with every instance acking', async () => {
    const stats = await runner.stats();
    expect(stats.completed).toBeGreaterThanOrEqual(2);
    for (const c of stats.checkpoints.filter((c) => c.status === 'COMPLETED')) expect(c.acks).toBe(c.expected);
    // recycling and routing made instances restore from snapshots and replay
    expect(stats.cacheHitRate).toBeLessThan(1);
  });
});
