/**
 * `sluice run --chaos <seed>` end to end, as a user runs it: the CLI starts the emulators, runs the
 * job under the seed's faults and again without, and compares every sink. The two tests run one
 * after the other (each CLI starts its own emulators).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('..', import.meta.url).pathname;

function sluice(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/sluice.mjs', ...args], { cwd: ROOT, timeout: 400_000, maxBuffer: 32 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('sluice run --chaos', () => {
  it('the clickstream example under seed 7: faults fired, no difference from the fault-free run, exit 0, --out holds the faulted run', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'sluice-chaos-')), 'out.json');
    const r = await sluice(['run', 'examples/clickstream/job.ts', '--events', 'clicks=examples/clickstream/sample-events.jsonl', '--chaos', '7', '--no-typecheck', '--out', out]);
    const report = `${r.stdout}\n${r.stderr}`;
    expect(r.code, report).toBe(0);
    const line = /^chaos: seed=7 .*faults=(\d+) kinds=(\d+) .*differences=(\d+)$/m.exec(r.stdout);
    expect(line, report).not.toBeNull();
    expect(Number(line![1]), report).toBeGreaterThan(0);
    expect(Number(line![3])).toBe(0);
    expect(r.stdout).toMatch(/^faults by kind: [a-z-]+=\d+/m);
    expect(r.stdout).toContain('no difference');
    const written = JSON.parse(readFileSync(out, 'utf8')) as { sinks: Record<string, unknown[]>; deadLetters: Array<{ file: string; line: number }>; checkpoints: { finished: boolean } };
    expect(written.sinks['clicks-per-user-page']!.length).toBeGreaterThan(100);
    // the poison lines of the sample, each dead-lettered once under faults, with its file and line
    expect(written.deadLetters.map((l) => l.line)).toEqual([400, 800, 1200, 1600, 2000]);
    expect(written.checkpoints.finished).toBe(true);
  }, 400_000);

  it('a job whose map calls Math.random(): the runs differ per key, the map is named, exit 1', async () => {
    const r = await sluice(['run', 'cli/testdata/noisy-job.ts', '--events', 'readings=cli/testdata/noisy-events.jsonl', '--chaos', '3', '--no-typecheck']);
    const report = `${r.stdout}\n${r.stderr}`;
    expect(r.code, report).toBe(1);
    expect(r.stdout, report).toMatch(/^sums: [1-4] key\(s\) differ$/m);
    expect(r.stdout).toMatch(/^ {2}key s\d: under faults \{.*"jitter":/m);
    expect(r.stdout).toMatch(/^not deterministic: map "add-noise" \(op\d+-map\), its map function: on \{"sensor":"s\d","value":\d+\} it returned/m);
    expect(r.stdout).toMatch(/^chaos: seed=3 .*faults=\d+ .*differences=[1-4]$/m);
    expect(r.stderr).toMatch(/results differ from a fault-free run .*not deterministic: map "add-noise"/);
  }, 400_000);
});
