/**
 * A SQL job over bounded input on the emulated AWS stack: Nexmark bids as gzip JSON-lines objects
 * in the job's (emulated) S3 bucket, read by the bounded-reader *function* the way the Step
 * Functions Map would drive it (list → one read per object, in parallel → end), through the job's
 * Kinesis source stream, two stages of windows, the CDK-synthesized coordinator, and a collect sink.
 * The result must equal DuckDB's batch query over the same bids.
 */
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateNexmark, splitNexmark } from '../examples/nexmark/generator.js';
import { canonicalRows, NexmarkOracle, ORACLE_SQL } from '../examples/nexmark/oracle.js';
import { boundedReaderHandler, type BoundedReaderTask } from '../functions/bounded-reader.js';
import { LocalJobRunner } from '../local/runner.js';
import { compileSql } from '../shared/sql/index.js';

const EVENTS = splitNexmark(generateNexmark({ seed: 3, events: 1_500, ratePerSecond: 200 }));
const compiled = compileSql(readFileSync(new URL('../examples/nexmark/sql/bounded-max-bids.sql', import.meta.url), 'utf8'), { name: 'boundedmaxbids', job: { checkpoint: { intervalMs: 500, timeoutMs: 30_000 } } });

describe('SQL over bounded input on the emulated stack (Nexmark max-bids)', () => {
  let runner: LocalJobRunner;
  let rows: Array<Record<string, unknown>> = [];
  let want: Array<Record<string, unknown>> = [];
  const saved = { ...process.env };

  beforeAll(async () => {
    const oracle = await NexmarkOracle.load(EVENTS);
    try {
      want = await oracle.query(ORACLE_SQL['max-bids']!);
    } finally {
      oracle.close();
    }
    runner = await LocalJobRunner.start(compiled.job, { checkpointIntervalMs: 300, recycleProbability: 0.1, seed: 7 });
    const spec = compiled.bounded[0]!;
    // the input: bids split into 8 objects by time, half of them gzipped
    const bids = EVENTS.bid;
    const per = Math.ceil(bids.length / 8);
    for (let p = 0; p < 8; p++) {
      const text = bids.slice(p * per, (p + 1) * per).map((b) => JSON.stringify(b)).join('\n') + '\n';
      const gz = p % 2 === 1;
      await runner.clients.s3.send(
        new PutObjectCommand({ Bucket: runner.names.bucket, Key: `${spec.prefix}part-${p}.jsonl${gz ? '.gz' : ''}`, Body: gz ? gzipSync(text) : text }),
      );
    }
    // the function, configured as CDK would, with the emulators' endpoints
    Object.assign(process.env, runner.emulatorEnv, { SLUICE_PREFIX: runner.names.prefix, SLUICE_BUCKET: runner.names.bucket });
    const handler = boundedReaderHandler(compiled.job);
    const task = (t: BoundedReaderTask) => handler(t);
    const { objects } = (await task({ action: 'list', source: spec.source, prefix: spec.prefix })) as { objects: Array<{ key: string }> };
    expect(objects).toHaveLength(8);
    await Promise.all(objects.map((o) => task({ action: 'read', source: spec.source, key: o.key })));
    await task({ action: 'end', source: spec.source });
    // the end of input fires every window; the results are published by the checkpoints that follow
    const deadline = Date.now() + 90_000;
    while (runner.collected.published('max_bids').length < want.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    rows = runner.collected.published<Record<string, unknown>>('max_bids');
  });

  afterAll(async () => {
    process.env = saved;
    await runner?.stop();
  });

  it('equals DuckDB over the same bids', () => {
    expect(want.length).toBeGreaterThan(5);
    expect(canonicalRows(rows, ['starttime', 'maxn'])).toEqual(canonicalRows(want, ['starttime', 'maxn']));
  });

  it('read every record, dead-lettered none, and committed checkpoints through the synthesized coordinator', async () => {
    const stats = await runner.stats();
    expect(stats.deadLetters).toBe(0);
    expect(stats.completed).toBeGreaterThanOrEqual(1);
    // every instance saw the end of the input: the job finished by itself with a committed checkpoint
    const finishedAt = await runner.awaitFinished(120_000);
    expect((await runner.coordinator.get(finishedAt))?.status).toBe('COMPLETED');
  });
});
