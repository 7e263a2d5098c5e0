/**
 * The `sluice` command line: run a job on the emulated AWS stack, produce events into a stream,
 * describe a job's plan and draw its graph; list checkpoints, take savepoints, restore and rescale
 * a deployed job (cli/lifecycle.ts).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { PutRecordsCommand, type PutRecordsRequestEntry } from '@aws-sdk/client-kinesis';
import cliProgress from 'cli-progress';
import { createAwsClients, sleep } from '../shared/adapters/aws/clients.js';
import { describePlan, planToMermaid, planToSvg } from '../shared/plan/describe.js';
import { planJob } from '../shared/plan/planner.js';
import { addCostCommand } from './cost.js';
import { addLifecycleCommands, formatCheckpoints } from './lifecycle.js';
import { addOperateCommands } from './operate.js';
import { loadJob } from './load-job.js';
import { registerSqlCommand } from './sql.js';

const int = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer, got "${v}"`);
  return n;
};

function readLines(file: string): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
}

const program = new Command()
  .name('sluice')
  .description('Stateful, exactly-once stream processing on AWS Lambda, Kinesis, DynamoDB, S3 and Step Functions')
  .showHelpAfterError();

program
  .command('run')
  .description('run a job on this machine against the emulated AWS stack, feed it events, and print what its sinks hold')
  .argument('<job>', 'job module (its default export is the job)')
  .option('-e, --events <file>', 'JSON-lines file to produce into the source')
  .option('-s, --source <name>', 'source to produce into (default: the first)')
  .option('-c, --checkpoints <n>', 'checkpoints to commit after the last event before stopping', int('--checkpoints'), 2)
  .option('--environments <n>', 'simulated execution environments per stage', int('--environments'), 3)
  .option('--interval <ms>', 'time between checkpoints (default: the job\'s)', int('--interval'))
  .option('--seed <n>', 'seed of routing and environment recycling', int('--seed'), 1)
  .option('--limit <n>', 'rows of each sink to print', int('--limit'), 20)
  .option('--list-checkpoints', 'print the checkpoint records (status, duration, bytes, keys) at the end')
  .action(async (jobPath: string, opts: { events?: string; source?: string; checkpoints: number; environments: number; interval?: number; seed: number; limit: number; listCheckpoints?: boolean }) => {
    const job = await loadJob(jobPath);
    const plan = planJob(job);
    const { LocalJobRunner } = await import('../local/runner.js');
    const t0 = Date.now();
    process.stderr.write(`starting the emulated AWS stack and deploying ${plan.job} (${plan.stages.length} stages)…\n`);
    const runner = await LocalJobRunner.start(job, {
      environments: opts.environments,
      seed: opts.seed,
      ...(opts.interval !== undefined ? { checkpointIntervalMs: opts.interval } : {}),
    });
    try {
      process.stderr.write(`ready in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
      if (opts.events) {
        const source = opts.source ?? plan.sources[0]!.name;
        const lines = readLines(opts.events);
        process.stderr.write(`producing ${lines.length} events from ${opts.events} into source "${source}"…\n`);
        await runner.produce(source, lines.map((l) => new TextEncoder().encode(l)));
      }
      const since = new Date();
      const bar = new cliProgress.SingleBar(
        { format: 'checkpoints committed {bar} {value}/{total}', stream: process.stderr, hideCursor: true },
        cliProgress.Presets.shades_classic,
      );
      bar.start(opts.checkpoints, 0);
      await runner.awaitCheckpoints(opts.checkpoints, since, 180_000, (n) => bar.update(Math.min(n, opts.checkpoints)));
      bar.stop();
      for (const sink of plan.sinks) {
        if (sink.kind !== 'dynamodb-upsert') continue;
        const rows = await runner.readUpsertSink(sink.name);
        rows.sort((a, b) => String(a[sink.keyAttribute ?? 'pk']).localeCompare(String(b[sink.keyAttribute ?? 'pk'])));
        console.log(`\nsink "${sink.name}": ${rows.length} rows (${sink.guarantee})`);
        const shown = rows.slice(0, opts.limit).map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !k.startsWith('_sluice'))));
        console.table(shown);
        if (rows.length > shown.length) console.log(`… and ${rows.length - shown.length} more`);
      }
      const letters = await runner.readDeadLetters();
      if (letters.length) {
        console.log(`\ndead letters: ${letters.length}`);
        for (const l of letters.slice(0, 5)) console.log(`  ${l.stage} ${l.shardId} #${l.sequenceNumber}/${l.subSequence}: ${l.reason}`);
      }
      if (opts.listCheckpoints) console.log(`\n${formatCheckpoints(await runner.coordinator.list(), plan.checkpoint.retained)}`);
      const s = await runner.stats();
      console.log(
        `\ncheckpoints: completed=${s.completed} aborted=${s.aborted} mean_duration_ms=${Math.round(s.meanCheckpointMs)} ` +
          `records_in=${s.recordsIn} batches=${s.batches} cache_hit_rate=${s.cacheHitRate.toFixed(2)} dead_letters=${letters.length}`,
      );
    } finally {
      await runner.stop();
    }
  });

program
  .command('produce')
  .description('put the lines of a JSON-lines file on a Kinesis stream, like any producer (endpoint from AWS_ENDPOINT_URL*)')
  .requiredOption('--stream <name>', 'stream name')
  .argument('<file>', 'JSON-lines file')
  .option('--partition-key <field>', 'record field used as the partition key (default: a hash of the line number)')
  .action(async (file: string, opts: { stream: string; partitionKey?: string }) => {
    const lines = readLines(file);
    const clients = createAwsClients();
    const bar = new cliProgress.SingleBar({ format: 'producing {bar} {value}/{total}', stream: process.stderr }, cliProgress.Presets.shades_classic);
    bar.start(lines.length, 0);
    for (let i = 0; i < lines.length; i += 500) {
      let batch: PutRecordsRequestEntry[] = lines.slice(i, i + 500).map((l, j) => {
        let pk = `k${(i + j) % 1024}`;
        if (opts.partitionKey) {
          try {
            pk = String((JSON.parse(l) as Record<string, unknown>)[opts.partitionKey] ?? pk);
          } catch {
            // not JSON: keep the default key; the job's dead letters will say why
          }
        }
        return { Data: new TextEncoder().encode(l), PartitionKey: pk };
      });
      for (let attempt = 0; batch.length; attempt++) {
        const r = await clients.kinesis.send(new PutRecordsCommand({ StreamName: opts.stream, Records: batch }));
        batch = batch.filter((_, k) => r.Records?.[k]?.ErrorCode);
        if (batch.length) await sleep(Math.min(2000, 50 * 2 ** attempt));
      }
      bar.update(Math.min(lines.length, i + 500));
    }
    bar.stop();
  });

program
  .command('plan')
  .description('describe how a job is planned: stages, streams, shard counts, state, sinks')
  .argument('<job>', 'job module')
  .option('--json', 'print the plan as JSON')
  .option('--prefix <prefix>', 'resource name prefix')
  .action(async (jobPath: string, opts: { json?: boolean; prefix?: string }) => {
    const plan = planJob(await loadJob(jobPath));
    console.log(opts.json ? JSON.stringify(plan, null, 2) : describePlan(plan, opts.prefix));
  });

program
  .command('graph')
  .description('draw the planned job graph as Mermaid or SVG')
  .argument('<job>', 'job module')
  .option('-f, --format <format>', 'mermaid or svg', 'mermaid')
  .option('-o, --output <file>', 'write to a file instead of stdout')
  .action(async (jobPath: string, opts: { format: string; output?: string }) => {
    const plan = planJob(await loadJob(jobPath));
    if (opts.format !== 'mermaid' && opts.format !== 'svg') throw new InvalidArgumentError(`--format must be mermaid or svg, got "${opts.format}"`);
    const out = opts.format === 'svg' ? planToSvg(plan) : planToMermaid(plan);
    if (opts.output) writeFileSync(opts.output, out);
    else process.stdout.write(out);
  });

registerSqlCommand(program, int);

addLifecycleCommands(program);
addOperateCommands(program);
addCostCommand(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`sluice: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
