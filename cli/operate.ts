/**
 * Running a deployed job: `sluice deploy <job>` (cdk deploy of a job module), `start`, `stop`
 * (optionally with a savepoint), `status` and `logs <stage> [--follow]`. Names come from the
 * stack's Outputs (cli/deployed.ts). What an operator's role needs for these is
 * `SluiceJob.grantOperate` (docs/operations.md).
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { CloudWatchClient, DescribeAlarmsCommand, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { CloudWatchLogsClient, FilterLogEventsCommand, type FilteredLogEvent } from '@aws-sdk/client-cloudwatch-logs';
import { GetEventSourceMappingCommand, InvokeCommand, LambdaClient, UpdateEventSourceMappingCommand } from '@aws-sdk/client-lambda';
import { ListExecutionsCommand, StartExecutionCommand, StopExecutionCommand } from '@aws-sdk/client-sfn';
import type { Command } from 'commander';
import { sleep } from '../shared/adapters/aws/clients.js';
import { setOperatorStop } from '../shared/adapters/aws/coordinator-ports.js';
import { sanitizeName } from '../shared/plan/resources.js';
import { OUTPUT_KEYS, outputKeyOfStage } from '../shared/plan/stack-outputs.js';
import { deployedJob, type DeployedJob, type DeployedOptions } from './deployed.js';
import { formatCheckpoints } from './checkpoint-table.js';
import { loadJob } from './load-job.js';

/** Enables or disables every stage's event source mapping named by the stack; returns how many changed. */
export async function setMappings(t: DeployedJob, enabled: boolean, lambda = new LambdaClient({})): Promise<number> {
  if (t.mappings.size < t.plan.stages.length) {
    throw new Error(`stack ${t.stackName} does not name every stage's event source mapping: ${enabled ? 'enable' : 'disable'} them by hand (aws lambda update-event-source-mapping)`);
  }
  let changed = 0;
  for (const [stage, uuid] of t.mappings) {
    const now = await lambda.send(new GetEventSourceMappingCommand({ UUID: uuid }));
    const isOn = now.State === 'Enabled' || now.State === 'Enabling';
    if (isOn === enabled) continue;
    await lambda.send(new UpdateEventSourceMappingCommand({ UUID: uuid, Enabled: enabled }));
    process.stderr.write(`  ${stage}: event source mapping ${enabled ? 'enabled' : 'disabled'}\n`);
    changed++;
  }
  return changed;
}

function requireWorkflow(t: DeployedJob): string {
  if (!t.stateMachineArn) throw new Error(`stack ${t.stackName} names no coordinator workflow (output SluiceStateMachineArn)`);
  return t.stateMachineArn;
}

async function runningExecutions(t: DeployedJob): Promise<string[]> {
  const r = await t.clients.sfn.send(new ListExecutionsCommand({ stateMachineArn: requireWorkflow(t), statusFilter: 'RUNNING' }));
  return (r.executions ?? []).map((e) => e.executionArn!);
}

/** Lifts an operator's stop, enables the mappings, starts the workflow unless one runs. */
export async function startJob(t: DeployedJob, print: (line: string) => void = console.log): Promise<void> {
  await setOperatorStop(t.clients, t.names, false);
  if (!t.local) await setMappings(t, true); // a local stack has none: its pollers run with its process
  if ((await runningExecutions(t)).length) {
    print('the coordinator workflow is already running');
    return;
  }
  const r = await t.clients.sfn.send(new StartExecutionCommand({ stateMachineArn: requireWorkflow(t), input: JSON.stringify({ iteration: 0 }) }));
  print(`started the coordinator workflow: ${r.executionArn}`);
}

/**
 * Asks for a stop-with-savepoint; returns its id. On AWS the coordinator function records the
 * request (its role may write the control table, an operator's need not); a local stack's control
 * table is the operator's own.
 */
async function requestStopSavepoint(t: DeployedJob): Promise<string> {
  if (t.local) return (await t.coordinator.requestSavepoint({ stop: true })).id;
  const lambda = new LambdaClient({});
  const fn = t.outputs[OUTPUT_KEYS.coordinatorFunction] ?? t.names.coordinatorFunction;
  const r = await lambda.send(new InvokeCommand({ FunctionName: fn, Payload: new TextEncoder().encode(JSON.stringify({ action: 'savepoint', stop: true })) }));
  const out = JSON.parse(new TextDecoder().decode(r.Payload ?? new Uint8Array())) as { id?: string; errorMessage?: string };
  if (r.FunctionError || !out.id) throw new Error(`the savepoint request failed: ${out.errorMessage ?? 'no id returned'}`);
  return out.id;
}

/** Where a command's report goes (standard output; a test collects it). */
export type Print = (line: string) => void;

export async function stopJob(t: DeployedJob, savepoint: boolean, print: Print = console.log): Promise<void> {
  if (savepoint) {
    const id = await requestStopSavepoint(t);
    process.stderr.write(`savepoint ${id} requested; waiting for a checkpoint to take it…\n`);
    for (const deadline = Date.now() + 300_000; ; await sleep(1000)) {
      const sp = await t.coordinator.getSavepoint(id);
      if (sp?.status === 'COMPLETED') {
        print(`savepoint ${sp.id}: checkpoint ${sp.checkpointId} at ${sp.location}`);
        break;
      }
      if (sp?.status === 'FAILED') throw new Error(`savepoint ${id} failed: ${sp.reason ?? 'unknown reason'}`);
      if (Date.now() > deadline) throw new Error(`savepoint ${id} is still ${sp?.status ?? 'REQUESTED'} after 5 minutes`);
    }
  }
  // first the flag, so the watchdog does not start what is being stopped
  await setOperatorStop(t.clients, t.names, true);
  for (const arn of await runningExecutions(t)) {
    await t.clients.sfn.send(new StopExecutionCommand({ executionArn: arn, cause: 'sluice stop' }));
    process.stderr.write(`  stopped ${arn}\n`);
  }
  if (t.local) {
    // the local stack's pollers belong to the process that runs it (sluice dev); nothing to disable here
    print(`stopped ${t.plan.job}: no coordinator. A local stack has no event source mappings: its stages stop with the process that runs them.`);
    return;
  }
  await setMappings(t, false);
  print(`stopped ${t.plan.job}: no coordinator, mappings disabled. \`sluice start\` (or \`sluice restore\`) runs it again.`);
}

export async function status(t: DeployedJob, print: Print = console.log): Promise<void> {
  const arn = requireWorkflow(t);
  const running = await t.clients.sfn.send(new ListExecutionsCommand({ stateMachineArn: arn, maxResults: 5 }));
  print(`job ${t.plan.job} (${t.local ? 'local stack' : `stack ${t.stackName}`})`);
  print('\nexecutions');
  for (const e of running.executions ?? []) print(`  ${e.status?.padEnd(9)} ${e.startDate?.toISOString()}  ${e.name}`);
  if (!running.executions?.length) print('  none');
  const list = await t.coordinator.list();
  print(`\nlast checkpoints\n${list.length ? formatCheckpoints(list.slice(-5), t.plan.checkpoint.retained) : '  none yet'}`);
  if (t.local) {
    print('\nlag per stage and alarms: CloudWatch is not part of a local stack (sluice dev shows the lag of every shard)');
    return;
  }
  const cw = new CloudWatchClient({});
  const end = new Date();
  const start = new Date(end.getTime() - 15 * 60_000);
  const queries = t.plan.stages.flatMap((s) => {
    const fn = t.outputs[outputKeyOfStage('function', s.id)];
    return fn ? [{ Id: `lag_${sanitizeName(s.id).replace(/-/g, '_')}`, Label: s.id, MetricStat: { Metric: { Namespace: 'AWS/Lambda', MetricName: 'IteratorAge', Dimensions: [{ Name: 'FunctionName', Value: fn }] }, Period: 60, Stat: 'Maximum' } }] : [];
  });
  if (queries.length) {
    const m = await cw.send(new GetMetricDataCommand({ StartTime: start, EndTime: end, MetricDataQueries: queries }));
    print('\nlag per stage (IteratorAge, max of the last minute with data)');
    for (const r of m.MetricDataResults ?? []) print(`  ${r.Label}: ${r.Values?.length ? `${Math.round(r.Values[0]!)} ms` : 'no data (idle)'}`);
  }
  const alarms = await cw.send(new DescribeAlarmsCommand({ AlarmNamePrefix: `${t.names.prefix}-` }));
  print('\nalarms');
  for (const a of [...(alarms.MetricAlarms ?? [])]) print(`  ${a.StateValue?.padEnd(17)} ${a.AlarmName}`);
}

export interface LogsOptions {
  readonly follow: boolean;
  readonly sinceMs: number;
  /** @default a client from the environment */
  readonly client?: CloudWatchLogsClient;
  /** @default standard output */
  readonly write?: (text: string) => void;
  /** how long to wait between polls with `follow`; @default 2 s */
  readonly pollMs?: number;
  /** ends a `follow` (a test; the command runs until interrupted) */
  readonly signal?: AbortSignal;
}

export async function logs(t: DeployedJob, stage: string, o: LogsOptions): Promise<void> {
  const fn = stage === 'coordinator' ? t.names.coordinatorFunction : t.plan.stages.some((s) => s.id === stage) ? `${t.names.prefix}-${stage}` : undefined;
  if (!fn) throw new Error(`no stage "${stage}": the job's stages are ${t.plan.stages.map((s) => s.id).join(', ')}, or coordinator`);
  if (t.local && !o.client && !process.env.AWS_ENDPOINT_URL_CLOUDWATCH_LOGS) {
    throw new Error(`a local stack keeps no CloudWatch Logs: sluice dev shows the functions' logs (its page and its output)`);
  }
  const client = o.client ?? new CloudWatchLogsClient({});
  const write = o.write ?? ((text: string) => process.stdout.write(text));
  const { follow, sinceMs } = o;
  let startTime = Date.now() - sinceMs;
  const seen = new Set<string>();
  for (;;) {
    let token: string | undefined;
    const events: FilteredLogEvent[] = [];
    do {
      const r = await client.send(new FilterLogEventsCommand({ logGroupName: `/aws/lambda/${fn}`, startTime, ...(token ? { nextToken: token } : {}) }));
      events.push(...(r.events ?? []));
      token = r.nextToken;
    } while (token);
    for (const e of events.sort((a, b) => (a.timestamp ?? 0) - (b.timestamp ?? 0))) {
      if (seen.has(e.eventId!)) continue;
      seen.add(e.eventId!);
      write(`${new Date(e.timestamp ?? 0).toISOString()} ${e.message?.trimEnd()}\n`);
      startTime = Math.max(startTime, e.timestamp ?? 0);
    }
    if (!follow || o.signal?.aborted) return;
    await sleep(o.pollMs ?? 2000);
    if (o.signal?.aborted) return;
  }
}

function deployJob(jobPath: string, opts: { stack?: string; prefix?: string; cdkArgs: string[] }): Promise<void> {
  return loadJob(jobPath).then(
    (job) =>
      new Promise<void>((ok, fail) => {
        const stack = opts.stack ?? `Sluice-${sanitizeName(job.name)}`;
        const args = ['cdk', 'deploy', stack, '-c', `sluice:job=${resolve(jobPath)}`, ...(opts.prefix ? ['-c', `sluice:prefix=${opts.prefix}`] : []), ...opts.cdkArgs];
        process.stderr.write(`npx ${args.join(' ')}\n`);
        // cdk's progress is forwarded, not inherited
        const child = spawn('npx', args, { stdio: ['ignore', 'pipe', 'pipe'] });
        child.stdout.on('data', (d: Buffer) => process.stderr.write(d));
        child.stderr.on('data', (d: Buffer) => process.stderr.write(d));
        child.on('error', fail);
        child.on('close', (code) => (code === 0 ? ok() : fail(new Error(`cdk deploy exited with ${code}`))));
      }),
  );
}

export function addOperateCommands(program: Command): void {
  const common = (c: Command) =>
    c
      .argument('<job>', 'job module (its default export is the job)')
      .option('--stack <name>', 'the stack that deployed the job (default: Sluice-<job>)')
      .option('--prefix <prefix>', 'resource prefix (default: from the stack\'s outputs)')
      .option('--bucket <name>', 'the job\'s data bucket (default: from the stack\'s outputs, or $SLUICE_BUCKET)');

  program
    .command('deploy')
    .description('deploy a job module with cdk deploy (the coordinator starts on deploy); arguments after -- go to cdk')
    .argument('<job>', 'job module')
    .argument('[cdkArgs...]', 'more cdk deploy arguments (after --)')
    .option('--stack <name>', 'stack name (default: Sluice-<job>)')
    .option('--prefix <prefix>', 'resource prefix (default: sluice-<job>)')
    .action(async (jobPath: string, cdkArgs: string[], opts: { stack?: string; prefix?: string }) => deployJob(jobPath, { ...opts, cdkArgs }));

  common(program.command('start').description('start a deployed job: enable its event source mappings and its coordinator workflow')).action(
    async (jobPath: string, opts: DeployedOptions) => startJob(await deployedJob(jobPath, opts)),
  );

  common(program.command('stop').description('stop a deployed job: its coordinator workflow and event source mappings (the watchdog leaves it stopped)'))
    .option('--savepoint', 'take a stop-with-savepoint first (restore it with sluice restore)')
    .action(async (jobPath: string, opts: DeployedOptions & { savepoint?: boolean }) => stopJob(await deployedJob(jobPath, opts), opts.savepoint ?? false));

  common(program.command('status').description('executions of the coordinator, last checkpoints, lag per stage, alarms')).action(async (jobPath: string, opts: DeployedOptions) =>
    status(await deployedJob(jobPath, opts)),
  );

  common(program.command('logs').description('print a stage function\'s logs (or the coordinator\'s)'))
    .argument('<stage>', 'stage id (s0, s1, …) or coordinator')
    .option('-f, --follow', 'keep printing new lines')
    .option('--since <minutes>', 'how far back to start', (v) => Number(v), 10)
    .action(async (jobPath: string, stage: string, opts: DeployedOptions & { follow?: boolean; since: number }) =>
      logs(await deployedJob(jobPath, opts), stage, { follow: opts.follow ?? false, sinceMs: opts.since * 60_000 }),
    );
}
