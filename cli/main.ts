/**
 * The `sluice` command line: scaffold a project (cli/init.ts), run a job on the emulated AWS stack
 * (cli/run.ts) or a SQL script (cli/sql.ts), keep one running with a web UI (cli/dev.ts), produce events into a stream,
 * describe a job's plan and draw its graph; list checkpoints, take savepoints, restore and rescale
 * a deployed job (cli/lifecycle.ts).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import cliProgress from 'cli-progress';
import { createAwsClients } from '../shared/adapters/aws/clients.js';
import { sdkKinesisApi } from '../shared/adapters/aws/kinesis.js';
import { putRecordsUntilAccepted, type PutEntry } from '../shared/adapters/put-records.js';
import { describePlan, planToMermaid, planToSvg } from '../shared/plan/describe.js';
import { planJob } from '../shared/plan/planner.js';
import { addCostCommand } from './cost.js';
import { addLifecycleCommands } from './lifecycle.js';
import { addOperateCommands } from './operate.js';
import { loadJob } from './load-job.js';
import { registerInitCommand } from './init.js';
import { registerDevCommand } from './dev.js';
import { registerRunCommand } from './run.js';
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

registerRunCommand(program, int);
registerDevCommand(program, int);
registerInitCommand(program);

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
    const api = sdkKinesisApi(clients.kinesis);
    for (let i = 0; i < lines.length; i += 500) {
      const batch = lines.slice(i, i + 500).map((l, j): PutEntry => {
        let pk = `k${(i + j) % 1024}`;
        if (opts.partitionKey) {
          try {
            pk = String((JSON.parse(l) as Record<string, unknown>)[opts.partitionKey] ?? pk);
          } catch {
            // not JSON: keep the default key; the job's dead letters will say why
          }
        }
        return { data: new TextEncoder().encode(l), partitionKey: pk };
      });
      await putRecordsUntilAccepted(api, opts.stream, batch);
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
