/**
 * `npm run chaos -- --seeds N [--from S] [--only-kind K]`: runs the chaos harness and prints one line
 * per seed (its faults and verdict), then exactly one summary line:
 *
 *   chaos: seeds=N faults=F kinds=K outputs=O lost=L duplicated=D mismatched=M dead-lettered=X poison=P
 *
 * Before it, a verdict line keeps correctness (nothing lost, duplicated or mismatched, dead letters =
 * poison) apart from liveness (the quiet phase got its checkpoints). `--load slow:K|cpu:N` runs the
 * seeds under load (infra-tests/chaos/load.ts). Before them, the `admission:` line says how seeds were
 * admitted (the rule in effect, the concurrency reached) and the `duration:` line what the run cost:
 * wall and CPU time (this process and the emulator children), seeds a minute, how often `auto` found
 * no room for another seed, the load average.
 *
 * Exit code 1 when anything was lost, duplicated or mismatched, when the dead letters differ from the
 * poison records, or when a seed stopped completing checkpoints.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { FAULT_KINDS, PROFILE_NAMES, type FaultKind } from '../../local/chaos/faults.js';
import { runChaos, type SeedResult } from './harness.js';
import { describeLoad, parseLoad, type ChaosLoad } from './load.js';
import type { ChaosVariant } from './job.js';
import type { Concurrency } from './admission.js';

const int = (name: string, min: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}, got ${v}`);
  return n;
};

const program = new Command()
  .name('chaos')
  .description('Runs the chaos job on the emulated AWS stack under seeded faults and checks it against the oracle.')
  .option('--seeds <n>', 'number of seeds', int('--seeds', 1), 10)
  .option('--from <s>', 'first seed', int('--from', 0), 1)
  .addOption(new Option('--only-kind <kind>', 'inject only this fault kind').choices([...FAULT_KINDS]))
  .addOption(new Option('--profile <name>', 'force one fault profile for every seed').choices(PROFILE_NAMES))
  .addOption(new Option('--variant <v>', 'job shape').choices(['two-stage', 'three-stage', 'alternate']).default('alternate'))
  .option('--records <n>', 'input records per seed (±25 %)', int('--records', 12), 160)
  .option(
    '--concurrency <n>',
    'seeds run at once on the shared emulators, or auto: one seed starts at a time, a second while the stack gets the CPU it asks for, more while a seed\'s worth of CPU is idle (at most 2 per core)',
    (v: string): Concurrency => (v === 'auto' ? 'auto' : int('--concurrency', 1)(v)),
    'auto' as Concurrency,
  )
  .option('--quiet-timeout <ms>', 'how long the quiet phase waits for its checkpoints', int('--quiet-timeout', 1000), 120_000)
  .option('--load <load>', 'run under load: slow:K (every handler K× slower) or cpu:N (N busy processes)', (v: string) => {
    try {
      return parseLoad(v);
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  })
  .option('--verbose', 'print engine warnings and errors to stderr')
  .action(async (o: { seeds: number; from: number; onlyKind?: FaultKind; profile?: string; variant: ChaosVariant | 'alternate'; records: number; concurrency: Concurrency; quietTimeout: number; load?: ChaosLoad; verbose?: boolean }) => {
    const seeds = Array.from({ length: o.seeds }, (_, i) => o.from + i);
    const t0 = Date.now();
    const summary = await runChaos({
      seeds,
      variant: o.variant,
      records: o.records,
      concurrency: o.concurrency,
      quietTimeoutMs: o.quietTimeout,
      ...(o.onlyKind ? { onlyKind: o.onlyKind } : {}),
      ...(o.profile ? { profile: o.profile } : {}),
      ...(o.load ? { load: o.load } : {}),
      ...(o.verbose ? { engineLog: (l: string) => process.stderr.write(l + '\n') } : {}),
      onSeed: (_r, line) => console.log(line),
    });
    const kinds = [...summary.faultsByKind].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}=${n}`).join(' ');
    console.log(`faults by kind: ${kinds || 'none'}`);
    if (summary.admissionLine) console.log(summary.admissionLine);
    const duration = summary.durationLine ?? `duration: ${((Date.now() - t0) / 1000).toFixed(1)}s`;
    console.log(`${duration}${summary.stalled ? `, ${summary.stalled} seed(s) stopped completing checkpoints` : ''}`);
    const wrong = summary.results.filter((r) => !correct(r)).map((r) => r.seed);
    const stalled = summary.results.filter((r) => !r.live).map((r) => r.seed);
    console.log(
      `verdict: load=${describeLoad(o.load)} correctness=${wrong.length ? `FAILED seeds ${wrong.join(',')}` : 'ok'} liveness=${stalled.length ? `FAILED seeds ${stalled.join(',')} (no checkpoints once faults stopped)` : 'ok'}`,
    );
    console.log(summary.line);
    process.exitCode = summary.ok ? 0 : 1;
  });

/** Correctness alone: what the sinks and the dead letters hold (liveness is `r.live`). */
function correct(r: SeedResult): boolean {
  const v = r.verdict;
  return v.lost === 0 && v.duplicated === 0 && v.mismatched === 0 && r.deadLettered === r.poison && r.error === undefined;
}

await program.parseAsync(process.argv);
// emulators and pollers are stopped, but a zombie's stall or an idle keep-alive socket may still
// hold the event loop: flush stdout, then exit
await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
process.exit(process.exitCode ?? 0);
