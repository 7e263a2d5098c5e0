/**
 * Checkpoints in Express rounds (`expressCheckpoints`): the Standard execution allocates (or parks)
 * and starts an Express round that waits for acks, commits, pauses and allocates the next
 * checkpoint. The synthesized definitions are checked (Express has no task tokens and no `.sync`),
 * then both run in the local interpreter with the coordinator function played by stubs that keep the
 * loop's contract (shared/coordinator/loop.ts: begin, poll, commit, next).
 */
import { createRequire } from 'node:module';
import { Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { collectSink, job as defineJob } from '../shared/api/index.js';
import { LocalStepFunctions } from '../local/step-functions-local.js';
import { coordinatorDefinition, newApp, type CoordinatorDefinition } from './coordinator-definition.js';
import { ACK_POLL_SECONDS } from './ack-wait.js';
import { COORDINATOR_STATES as S, CoordinatorStateMachine, pauseSeconds } from './coordinator-state-machine.js';
import type { CheckpointSettings } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { synthJob, threeStageJob } from './test-support.js';

type Validate = (definition: unknown) => { isValid: boolean; errors: Array<{ message: string }> };
const aslValidator = createRequire(import.meta.url)('asl-validator') as Validate;

let d: CoordinatorDefinition;
beforeAll(() => {
  d = coordinatorDefinition(clickstream, { expressCheckpoints: true });
});

describe('definitions', () => {
  it('a Standard coordinator that starts Express rounds; both valid ASL', () => {
    const { template } = synthJob(clickstream, { expressCheckpoints: true });
    const types = Object.values(template.findResources('AWS::StepFunctions::StateMachine')).map((r) => [r.Properties.StateMachineName, r.Properties.StateMachineType]);
    expect(types).toEqual(expect.arrayContaining([['sluice-clickstream-coordinator', 'STANDARD'], ['sluice-clickstream-coordinator-rounds', 'EXPRESS']]));
    expect(aslValidator(d.definition).errors).toEqual([]);
    expect(aslValidator(d.rounds!.definition).errors).toEqual([]);
    expect(d.rounds!.stateMachineArn).toBe('arn:aws:states:us-east-1:000000000000:stateMachine:sluice-clickstream-coordinator-rounds');
    const round = d.definition.States[S.round] as { Resource: string; Parameters: { StateMachineArn: string } };
    expect(round.Resource).toBe('arn:aws:states:::states:startExecution.sync:2');
    expect(round.Parameters.StateMachineArn).toBe(d.rounds!.stateMachineArn);
  });

  it('passes cdk-nag: the workflow may start only its own rounds, every wildcard acknowledged with its reason', () => {
    const { stack } = synthJob(clickstream, { expressCheckpoints: true });
    expect(new AwsSolutionsChecks().validateScope(stack).violations.map((v) => v.ruleName)).toEqual([]);
  });

  it('the round uses neither task tokens nor .sync (Express supports neither); it polls the acks and pauses with Wait states', () => {
    const states = Object.values(d.rounds!.definition.States) as Array<{ Type: string; Resource?: string; Seconds?: number }>;
    for (const st of states) expect(String(st.Resource ?? '')).not.toMatch(/waitForTaskToken|\.sync/);
    const waits = Object.entries(d.rounds!.definition.States).filter(([, st]) => st.Type === 'Wait').map(([name, st]) => [name, st.Seconds]);
    expect(waits).toEqual(expect.arrayContaining([[S.ackWait, ACK_POLL_SECONDS], [S.pause, pauseSeconds(planJob(clickstream).checkpoint)]]));
  });

  it('after allocating, the round first reads the acks once the barrier can have crossed the exchange hops: their windows on the longest path (a stage\'s own window counts; none without windows)', () => {
    type States = Record<string, { Type: string; Seconds?: number; Next?: string; Choices?: Array<{ StringEquals?: string; Next: string }> }>;
    const roundStates = (template: Template): States => {
      const [express] = Object.values(template.findResources('AWS::StepFunctions::StateMachine', { Properties: { StateMachineType: 'EXPRESS' } }));
      const parts = (express!.Properties.DefinitionString as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1];
      // the tokens (partition, function ARN) read as 'aws'
      const definition = JSON.parse(parts.map((x) => (typeof x === 'string' ? x : 'aws')).join('')) as { States: States };
      expect(aslValidator(definition).errors).toEqual([]);
      return definition.States;
    };
    const afterAllocating = (states: States) => states[S.allocated]!.Choices!.find((c) => c.StringEquals === 'allocated')!.Next;
    // s0 (source) → s1 → s2: two exchange hops of the default 1 s window (a fifth of the 7 s pause)
    const three = roundStates(synthJob(threeStageJob(), { expressCheckpoints: true }).template);
    expect(afterAllocating(three)).toBe(S.barrierWait);
    expect(three[S.barrierWait]).toMatchObject({ Type: 'Wait', Seconds: 2, Next: S.poll });
    expect(three[S.ackWait]).toMatchObject({ Seconds: ACK_POLL_SECONDS, Next: S.poll });
    const slowLast = roundStates(synthJob(threeStageJob(), { expressCheckpoints: true, stageSettings: { s2: { maxBatchingWindow: Duration.seconds(4) } } }).template);
    expect(slowLast[S.barrierWait]!.Seconds).toBe(5);
    // the source stage's window is not waited for: the barrier may land as one closes
    const slowSource = roundStates(synthJob(threeStageJob(), { expressCheckpoints: true, stageSettings: { s0: { maxBatchingWindow: Duration.seconds(4) } } }).template);
    expect(slowSource[S.barrierWait]!.Seconds).toBe(2);
    // clickstream's 2 s interval makes no window: no wait before the first read
    const click = roundStates(synthJob(clickstream, { expressCheckpoints: true }).template);
    expect(click[S.barrierWait]).toBeUndefined();
    expect(afterAllocating(click)).toBe(S.ackWait);
  });

  it('refuses several checkpoints in flight and pauses longer than a minute, naming the setting', () => {
    const concurrent = defineJob('concurrent', { checkpoint: { intervalMs: 1000, timeoutMs: 30_000, maxConcurrent: 2 } });
    concurrent.source<{ k: string }>({ name: 'in', shards: 1 }).map((e) => e).sinkTo(collectSink('out'));
    expect(() => synthJob(concurrent, { expressCheckpoints: true })).toThrow(/maxConcurrent/);
    const slow = defineJob('slow', { checkpoint: { intervalMs: 120_000 } });
    slow.source<{ k: string }>({ name: 'in', shards: 1 }).map((e) => e).sinkTo(collectSink('out'));
    expect(() => synthJob(slow, { expressCheckpoints: true })).toThrow(/pause of at most 60 s.*120 s/);
  });

  it('by default runs rounds where they are allowed and cost less, and the Standard loop elsewhere instead of throwing; false forces Standard', () => {
    const stack = new Stack(newApp({ bundle: false }), 'S');
    const fn = new lambda.Function(stack, 'F', { runtime: lambda.Runtime.NODEJS_22_X, handler: 'x', code: lambda.Code.fromInline('x') });
    const base = planJob(clickstream).checkpoint;
    const machine = (name: string, checkpoint: Partial<CheckpointSettings>, expressCheckpoints?: boolean) =>
      new CoordinatorStateMachine(stack, name, { stateMachineName: name, coordinatorFunction: fn, checkpoint: { ...base, ...checkpoint }, ...(expressCheckpoints !== undefined ? { expressCheckpoints } : {}) });
    const rounds = (m: CoordinatorStateMachine) => m.rounds !== undefined;
    expect(rounds(machine('ten', { intervalMs: 10_000 }))).toBe(true);
    expect(rounds(machine('fiftytwo', { intervalMs: 52_000 }))).toBe(true);
    // three checkpoints a round: four Standard transitions and the round's duration cost more than nine
    expect(rounds(machine('fiftythree', { intervalMs: 53_000 }))).toBe(false);
    expect(rounds(machine('fiftythreeForced', { intervalMs: 53_000 }, true))).toBe(true);
    expect(rounds(machine('slow', { intervalMs: 120_000 }))).toBe(false);
    expect(rounds(machine('concurrent', { intervalMs: 1000, maxConcurrent: 2 }))).toBe(false);
    expect(rounds(machine('off', { intervalMs: 10_000 }, false))).toBe(false);
    // the rounds keep no execution history: their failed steps are logged, with their data, to their own log group
    const t = Template.fromStack(stack);
    const roundsSm = Object.values(t.findResources('AWS::StepFunctions::StateMachine')).find((r) => r.Properties.StateMachineName === 'ten-rounds')!;
    expect(roundsSm.Properties.StateMachineType).toBe('EXPRESS');
    expect(roundsSm.Properties.LoggingConfiguration).toMatchObject({ Level: 'ERROR', IncludeExecutionData: true });
    t.hasResourceProperties('AWS::Logs::LogGroup', { LogGroupName: '/aws/vendedlogs/states/ten-rounds', RetentionInDays: 30 });
  });
});

describe('execution in the local Step Functions interpreter', () => {
  interface Script {
    /** checkpoints to take; the begin after the last parks and the run ends */
    readonly checkpoints: number;
    /** checkpoints a round commits before it has no time for another */
    readonly perRound: number;
    /** checkpoints the coordinator aborts as stuck while the round waits for them */
    readonly abort?: number[];
    readonly failCommit?: number[];
    /** checkpoints whose first poll says the round is out of time */
    readonly late?: number[];
  }

  async function run(script: Script) {
    const calls: string[] = [];
    const startedAt = new Set<string>();
    let n = 0;
    let inRound = 0;
    const polled = new Set<number>();
    const lateDone = new Set<number>();
    const failed = new Set<number>();
    let sf!: LocalStepFunctions;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const handler = async (payload: unknown) => {
      const p = payload as { action: string; checkpointId?: number; taskToken?: string; iteration: number; roundStartedAt?: string };
      calls.push(`${p.action}${p.checkpointId ?? ''}`);
      if (p.roundStartedAt !== undefined) {
        expect(Number.isFinite(Date.parse(p.roundStartedAt))).toBe(true);
        startedAt.add(p.roundStartedAt);
      }
      switch (p.action) {
        case 'begin':
          if (n >= script.checkpoints) {
            finish(); // parks: nobody answers
            return {};
          }
          inRound = 0;
          n++;
          setImmediate(() => sf.sendTaskSuccess(p.taskToken!, JSON.stringify({ iteration: p.iteration + 1, ckpt: { checkpointId: n } })));
          return {};
        case 'poll': {
          const id = p.checkpointId!;
          if (script.late?.includes(id) && !lateDone.has(id)) {
            lateDone.add(id);
            return { acked: false, aborted: false, late: true };
          }
          if (script.abort?.includes(id)) return { acked: false, aborted: true, late: false };
          const first = !polled.has(id);
          polled.add(id);
          return { acked: !first, aborted: false, late: false };
        }
        case 'commit':
          if (script.failCommit?.includes(p.checkpointId!) && p.roundStartedAt !== undefined) {
            failed.add(p.checkpointId!);
            throw new Error('the sink is down');
          }
          return p.roundStartedAt === undefined ? { checkpointId: p.checkpointId } : { checkpointId: p.checkpointId, more: ++inRound < script.perRound };
        case 'abort':
          return {};
        case 'next':
          if (n >= script.checkpoints) return { iteration: p.iteration, ckpt: { checkpointId: n }, end: 'idle' };
          n++;
          return { iteration: p.iteration + 1, ckpt: { checkpointId: n }, end: 'allocated' };
      }
      throw new Error(`unexpected action ${p.action}`);
    };
    const lambdaHandlers = { [d.coordinatorFunctionArn]: handler };
    const rounds = new LocalStepFunctions({ definition: d.rounds!.definition, stateMachineArn: d.rounds!.stateMachineArn, lambdaHandlers, waitTimeOverrides: { [S.pause]: 2, [S.ackWait]: 2 }, retryIntervalOverrides: { [S.commit]: 1 } });
    sf = new LocalStepFunctions({ definition: d.definition, stateMachineArn: d.stateMachineArn, lambdaHandlers, nested: [rounds], waitTimeOverrides: { [S.pause]: 2 }, retryIntervalOverrides: { [S.commitAgain]: 1 } });
    const { executionArn } = await sf.startExecution({ iteration: 0 });
    await finished;
    // the interpreter reports a state entered asynchronously: wait until the last Allocate is counted
    const begins = calls.filter((c) => c === 'begin').length;
    for (let i = 0; i < 400 && (sf.transitions(executionArn).byState[S.allocate] ?? 0) < begins; i++) await new Promise((r) => setTimeout(r, 5));
    const transitions = sf.transitions(executionArn);
    const roundExecutions = rounds.executions();
    await sf.stop();
    return { calls, transitions, roundExecutions, rounds: startedAt.size };
  }

  it('waits for the acks by polling, commits, pauses and allocates inside the round: far fewer Standard transitions than checkpoints', async () => {
    const r = await run({ checkpoints: 12, perRound: 4 });
    expect(r.calls.slice(0, 8)).toEqual(['begin', 'poll1', 'poll1', 'commit1', 'next', 'poll2', 'poll2', 'commit2']);
    expect(r.calls.filter((c) => c.startsWith('commit'))).toEqual(Array.from({ length: 12 }, (_, i) => `commit${i + 1}`));
    expect(r.roundExecutions).toHaveLength(3);
    expect(r.roundExecutions.every((e) => e.status === 'SUCCEEDED')).toBe(true);
    // Init, Resume, then per round Allocate, Round, Rounded?, Pause; the last Allocate parks
    expect(r.transitions.byState).toEqual({ Init: 1, Resume: 1, [S.allocate]: 4, [S.round]: 3, [S.rounded]: 3, [S.pause]: 3 });
    expect(r.transitions.total / 12).toBeLessThan(1.5);
  });

  it('a round out of time hands its open checkpoint to the next round, which goes on waiting for it', async () => {
    const r = await run({ checkpoints: 3, perRound: 10, late: [2] });
    expect(r.calls.filter((c) => c !== 'next')).toEqual(['begin', 'poll1', 'poll1', 'commit1', 'poll2', 'poll2', 'poll2', 'commit2', 'poll3', 'poll3', 'commit3', 'begin']);
    expect(r.transitions.byState[S.round]).toBe(2);
  });

  it('a commit the round cannot do is retried by the Standard execution (CommitAgain); after a stuck checkpoint is aborted the round goes on', async () => {
    const failing = await run({ checkpoints: 3, perRound: 10, failCommit: [2] });
    expect(failing.calls.filter((c) => c.startsWith('commit'))).toEqual(['commit1', 'commit2', 'commit2', 'commit2', 'commit3']);
    expect(failing.transitions.byState[S.commitAgain]).toBe(1);
    const stuck = await run({ checkpoints: 3, perRound: 10, abort: [2] });
    expect(stuck.calls.filter((c) => c.startsWith('commit'))).toEqual(['commit1', 'commit3']);
    expect(stuck.transitions.byState[S.round]).toBe(1);
  });
});
