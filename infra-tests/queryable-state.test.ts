/**
 * Queryable state on the emulated stack reads the state table, which the instances write every
 * `checkpoint.materializeEvery`-th checkpoint; a local run's `materializeEvery` replaces the job's
 * (`sluice dev` uses 1). Two runs of the example on one set of emulators: with 1, a lookup right
 * after a checkpoint that covers the input gives every key's count computed from the input; with
 * the job's own period (16 here) the table is not written yet. One environment per stage, never
 * recycled: a restore (a recycled environment, a batch routed to another one) writes the table too.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import job from '../examples/clickstream/job.js';
import { CountingTelemetry } from '../shared/adapters/telemetry.js';
import { createAwsPorts } from '../shared/adapters/aws/ports.js';
import { QueryableState } from '../shared/query/queryable-state.js';
import { materializeEvery } from '../shared/runtime/changelog.js';
import { startEmulators, type LocalEmulators } from '../local/emulators.js';
import { LocalJobRunner } from '../local/runner.js';
import { clickstreamOracle } from './oracles.js';

const lines = readFileSync(new URL('../examples/clickstream/sample-events.jsonl', import.meta.url), 'utf8').trim().split('\n');

describe('queryable state on the emulated stack', () => {
  let emulators: LocalEmulators;
  const runners: LocalJobRunner[] = [];

  beforeAll(async () => {
    emulators = await startEmulators();
  });

  afterAll(async () => {
    for (const r of runners) await r.stop();
    await emulators?.stop();
  });

  /** the example run to a checkpoint that covers the sample; the lookup of every key the input counts */
  async function lookups(prefix: string, every: number | undefined) {
    const r = await LocalJobRunner.start(job, { emulators, prefix, environments: 1, recycleProbability: 0, checkpointIntervalMs: 300, ...(every !== undefined ? { materializeEvery: every } : {}) });
    runners.push(r);
    const since = new Date();
    await r.produce('clicks', lines.map((l) => new TextEncoder().encode(l)));
    await r.awaitCheckpoints(1, since, 90_000);
    const q = new QueryableState(job, createAwsPorts(r.plan, r.names, r.clients, new CountingTelemetry()).state);
    const got = new Map<string, unknown>();
    for (const key of clickstreamOracle(lines).counts.keys()) got.set(key, await q.get('count-clicks', 'count', key));
    return { plan: r.plan, got, completed: (await r.stats()).completed };
  }

  it('is as of the last checkpoint when the table is written at every one', async () => {
    const { plan, got } = await lookups('qs-every', 1);
    expect(materializeEvery(plan.checkpoint)).toBe(1);
    const { counts } = clickstreamOracle(lines);
    expect(counts.size).toBeGreaterThan(3);
    for (const [key, want] of counts) expect(got.get(key), key).toEqual(want);
  });

  it("lags by the job's own period otherwise: nothing in the table before its 16th checkpoint", async () => {
    const { plan, got, completed } = await lookups('qs-default', undefined);
    expect(materializeEvery(plan.checkpoint)).toBe(16);
    // the reading below means something only while the table's first write is still ahead
    expect(completed).toBeLessThan(16);
    expect([...got.values()].every((v) => v === undefined)).toBe(true);
  });
});
