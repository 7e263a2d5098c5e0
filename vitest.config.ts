import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

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
  },
});
