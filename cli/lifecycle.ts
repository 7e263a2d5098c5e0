/**
 * The lifecycle commands of the `sluice` CLI: checkpoints, savepoint, restore, rescale. They act on
 * a deployed job (endpoints from AWS_ENDPOINT_URL*, credentials and region from the usual AWS
 * settings), found by the job module and its stack's outputs (cli/deployed.ts).
 */
import { ListExecutionsCommand, StopExecutionCommand } from '@aws-sdk/client-sfn';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import { sleep } from '../shared/adapters/aws/clients.js';
import { readManifest, restoreIncompatibility, restoreSavepoint } from '../shared/adapters/aws/savepoints.js';
import type { SavepointRecord } from '../shared/coordinator/coordinator.js';
import { setOperatorStop } from '../shared/adapters/aws/coordinator-ports.js';
import { deployedJob, type DeployedJob, type DeployedOptions } from './deployed.js';
import { setMappings, startJob } from './operate.js';
import { formatCheckpoints, kb } from './checkpoint-table.js';

export { formatCheckpoints } from './checkpoint-table.js';

type Target = DeployedJob;
type TargetOptions = DeployedOptions;

const target = deployedJob;

/** Stops the running coordinator executions and the mappings after a stop-with-savepoint (the watchdog leaves the job stopped). */
async function stopWorkflow(t: Target): Promise<number | undefined> {
  if (!t.stateMachineArn) {
    process.stderr.write(`stack ${t.stackName} names no coordinator workflow\n`);
    return undefined;
  }
  await setOperatorStop(t.clients, t.names, true);
  const r = await t.clients.sfn.send(new ListExecutionsCommand({ stateMachineArn: t.stateMachineArn, statusFilter: 'RUNNING' }));
  for (const e of r.executions ?? []) {
    await t.clients.sfn.send(new StopExecutionCommand({ executionArn: e.executionArn!, cause: 'sluice savepoint --stop' }));
  }
  // a local stack has no mappings: its stages stop with the process that runs them
  if (!t.local) await setMappings(t, false).catch((err: unknown) => process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`));
  return r.executions?.length ?? 0;
}

async function waitForSavepoint(t: Target, id: string, timeoutMs: number): Promise<SavepointRecord> {
  const steps = ['REQUESTED', 'IN_PROGRESS', 'COMPLETED'];
  const bar = new cliProgress.SingleBar(
    { format: 'savepoint {id} {bar} {status}', stream: process.stderr, hideCursor: true },
    cliProgress.Presets.shades_classic,
  );
  bar.start(steps.length - 1, 0, { id, status: 'REQUESTED' });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      const sp = await t.coordinator.getSavepoint(id);
      const status = sp?.status ?? 'REQUESTED';
      bar.update(Math.max(0, steps.indexOf(status)), { status: sp?.checkpointId !== undefined ? `${status} (checkpoint ${sp.checkpointId})` : status });
      if (sp?.status === 'COMPLETED') return sp;
      if (sp?.status === 'FAILED') throw new Error(`savepoint ${id} failed: ${sp.reason ?? 'unknown reason'}`);
      if (Date.now() > deadline) {
        throw new Error(`savepoint ${id} is still ${status} after ${timeoutMs} ms: is the coordinator workflow running? (the request stays until a checkpoint takes it)`);
      }
      await sleep(500);
    }
  } finally {
    bar.stop();
  }
}

async function rescaleInPlace(t: Target, stage: string, shards: number, timeoutMs: number): Promise<void> {
  const req = await t.coordinator.rescales.request(stage, shards);
  const phases = ['requested', 'draining', 'resharding', 'done'];
  const bar = new cliProgress.SingleBar({ format: 'rescale {stage} {bar} {phase}', stream: process.stderr, hideCursor: true }, cliProgress.Presets.shades_classic);
  bar.start(phases.length - 1, 0, { stage, phase: 'requested' });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      const r = await t.coordinator.rescales.get();
      const phase = r?.phase ?? 'requested';
      bar.update(Math.max(0, phases.indexOf(phase)), { stage, phase: r?.checkpointId !== undefined ? `${phase} (announced by checkpoint ${r.checkpointId})` : phase });
      if (phase === 'done') break;
      if (Date.now() > deadline) throw new Error(`the rescale is still ${phase} after ${timeoutMs} ms: is the coordinator workflow running? (the request stays until it is done)`);
      await sleep(500);
    }
  } finally {
    bar.stop();
  }
  console.log(
    `stage ${stage}: ${req.fromShards} → ${shards} shards. Set its parallelism to ${shards} in the job module before the next deploy, ` +
      'or the deploy reshards the stream back.',
  );
}

async function restore(t: Target, id: string, startWorkflow: boolean): Promise<void> {
  const m = await readManifest(t, id);
  const why = restoreIncompatibility(t.plan, m);
  if (why) throw new Error(`cannot restore savepoint ${id}: ${why}`);
  for (const s of t.plan.stages) {
    const before = m.stages.find((x) => x.id === s.id)?.parallelism;
    process.stderr.write(`  ${s.id}: parallelism ${before ?? '?'} → ${s.parallelism}${before !== undefined && before !== s.parallelism ? ' (rescaled)' : ''}\n`);
  }
  const bar = new cliProgress.SingleBar({ format: 'restoring {bar} {value}/{total} key groups', stream: process.stderr, hideCursor: true }, cliProgress.Presets.shades_classic);
  bar.start(m.operators.reduce((a, o) => a + o.keyGroups.length, 0), 0);
  let r;
  try {
    r = await restoreSavepoint(t, id, (done) => bar.update(done));
  } finally {
    bar.stop();
  }
  console.log(`restored savepoint ${id} (checkpoint ${m.checkpointId}): ${r.rows} state rows, ${r.timers} timers, ${r.instances} instances; the job goes on from epoch ${r.epoch}`);
  // what the stop disabled is enabled again: the mappings, the coordinator (and the watchdog's watch)
  if (startWorkflow) await startJob(t);
}

export function addLifecycleCommands(program: Command): void {
  const common = (c: Command) =>
    c
      .argument('<job>', 'job module (its default export is the job)')
      .option('--stack <name>', 'the stack that deployed the job (default: Sluice-<job>); names come from its outputs')
      .option('--prefix <prefix>', 'resource prefix (default: from the stack\'s outputs)')
      .option('--bucket <name>', 'the job\'s data bucket (default: from the stack\'s outputs, or $SLUICE_BUCKET)');

  common(program.command('checkpoints').description('list the checkpoints of a deployed job: status, duration, bytes and keys flushed; and its savepoints'))
    .option('--json', 'print the records as JSON')
    .action(async (jobPath: string, opts: TargetOptions & { json?: boolean }) => {
      const t = await target(jobPath, opts);
      const [list, savepoints] = await Promise.all([t.coordinator.list(), t.coordinator.listSavepoints()]);
      if (opts.json) {
        console.log(JSON.stringify({ checkpoints: list, savepoints }, null, 2));
        return;
      }
      console.log(list.length ? formatCheckpoints(list, t.plan.checkpoint.retained) : 'no checkpoints yet');
      if (savepoints.length) {
        console.log('\nsavepoints');
        for (const s of savepoints) {
          console.log(`  ${s.id}  ${s.status}${s.checkpointId !== undefined ? `  checkpoint ${s.checkpointId}` : ''}${s.stop ? '  (stop)' : ''}${s.location ? `  ${s.location}` : ''}${s.rows !== undefined ? `  ${s.rows} rows, ${s.timers} timers, ${kb(s.bytes)}` : ''}`);
        }
      }
    });

  common(program.command('savepoint').description('take a savepoint of a deployed job (the next checkpoint becomes one) and wait for it'))
    .option('--id <id>', 'savepoint id (default: sp-<time>)')
    .option('--stop', 'stop with the savepoint: no checkpoint follows it, and the coordinator workflow is stopped')
    .option('--timeout <ms>', 'how long to wait', (v) => Number(v), 300_000)
    .action(async (jobPath: string, opts: TargetOptions & { id?: string; stop?: boolean; timeout: number }) => {
      const t = await target(jobPath, opts);
      const req = await t.coordinator.requestSavepoint({ ...(opts.id !== undefined ? { id: opts.id } : {}), stop: opts.stop ?? false });
      const sp = await waitForSavepoint(t, req.id, opts.timeout);
      console.log(`savepoint ${sp.id}: checkpoint ${sp.checkpointId}, ${sp.rows} state rows, ${sp.timers} timers, ${kb(sp.bytes)} at ${sp.location}`);
      if (opts.stop) {
        const n = await stopWorkflow(t);
        console.log(
          `${n === undefined ? `could not find the ${t.names.stateMachine} workflow: stop its executions by hand (the job takes no checkpoint anyway)` : `stopped ${n} coordinator execution(s)${t.local ? '' : ' and the event source mappings'}`}. ` +
            '`sluice restore` enables them again.',
        );
      }
    });

  common(program.command('restore').description('restore a deployed, stopped job from a savepoint (its parallelism may differ), enable its event source mappings and start its workflow'))
    .requiredOption('--savepoint <id>', 'savepoint id')
    .option('--no-start', 'leave the mappings disabled and the workflow stopped afterwards')
    .action(async (jobPath: string, opts: TargetOptions & { savepoint: string; start: boolean }) => {
      await restore(await target(jobPath, opts), opts.savepoint, opts.start);
    });

  common(
    program
      .command('rescale')
      .description(
        'change the parallelism of a job at a checkpoint boundary. With --stage and --shards, in place: the stage\'s input ' +
          'stream is resharded while the job runs. Otherwise without --savepoint, stop it with a savepoint (then deploy the job ' +
          'module with the new parallelism); with --savepoint, restore that savepoint into the redeployed job',
      ),
  )
    .option('--savepoint <id>', 'the stop-with-savepoint to restore')
    .option('--stage <id>', 'rescale this stage in place (see `sluice plan` for stage ids)')
    .option('--shards <n>', 'its new number of shards (between half and double the current one)', (v) => Number(v))
    .option('--timeout <ms>', 'how long to wait for the savepoint or the reshard', (v) => Number(v), 300_000)
    .action(async (jobPath: string, opts: TargetOptions & { savepoint?: string; stage?: string; shards?: number; timeout: number }) => {
      const t = await target(jobPath, opts);
      if (opts.stage !== undefined || opts.shards !== undefined) {
        if (opts.stage === undefined || opts.shards === undefined) throw new Error('an in-place rescale needs both --stage and --shards');
        await rescaleInPlace(t, opts.stage, opts.shards, opts.timeout);
        return;
      }
      if (opts.savepoint === undefined) {
        const req = await t.coordinator.requestSavepoint({ stop: true });
        const sp = await waitForSavepoint(t, req.id, opts.timeout);
        await stopWorkflow(t);
        console.log(
          `stopped with savepoint ${sp.id} (checkpoint ${sp.checkpointId}), coordinator and event source mappings included. Now change the ` +
            `parallelism in the job module, deploy it, and run: sluice rescale ${jobPath} --savepoint ${sp.id}`,
        );
        return;
      }
      await restore(t, opts.savepoint, true);
    });
}
