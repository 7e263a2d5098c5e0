/** The generated Lambda entry files: content, absolute imports, rewritten only when they change. */
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, defaultEntriesDir, writeFunctionEntries } from './function-entry.js';

const dirs: string[] = [];
const scratch = () => {
  const d = mkdtempSync(join(tmpdir(), 'sluice-entries-'));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('writeFunctionEntries', () => {
  it('writes an operator and a coordinator entry importing the job and the handler factories by absolute path', () => {
    const outDir = scratch();
    const entries = writeFunctionEntries({ jobName: 'clickstream', jobModule: 'examples/clickstream/job.ts', outDir });
    expect(entries).toEqual({ dir: outDir, operator: join(outDir, 'operator.ts'), coordinator: join(outDir, 'coordinator.ts') });
    const operator = readFileSync(entries.operator, 'utf8');
    expect(operator).toContain(`import job from "${join(REPO_ROOT, 'examples/clickstream/job.ts')}";`);
    expect(operator).toContain(`import { operatorHandler } from "${join(REPO_ROOT, 'functions/operator.js')}";`);
    expect(operator).toContain('export const handler = operatorHandler(job);');
    const coordinator = readFileSync(entries.coordinator, 'utf8');
    expect(coordinator).toContain(`import { coordinatorHandler } from "${join(REPO_ROOT, 'functions/coordinator.js')}";`);
    expect(coordinator).toContain('export const handler = coordinatorHandler(job);');
  });

  it('leaves unchanged files untouched (cdk watch does not loop) and rewrites changed ones', () => {
    const outDir = scratch();
    const first = writeFunctionEntries({ jobName: 'j', jobModule: '/abs/job.ts', outDir });
    const old = new Date(2020, 0, 1);
    utimesSync(first.operator, old, old);
    writeFunctionEntries({ jobName: 'j', jobModule: '/abs/job.ts', outDir });
    expect(statSync(first.operator).mtime.getTime()).toBe(old.getTime());
    writeFunctionEntries({ jobName: 'j', jobModule: '/abs/other-job.ts', outDir });
    expect(readFileSync(first.operator, 'utf8')).toContain('"/abs/other-job.ts"');
  });

  it('takes the handler factories from another root when asked', () => {
    const outDir = scratch();
    const e = writeFunctionEntries({ jobName: 'j', jobModule: '/abs/job.ts', outDir, repoRoot: '/elsewhere' });
    expect(readFileSync(e.operator, 'utf8')).toContain('"/elsewhere/functions/operator.js"');
  });

  it('defaults to cdk.out/.sluice-entries/<job> (git-ignored) and rejects an empty module path', () => {
    expect(defaultEntriesDir('Click_Stream')).toBe(join(REPO_ROOT, 'cdk.out', '.sluice-entries', 'click-stream'));
    expect(() => writeFunctionEntries({ jobName: 'j', jobModule: '', outDir: scratch() })).toThrow(/jobModule must be a path/);
  });
});
