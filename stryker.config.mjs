// Mutation testing of the modules that carry the exactly-once protocol: `npm run mutate` (all of them,
// about an hour on two cores) or `npm run mutate -- --mutate shared/runtime/outbox.ts` (one file).
// The surviving mutants are listed in the terminal and in reports/mutation/index.html.
// `MUTATE_TESTS=shared/runtime/outbox.test.ts npm run mutate -- --mutate shared/runtime/outbox.ts` judges a
// module by its own tests only (minutes instead of an hour; see vitest.mutate.config.ts).
// `MUTATE_RUN=<name>` gives a run its own sandbox, reports and incremental file
// (reports/mutation/<name>/): runs of different modules side by side, and a module's reruns reuse only
// its own earlier results (`--force` starts it afresh).
const run = process.env.MUTATE_RUN;
const reports = run ? `reports/mutation/${run}` : 'reports/mutation';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutate.config.ts', related: false },
  coverageAnalysis: 'perTest',
  mutate: [
    'shared/runtime/barrier-handler.ts', // alignment (exactly-once) and tracking (at-least-once)
    'shared/runtime/record-dedupe.ts',
    'shared/codec/snapshot.ts',
    'shared/runtime/outbox.ts',
    'shared/runtime/packed-state.ts',
    'shared/runtime/packed-item-entries.ts',
    'shared/codec/packed-entries.ts',
    'shared/runtime/barrier-senders.ts', // hash-range alignment of source barriers
    'shared/coordinator/coordinator.ts',
  ],
  // static initialisers run once per process: each would need its own run, for little insight
  ignoreStatic: true,
  concurrency: 2,
  timeoutFactor: 3,
  timeoutMS: 30_000,
  // the first run of the whole emulator-free set takes over five minutes on a loaded machine
  dryRunTimeoutMinutes: 20,
  incremental: true,
  incrementalFile: `${reports}/incremental.json`,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: `${reports}/index.html` },
  jsonReporter: { fileName: `${reports}/mutation.json` },
  clearTextReporter: { allowColor: false, logTests: false, reportMutants: true, reportScoreTable: true },
  thresholds: { high: 85, low: 70, break: null },
  tempDirName: run ? `.stryker-tmp/${run}` : '.stryker-tmp',
  // the sandboxes and reports of other runs are not copied into this one's
  ignorePatterns: ['/.stryker-tmp', '/reports'],
  cleanTempDir: 'always',
};
