import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

// The tests that judge the protocol modules without emulators (the in-memory twins are services, the
// logic under test is the engine's own): fast enough to run once per mutant.
export default defineConfig({
  resolve: base.resolve,
  test: {
    ...base.test,
    // MUTATE_TESTS (comma-separated globs) narrows the run to a module's own tests: how well they alone
    // pin it down, in minutes where the whole set takes an hour under load
    include: process.env.MUTATE_TESTS?.split(',') ?? [
      'shared/runtime/**/*.test.ts',
      'shared/codec/**/*.test.ts',
      'shared/coordinator/**/*.test.ts',
      'shared/adapters/memory/**/*.test.ts',
      'shared/testing/**/*.test.ts',
    ],
  },
});
