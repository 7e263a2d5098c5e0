/** `sluice cost`: the monthly estimate of a job, with the options that change what is deployed, and bad options refused. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { MonthlyCost } from '../bench/cost.js';

const run = promisify(execFile);
const cost = async (...args: string[]) => JSON.parse((await run(process.execPath, ['bin/sluice.mjs', 'cost', 'examples/clickstream/job.ts', '--json', ...args])).stdout) as MonthlyCost;
const usd = (c: MonthlyCost, service: string, item = '') => c.lines.filter((l) => l.service === service && l.item.includes(item)).reduce((a, l) => a + l.usd, 0);

describe('sluice cost', () => {
  it('prices Express rounds by default, the Standard loop with --no-express, and the platform log lines only at --log-level INFO or DEBUG', async () => {
    const [standard, express, info] = await Promise.all([cost('--rate', '1000', '--no-express'), cost('--rate', '1000'), cost('--rate', '1000', '--log-level', 'INFO')]);
    expect(standard.expressCheckpoints).toBe(false);
    expect(standard.transitionsPerCheckpoint).toBe(3);
    expect(express.expressCheckpoints).toBe(true);
    expect(express.transitionsPerCheckpoint).toBeLessThan(1);
    expect(usd(express, 'Step Functions')).toBeLessThan(usd(standard, 'Step Functions') / 3);
    expect(standard.lines.find((l) => l.item.startsWith('Logs ingestion'))!.item).not.toMatch(/platform/);
    expect(usd(info, 'CloudWatch', 'Logs ingestion')).toBeGreaterThan(10 * usd(standard, 'CloudWatch', 'Logs ingestion'));
  }, 120_000);

  it('prices the stages\' batch settings: SluiceJob\'s defaults for the job unless --batch-size, --batching-window or --memory say otherwise', async () => {
    const [deployed, windowed, lessMemory, text] = await Promise.all([
      cost('--rate', '1000'),
      cost('--rate', '1000', '--batching-window', '4', '--batch-size', '5000'),
      cost('--rate', '1000', '--memory', '256'),
      run(process.execPath, ['bin/sluice.mjs', 'cost', 'examples/clickstream/job.ts', '--rate', '1000', '--batching-window', '4']).then((r) => r.stdout),
    ]);
    // clickstream checkpoints every 2 s: too short for a default window
    expect(deployed.batching).toEqual({ batchSize: 10_000, windowMs: 0, memoryMb: 512 });
    expect(windowed.batching).toEqual({ batchSize: 5000, windowMs: 4000, memoryMb: 512 });
    expect(windowed.batchesPerSecond).toBeCloseTo(deployed.batchesPerSecond / 4, 6);
    expect(usd(windowed, 'DynamoDB', 'lease positions')).toBeCloseTo(usd(deployed, 'DynamoDB', 'lease positions') / 4, 6);
    expect(usd(windowed, 'Lambda', 'stage invocations')).toBeCloseTo(usd(deployed, 'Lambda', 'stage invocations') / 4, 6);
    expect(usd(lessMemory, 'Lambda', 'waiting on each batch')).toBeCloseTo(usd(deployed, 'Lambda', 'waiting on each batch') / 2, 6);
    expect(text).toMatch(/^stages: batchSize 10,000 \(default\), 4 s window, 512 MB \(default\): [\d.]+ batches a second$/m);
  }, 120_000);

  it('refuses a batching window the job\'s checkpoints could not cross, naming the option', async () => {
    const failed = await run(process.execPath, ['bin/sluice.mjs', 'cost', 'examples/clickstream/job.ts', '--rate', '1000', '--batching-window', '16']).catch((e: { stderr: string; code: number }) => e);
    expect((failed as { code: number }).code).not.toBe(0);
    expect((failed as { stderr: string }).stderr).toMatch(/--batching-window must be at most half of the job's checkpoint.timeoutMs \(15 s\), got 16/);
  }, 60_000);

  it('refuses an unknown log level, naming the option', async () => {
    const failed = await run(process.execPath, ['bin/sluice.mjs', 'cost', 'examples/clickstream/job.ts', '--rate', '1000', '--log-level', 'LOUD']).catch((e: { stderr: string; code: number }) => e);
    expect((failed as { code: number }).code).not.toBe(0);
    expect((failed as { stderr: string }).stderr).toMatch(/--log-level must be DEBUG, INFO, WARN or ERROR, got "LOUD"/);
  }, 60_000);
});
