/**
 * `sluice run <job>`: runs a job on this machine against the emulated AWS stack (LocalJobRunner),
 * feeds its sources from JSON-lines files, ends their input (unless --unbounded) so that the final
 * watermark fires every window and the job finishes, then shows everything: every sink's records,
 * every dead letter with its input file and line, the checkpoint statistics — and with --out writes
 * them all to one JSON file. A run whose every record was dead-lettered fails.
 *
 * With --chaos <seed> the job runs under that seed's fault schedule and again without faults, and
 * every sink is compared key by key (local/chaos/check.ts); any difference fails the command.
 */
import { existsSync, statSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import cliProgress from 'cli-progress';
import { sleep } from '../shared/adapters/aws/clients.js';
import type { Plan } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import type { LocalJobRunner, LocatedDeadLetter } from '../local/runner.js';
import { formatRunOutput, readRunOutput } from '../local/run-output.js';
import type { Job } from '../shared/api/job.js';
import { formatCheckpoints } from './lifecycle.js';
import { loadJob } from './load-job.js';
import { typecheckJob } from './typecheck.js';

interface RunOptions {
  events: string[];
  unbounded?: boolean;
  checkpoints: number;
  environments: number;
  interval?: number;
  seed: number;
  limit: number;
  out?: string;
  timeout: number;
  typecheck: boolean;
  listCheckpoints?: boolean;
  chaos?: number;
}

/** What `--out` holds. */
export type { RunOutput } from '../local/run-output.js';

/** `--events` values as (source, file) pairs: `source=file`, or a bare file for the job's first source. */
export function runInputs(plan: Plan, specs: readonly string[]): Array<{ source: string; file: string }> {
  return specs.map((spec) => {
    const eq = spec.indexOf('=');
    // a bare path that happens to contain '=' still names an existing file
    const bare = eq <= 0 || existsSync(spec);
    const source = bare ? plan.sources[0]!.name : spec.slice(0, eq);
    const file = bare ? spec : spec.slice(eq + 1);
    if (!plan.sources.some((s) => s.name === source)) {
      throw new Error(`--events ${spec}: job "${plan.job}" has no source "${source}" (sources: ${plan.sources.map((s) => s.name).join(', ')})`);
    }
    if (!existsSync(file) || !statSync(file).isFile()) throw new Error(`--events ${spec}: no file ${file}`);
    return { source, file };
  });
}

/** Waits until the job read the end of every source and committed the checkpoint that covers it. */
async function awaitEnd(runner: LocalJobRunner, timeoutMs: number, onProgress: (completed: number) => void): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const done = (await runner.coordinator.list()).filter((c) => c.status === 'COMPLETED').length;
    onProgress(done);
    if ((await runner.coordinator.jobStatus()).finishedAt !== undefined) return;
    if (Date.now() > deadline) throw new Error(`the job did not finish within ${timeoutMs / 1000} s of the end of its input (${done} checkpoints completed); raise --timeout, or look for a stage that does not progress`);
    await sleep(200);
  }
}

function printSink(name: string, kind: string, guarantee: string, records: unknown[], limit: number): void {
  console.log(`\nsink "${name}" (${kind}, ${guarantee}): ${records.length} records`);
  if (!records.length) return;
  const shown = records.slice(0, limit);
  if (shown.every((r) => r !== null && typeof r === 'object' && !Array.isArray(r))) console.table(shown);
  else for (const r of shown) console.log(`  ${JSON.stringify(r)}`);
  if (records.length > shown.length) console.log(`… and ${records.length - shown.length} more`);
}

function where(l: LocatedDeadLetter): string {
  if (l.file !== undefined) return `${l.file}:${l.line}`;
  return `${l.source ? `source ${l.source}, ` : ''}stage ${l.stage} ${l.shardId} #${l.sequenceNumber}/${l.subSequence}`;
}

/** Lists dead letters, each once, with the input file and line of its record where known. */
export function printDeadLetters(letters: readonly LocatedDeadLetter[], limit: number): void {
  if (!letters.length) return;
  console.log(`\ndead letters: ${letters.length}`);
  for (const l of letters.slice(0, limit)) console.log(`  ${where(l)}: ${l.reason}`);
  if (letters.length > limit) console.log(`  … and ${letters.length - limit} more`);
}

/** The one-line diagnosis of a run whose every input record went to the dead letters, or undefined. */
export function allDeadLettered(produced: number, letters: readonly LocatedDeadLetter[]): string | undefined {
  const fromFiles = letters.filter((l) => l.file !== undefined);
  if (produced === 0 || fromFiles.length < produced) return undefined;
  return `every one of the ${produced} input records was dead-lettered; the first: ${where(fromFiles[0]!)}: ${fromFiles[0]!.reason}`;
}

export function registerRunCommand(program: Command, int: (name: string) => (v: string) => number): void {
  program
    .command('run')
    .description('run a job on this machine against the emulated AWS stack, feed it events, and show everything its sinks hold')
    .argument('<job>', 'job module (its default export is the job)')
    .option('-e, --events <source=file>', 'JSON-lines file for a source; repeatable; a bare file feeds the first source', (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option('--unbounded', 'keep the input open after the files (windows then fire only as event time advances) and stop after --checkpoints checkpoints')
    .option('-c, --checkpoints <n>', 'with --unbounded: checkpoints to commit after the last event before stopping', int('--checkpoints'), 2)
    .option('-o, --out <file.json>', 'write every sink\'s records, the dead letters and the checkpoint statistics to a JSON file')
    .option('--environments <n>', 'simulated execution environments per stage', int('--environments'), 3)
    .option('--interval <ms>', 'time between checkpoints (default: 500 ms, or the job\'s with --unbounded)', int('--interval'))
    .option('--seed <n>', 'seed of routing and environment recycling', int('--seed'), 1)
    .option('--limit <n>', 'rows of each sink and dead letters to print (--out holds them all)', int('--limit'), 20)
    .option('--timeout <s>', 'seconds to wait for the job to finish', int('--timeout'), 300)
    .option('--no-typecheck', 'do not typecheck the job module first')
    .option('--list-checkpoints', 'print the checkpoint records (status, duration, bytes, keys) at the end')
    .option(
      '--chaos <seed>',
      'run the job under the seed\'s fault schedule (crashes, zombies, partial writes, throttling, redelivery, coordinator failures) and again without faults; compare every sink key by key and the dead letters; print the faults by kind and a line with faults=<n>; exit 1 on any difference, naming the function that broke determinism when one did (--out: the faulted run\'s results)',
      int('--chaos'),
    )
    .action(async (jobPath: string, opts: RunOptions) => {
      if (opts.typecheck) {
        const t = Date.now();
        const errors = typecheckJob(jobPath);
        process.stderr.write(`typechecked ${jobPath} in ${((Date.now() - t) / 1000).toFixed(1)} s\n`);
        if (errors.length) throw new Error(`${jobPath} does not typecheck (run with --no-typecheck to run it anyway):\n${errors.join('\n')}`);
      }
      const job = await loadJob(jobPath);
      const plan = planJob(job);
      const inputs = runInputs(plan, opts.events);
      if (opts.chaos !== undefined) return runChaos(job, inputs, opts.chaos, opts);
      const { LocalJobRunner } = await import('../local/runner.js');
      const t0 = Date.now();
      process.stderr.write(`starting the emulated AWS stack and deploying ${plan.job} (${plan.stages.length} stages)…\n`);
      const interval = opts.interval ?? (opts.unbounded ? undefined : 500);
      const runner = await LocalJobRunner.start(job, { environments: opts.environments, seed: opts.seed, ...(interval !== undefined ? { checkpointIntervalMs: interval } : {}) });
      let allDead: string | undefined;
      try {
        process.stderr.write(`ready in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
        const bar = (format: string) => new cliProgress.SingleBar({ format, stream: process.stderr, hideCursor: true }, cliProgress.Presets.shades_classic);
        const producing = bar('producing {bar} {value}/{total} records');
        const fed = await runner.produceFiles(inputs, (done, total) => (done === 0 ? producing.start(total, 0) : producing.update(done)));
        producing.stop();
        for (const f of fed) process.stderr.write(`  ${f.file} → source "${f.source}": ${f.records} records\n`);
        const since = new Date();
        if (opts.unbounded) {
          const waiting = bar('checkpoints committed {bar} {value}/{total}');
          waiting.start(opts.checkpoints, 0);
          await runner.awaitCheckpoints(opts.checkpoints, since, opts.timeout * 1000, (n) => waiting.update(Math.min(n, opts.checkpoints)));
          waiting.stop();
        } else {
          await runner.endAllInput();
          process.stderr.write(`input ended on every source (${plan.sources.map((s) => s.name).join(', ')}); waiting for the job to finish…\n`);
          let last = -1;
          await awaitEnd(runner, opts.timeout * 1000, (n) => {
            if (n !== last) process.stderr.write(`  checkpoints completed: ${n}\n`);
            last = n;
          });
        }
        const output = await readRunOutput(runner, !opts.unbounded);
        const { sinks, deadLetters } = output;
        const c = output.checkpoints;
        if (opts.out) writeFileSync(opts.out, formatRunOutput(output));

        for (const sink of plan.sinks) printSink(sink.name, sink.kind, sink.guarantee, sinks[sink.name]!, opts.limit);
        printDeadLetters(deadLetters, opts.limit);
        if (opts.listCheckpoints) console.log(`\n${formatCheckpoints(await runner.coordinator.list(), plan.checkpoint.retained)}`);
        console.log(
          `\ncheckpoints: completed=${c.completed} aborted=${c.aborted} mean_duration_ms=${c.meanDurationMs} ` +
            `records_in=${c.recordsIn} batches=${output.batches} cache_hit_rate=${output.cacheHitRate.toFixed(2)} dead_letters=${deadLetters.length}`,
        );
        if (opts.out) console.log(`everything above, unabridged: ${opts.out}`);
        allDead = allDeadLettered(fed.reduce((a, f) => a + f.records, 0), deadLetters);
      } finally {
        await runner.stop();
      }
      if (allDead) throw new Error(allDead);
    });
}

/**
 * `sluice run --chaos <seed>`: the job under the seed's faults and without, every sink compared; the
 * faulted run's sinks and dead letters printed as a plain run prints them. Fails on any difference.
 */
async function runChaos(job: Job, inputs: Array<{ source: string; file: string }>, seed: number, opts: RunOptions): Promise<void> {
  if (opts.unbounded) throw new Error('--chaos compares two complete runs: it needs bounded input (leave out --unbounded)');
  const { chaosCheck, formatChaosReport } = await import('../local/chaos/check.js');
  const plan = planJob(job);
  const t0 = Date.now();
  const report = await chaosCheck(job, {
    seed,
    files: inputs,
    environments: opts.environments,
    checkpointIntervalMs: opts.interval ?? 500,
    timeoutMs: opts.timeout * 1000,
    progress: (line) => process.stderr.write(`${line}\n`),
  });
  if (opts.out) writeFileSync(opts.out, formatRunOutput(report.faulted));
  for (const sink of plan.sinks) printSink(sink.name, sink.kind, sink.guarantee, report.faulted.sinks[sink.name] ?? [], opts.limit);
  printDeadLetters(report.faulted.deadLetters, opts.limit);
  console.log('');
  for (const line of formatChaosReport(report, opts.limit)) console.log(line);
  process.stderr.write(`chaos check took ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  if (opts.out) console.log(`the faulted run's results, unabridged: ${opts.out}`);
  if (!report.ok) {
    const culprits = report.determinism?.functions.map((f) => f.operator) ?? [];
    throw new Error(
      `under the faults of seed ${seed} the job's results differ from a fault-free run (${report.differences.length} key(s)${report.replayConflicts ? `, ${report.replayConflicts} replay conflict(s)` : ''})` +
        (culprits.length ? `; not deterministic: ${[...new Set(culprits)].join(', ')}` : ''),
    );
  }
}
