import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['shared/**/*.test.ts', 'functions/**/*.test.ts', 'cdk/**/*.test.ts', 'local/**/*.test.ts', 'cli/**/*.test.ts', 'infra-tests/**/*.test.ts', 'examples/**/*.test.ts'],
    testTimeout: 240_000,
    hookTimeout: 240_000,
    // infra tests start their own emulators; two cores leave no room for more than two files at once
    maxWorkers: 2,
    pool: 'forks',
  },
});
