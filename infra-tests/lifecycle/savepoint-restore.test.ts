/**
 * Stop-with-savepoint, then restore into a new run with the same parallelism: the window results
 * and running totals must equal what the input gives when the job never stops (computed from the
 * input), with windows that were open at the savepoint firing after the restore (their state rows
 * and timers travel in the savepoint).
 */
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { unpack } from 'msgpackr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localS3Client } from '../../local/aws-env.js';
import { startEmulators, type LocalEmulators } from '../../local/emulators.js';
import { SAVEPOINT_FORMAT } from '../../shared/adapters/aws/savepoints.js';
import { totalsOracle, windowOracle } from './oracles.js';
import { runPhases, type PhasesResult } from './phases.js';

describe('savepoint and restore', () => {
  let emulators: LocalEmulators;
  let result: PhasesResult;

  beforeAll(async () => {
    emulators = await startEmulators();
    result = await runPhases(emulators, 'sp-same', [2, 2]);
    console.log(`savepoint-restore phases (ms): ${result.durations.join(', ')}`);
  }, 240_000);

  afterAll(async () => {
    await emulators?.stop();
  });

  it('writes a portable savepoint: manifest, source positions, state rows and timers per key group', () => {
    const [m] = result.savepoints;
    expect(m!.format).toBe(SAVEPOINT_FORMAT);
    expect(m!.version).toBe(1);
    expect(m!.sources.map((s) => s.shardId).sort()).toEqual(['shardId-000000000000', 'shardId-000000000001']);
    for (const s of m!.sources) expect(s.replayPoint.from).toBe('after');
    expect(m!.rows).toBeGreaterThan(0);
    // windows still open at the savepoint: their timers are in it
    expect(m!.timers).toBeGreaterThan(0);
    for (const op of m!.operators) for (const g of op.keyGroups) expect(g).toBeLessThan(m!.maxParallelism);
  });

  it('key-group files decode with plain MessagePack: rows by key, timers by key, no engine code needed', async () => {
    const [m] = result.savepoints;
    const s3 = localS3Client(emulators.endpoints.s3);
    const op = m!.operators.find((o) => o.states.includes('windows'))!;
    let rows = 0;
    let timers = 0;
    for (const g of op.keyGroups) {
      const r = await s3.send(new GetObjectCommand({ Bucket: 'sp-same-data', Key: `savepoints/${m!.id}/${op.id}/${g}.bin` }));
      const f = unpack(Buffer.from(await r.Body!.transformToByteArray())) as { format: string; version: number; keyGroup: number; rows: Array<[string, Record<string, Uint8Array>]>; timers: Array<[string, string, number]> };
      expect(f.format).toBe('sluice-savepoint-keygroup');
      expect(f.keyGroup).toBe(g);
      for (const [key, values] of f.rows) {
        expect(key).toMatch(/^u\d$/);
        expect(values.windows).toBeInstanceOf(Uint8Array);
      }
      for (const [domain, , time] of f.timers) {
        expect(domain).toBe('event-time');
        expect(time % 1000).toBe(999); // a window's last millisecond
      }
      rows += f.rows.length;
      timers += f.timers.length;
    }
    expect(timers).toBe(m!.timers);
    expect(rows).toBeGreaterThan(0);
  });

  it('restored run + stopped run publish exactly the windows of the whole input, each once', () => {
    const got = result.windows.map((w) => `${w.user}|${w.start}|${w.count}`).sort();
    expect(got).toEqual(windowOracle(result.events));
  });

  it('running totals after the restore equal the counts of the whole input', () => {
    const want = totalsOracle(result.events);
    expect(new Map(result.totals.map((t) => [t.user, t.count]))).toEqual(want);
  });
});
