/**
 * `sluice status`, `stop` and `start` against a local stack (the emulators and the local Step
 * Functions of LocalJobRunner, reached over the wire with the endpoints `sluice dev` exports), and
 * `logs` where it can run: what a local stack does not have (CloudWatch metrics, alarms, logs, event
 * source mappings) is said, never asked of AWS.
 */
import { DescribeExecutionCommand, ListExecutionsCommand } from '@aws-sdk/client-sfn';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../local/emulators.js';
import { LocalJobRunner } from '../local/runner.js';
import { controlKey } from '../shared/adapters/aws/dynamo-checkpoint-store.js';
import { ENV } from '../shared/plan/resources.js';
import { deployedJob, type DeployedJob } from './deployed.js';
import { loadJob } from './load-job.js';
import { logs, startJob, status, stopJob } from './operate.js';

const JOB = 'examples/clickstream/job.ts';

describe('lifecycle commands against a local stack', () => {
  let emulators: LocalEmulators;
  let runner: LocalJobRunner;
  let t: DeployedJob;
  const saved = { ...process.env };

  beforeAll(async () => {
    emulators = await startEmulators();
    runner = await LocalJobRunner.start(await loadJob(JOB), { emulators, prefix: 'optest', checkpointIntervalMs: 300 });
    await runner.awaitCheckpoints(1, new Date(), 120_000);
    // what `sluice dev` exports
    Object.assign(process.env, runner.stackEnv, { [ENV.prefix]: runner.names.prefix, [ENV.bucket]: runner.names.bucket });
    t = await deployedJob(JOB, {});
  }, 180_000);

  afterAll(async () => {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
    await runner?.stop();
    await emulators?.stop();
  });

  const collect = () => {
    const lines: string[] = [];
    return { lines, print: (l: string) => lines.push(...l.split('\n')), text: () => lines.join('\n') };
  };
  const executions = async () => (await t.clients.sfn.send(new ListExecutionsCommand({ stateMachineArn: t.stateMachineArn! }))).executions ?? [];
  const stopFlag = async () => (await t.clients.doc.send(new GetCommand({ TableName: t.names.controlTable, Key: controlKey.loop, ConsistentRead: true }))).Item?.stopped;

  it('finds the local workflow by its local ARN (no CloudFormation)', async () => {
    expect(t.local).toBe(true);
    expect(t.stateMachineArn).toBe(`arn:aws:states:${emulators.region}:000000000000:stateMachine:optest-coordinator`);
    expect((await executions()).map((e) => e.status)).toContain('RUNNING');
  });

  it('status prints the running execution and the completed checkpoints, and says the local stack has no CloudWatch', async () => {
    const out = collect();
    await status(t, out.print);
    const running = (await executions()).filter((e) => e.status === 'RUNNING');
    expect(out.lines[0]).toBe('job clickstream (local stack)');
    expect(out.lines.filter((l) => /^\s+RUNNING\s/.test(l))).toEqual([expect.stringContaining(running[0]!.name!)]);
    expect(out.text()).toMatch(/^\d+\s+COMPLETED\s/m);
    const done = (await t.coordinator.list()).filter((c) => c.status === 'COMPLETED').map((c) => c.checkpointId);
    expect(done.length).toBeGreaterThan(0);
    expect(out.text()).toContain(`\n${done.at(-1)} `);
    expect(out.text()).toMatch(/CloudWatch is not part of a local stack/);
  });

  it('stop stops the workflow and sets the stop flag; status shows it; start runs it again and checkpoints resume', async () => {
    const before = (await executions()).filter((e) => e.status === 'RUNNING').map((e) => e.executionArn!);
    const out = collect();
    await stopJob(t, false, out.print);
    expect(out.text()).toMatch(/^stopped clickstream: no coordinator\. A local stack has no event source mappings/);
    for (const arn of before) expect((await t.clients.sfn.send(new DescribeExecutionCommand({ executionArn: arn }))).status).toBe('ABORTED');
    expect(typeof (await stopFlag())).toBe('string');
    const after = collect();
    await status(t, after.print);
    expect(after.lines.some((l) => /^\s+RUNNING\s/.test(l))).toBe(false);
    expect(after.lines.some((l) => /^\s+ABORTED\s/.test(l))).toBe(true);

    const last = Math.max(...(await t.coordinator.list()).map((c) => c.checkpointId));
    const started = collect();
    await startJob(t, started.print);
    expect(started.text()).toMatch(/^started the coordinator workflow: arn:aws:states:/);
    expect(await stopFlag()).toBeUndefined();
    const deadline = Date.now() + 120_000;
    while (!(await t.coordinator.list()).some((c) => c.checkpointId > last && c.status === 'COMPLETED')) {
      if (Date.now() > deadline) throw new Error(`no checkpoint after ${last} completed within 120 s of sluice start`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }, 180_000);

  it('stop --savepoint takes a savepoint first, then stops', async () => {
    const out = collect();
    await stopJob(t, true, out.print);
    const m = /^savepoint (\S+): checkpoint (\d+) at (\S+)$/m.exec(out.text());
    expect(m, out.text()).not.toBeNull();
    const sp = await t.coordinator.getSavepoint(m![1]!);
    expect(sp?.status).toBe('COMPLETED');
    expect(sp?.checkpointId).toBe(Number(m![2]));
    expect((await executions()).filter((e) => e.status === 'RUNNING')).toEqual([]);
  }, 180_000);

  it('logs names the stages it knows, and refuses a local stack instead of asking AWS', async () => {
    await expect(logs(t, 's9', { follow: false, sinceMs: 60_000 })).rejects.toThrow(/no stage "s9": the job's stages are s0, s1, or coordinator/);
    await expect(logs(t, 's0', { follow: false, sinceMs: 60_000 })).rejects.toThrow(/a local stack keeps no CloudWatch Logs: sluice dev shows the functions' logs/);
  });
});
