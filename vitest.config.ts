import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/**
 * Without durations from an earlier run (a fresh checkout; CI after `npm ci`), vitest runs the
 * larger files first. The files that drive the emulated stack or spawn the CLI are slow whatever
 * their size: chaos.test.ts, one short test of two minutes, came 128th of 150 and ran on one worker
 * while the other had nothing left. These start first; with a full cache vitest's own order (by
 * duration) stands.
 */
class SlowFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const root = this.ctx.config.root;
    const path = (f: TestSpecification) => relative(root, f.moduleId);
    if (sorted.every((f) => this.ctx.cache.getFileTestResults(`${f.project.name}:${path(f)}`))) return sorted;
    const slow = (f: TestSpecification) => /^(infra-tests|cli)\//.test(path(f));
    return [...sorted.filter(slow), ...sorted.filter((f) => !slow(f))];
  }
}

export default defineConfig({
  // the package's own names, as users import them, mapped to the sources (tsconfig.json "paths" does the same for tsc and tsx)
  resolve: {
    alias: [
      { find: /^sluice$/, replacement: here('./shared/api/index.ts') },
      { find: /^sluice\/testing$/, replacement: here('./shared/testing/index.ts') },
      { find: /^sluice\/sql$/, replacement: here('./shared/sql/index.ts') },
      { find: /^sluice\/cdk$/, replacement: here('./cdk/index.ts') },
    ],
  },
  test: {
    include: ['shared/**/*.test.ts', 'functions/**/*.test.ts', 'cdk/**/*.test.ts', 'local/**/*.test.ts', 'cli/**/*.test.ts', 'infra-tests/**/*.test.ts', 'examples/**/*.test.ts', 'docs/**/*.test.ts'],
    testTimeout: 240_000,
    hookTimeout: 240_000,
    // infra tests start their own emulators; two cores leave no room for more than two files at once
    maxWorkers: 2,
    pool: 'forks',
    sequence: { sequencer: SlowFilesFirst },
  },
});
