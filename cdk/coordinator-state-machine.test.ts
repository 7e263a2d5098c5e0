/**
 * The coordinator workflow, as synthesized: the definition is taken from the template with every
 * token resolved (`coordinatorDefinition`), validated with asl-validator, checked state by state,
 * and executed in the ASL interpreter the local runner uses (aws-local-stepfunctions), with the
 * coordinator's tasks played by stubs.
 */
import { createRequire } from 'node:module';
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { beforeAll, describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { collectSink, job as defineJob } from '../shared/api/index.js';
import { CHECKPOINT_IN_FLIGHT } from '../shared/coordinator/protocol.js';
import { LOOP_ERRORS } from '../shared/coordinator/wake.js';
import { LocalStepFunctions } from '../local/step-functions-local.js';
import { planJob } from '../shared/plan/planner.js';
import { coordinatorDefinition, newApp } from './coordinator-definition.js';
import type { CoordinatorDefinition } from './coordinator-definition.js';
import { COMMIT_TIMEOUT_SECONDS, COORDINATOR_STATES as S, CoordinatorStateMachine, IDLE_RECHECK_SECONDS, LAMBDA_SERVICE_ERRORS, allocateRetryAttempts, allocateRetryMaxDelaySeconds, commitPauseOverride, pauseSeconds, wholeSeconds } from './coordinator-state-machine.js';
import { threeStageJob } from './test-support.js';

type Validate = (definition: unknown) => { isValid: boolean; errors: Array<{ message: string }>; errorsText: () => string };
const aslValidator = createRequire(import.meta.url)('asl-validator') as Validate;

// aws-local-stepfunctions needs Promise.withResolvers (Node 22); polyfill it on Node 20.
const P = Promise as unknown as { withResolvers?: () => unknown };
P.withResolvers ??= () => {
  let resolve!: (v: unknown) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise((a, b) => {
    resolve = a;
    reject = b;
  });
  return { promise, resolve, reject };
};

type State = Record<string, unknown> & { Type: string };
let click: CoordinatorDefinition;
let orders: CoordinatorDefinition;
const st = (d: CoordinatorDefinition, name: string) => d.definition.States[name] as State;

beforeAll(() => {
  click = coordinatorDefinition(clickstream);
  orders = coordinatorDefinition(threeStageJob(), { region: 'eu-west-1', account: '123456789012', prefix: 'orders-dev' });
});

describe('definition with several checkpoints in flight (checkpoint.maxConcurrent 2)', () => {
  let d: CoordinatorDefinition;
  beforeAll(() => {
    const j = defineJob('concurrent', { checkpoint: { intervalMs: 1000, timeoutMs: 30_000, maxConcurrent: 2 } });
    j.source<{ k: string }>({ name: 'in', shards: 1 }).map((e) => e).sinkTo(collectSink('out'));
    d = coordinatorDefinition(j);
  });

  it('is valid ASL', () => {
    const result = aslValidator(d.definition);
    expect(result.errors).toEqual([]);
  });

  it('allocates, injects and settles; waits on the oldest checkpoint only when the window is full', () => {
    const next = (name: string) => st(d, name).Next;
    expect(next(S.allocate)).toBe(S.inject);
    expect(next(S.inject)).toBe(S.settle);
    expect(next(S.settle)).toBe(S.full);
    expect(st(d, S.full).Choices).toEqual([{ Variable: '$.settled.open', NumericGreaterThanEquals: 2, Next: S.awaitOldest }]);
    expect(st(d, S.full).Default).toBe(S.pause);
    expect(next(S.awaitOldest)).toBe(S.settle);
    expect((st(d, S.awaitOldest).Parameters as { Payload: unknown }).Payload).toEqual({ action: 'await', 'checkpointId.$': '$.settled.oldest', 'taskToken.$': '$$.Task.Token' });
    expect((st(d, S.settle).Parameters as { Payload: unknown }).Payload).toEqual({ action: 'settle' });
    // a full window (or a stop or a reshard holding checkpoints back) is settled, not retried in place
    expect((st(d, S.allocate).Catch as Array<{ ErrorEquals: string[]; Next: string }>).map((c) => [c.ErrorEquals, c.Next])).toEqual([[['CheckpointInFlightError'], S.settle]]);
    expect(d.definition.States[S.awaitAcks]).toBeUndefined();
  });
});

describe('definition', () => {
  it('is valid ASL (asl-validator: no errors)', () => {
    for (const d of [click, orders]) {
      const result = aslValidator(d.definition);
      expect(result.errors).toEqual([]);
      expect(result.isValid).toBe(true);
    }
  });

  it('has every token resolved to the account, region and physical names given', () => {
    const text = JSON.stringify(click.definition);
    expect(text).not.toMatch(/Fn::|"Ref"|\$\{Token/);
    expect(click.coordinatorFunctionArn).toBe('arn:aws:lambda:us-east-1:000000000000:function:sluice-clickstream-coordinator');
    expect(click.stateMachineArn).toBe('arn:aws:states:us-east-1:000000000000:stateMachine:sluice-clickstream-coordinator');
    expect(orders.coordinatorFunctionArn).toBe('arn:aws:lambda:eu-west-1:123456789012:function:orders-dev-coordinator');
    expect((st(orders, S.allocate).Parameters as { FunctionName: string }).FunctionName).toBe(orders.coordinatorFunctionArn);
    expect(click.functionNameToHandler).toEqual({
      'sluice-clickstream-coordinator': { kind: 'coordinator' },
      'sluice-clickstream-s0': { kind: 'operator', stageId: 's0' },
      'sluice-clickstream-s1': { kind: 'operator', stageId: 's1' },
    });
    expect(click.functionArnToHandler[click.coordinatorFunctionArn]).toEqual({ kind: 'coordinator' });
  });

  it('loops Allocate → AwaitAcks → Commit → Allocate: three transitions per checkpoint', () => {
    const d = click.definition;
    expect(d.StartAt).toBe(S.init);
    expect(Object.keys(d.States).sort()).toEqual([S.init, S.fresh, S.resume, S.allocate, S.awaitAcks, S.overdue, S.extend, S.commit, S.abort, S.pause, S.done].sort());
    const next = (name: string) => st(click, name).Next;
    expect(next(S.fresh)).toBe(S.allocate);
    expect(next(S.resume)).toBe(S.allocate);
    expect(next(S.allocate)).toBe(S.awaitAcks);
    expect(next(S.awaitAcks)).toBe(S.commit);
    expect(next(S.commit)).toBe(S.allocate);
    expect(next(S.abort)).toBe(S.pause);
    expect(next(S.pause)).toBe(S.allocate);
    expect(st(click, S.done).Type).toBe('Succeed');
  });

  it('sends the loop payloads (action, iteration, checkpointId, taskToken, reason)', () => {
    const payload = (name: string) => (st(click, name).Parameters as { Payload: unknown }).Payload;
    expect(payload(S.allocate)).toEqual({ action: 'begin', 'iteration.$': '$.iteration', 'taskToken.$': '$$.Task.Token' });
    expect(payload(S.awaitAcks)).toEqual({ action: 'await', 'checkpointId.$': '$.ckpt.checkpointId', 'taskToken.$': '$$.Task.Token' });
    expect(payload(S.commit)).toEqual({ action: 'commit', 'checkpointId.$': '$.ckpt.checkpointId', 'taskToken.$': '$$.Task.Token' });
    expect(payload(S.abort)).toEqual({ action: 'abort', 'checkpointId.$': '$.ckpt.checkpointId', 'reason.$': '$.error' });
    expect(st(click, S.allocate).ResultPath).toBeUndefined(); // the result replaces the state
  });

  it('uses task tokens for Allocate, AwaitAcks and Commit; the Commit heartbeat timeout is the pause', () => {
    for (const name of [S.allocate, S.awaitAcks, S.commit]) expect(st(click, name).Resource).toBe('arn:aws:states:::lambda:invoke.waitForTaskToken');
    expect(st(click, S.awaitAcks).TimeoutSeconds).toBe(30); // 30_000 ms
    expect(st(orders, S.awaitAcks).TimeoutSeconds).toBe(46); // 45_500 ms
    expect(st(click, S.commit).HeartbeatSeconds).toBe(2); // interval 2 s, no min pause
    expect(st(orders, S.commit).HeartbeatSeconds).toBe(7); // interval 5 s, min pause 7 s
    expect(st(click, S.commit).TimeoutSeconds).toBe(COMMIT_TIMEOUT_SECONDS + 2);
    expect(st(click, S.pause)).toMatchObject({ Type: 'Wait', Seconds: 2 });
    expect(st(click, S.allocate).TimeoutSeconds).toBe(IDLE_RECHECK_SECONDS);
  });

  it('catches the pause and a wake-up back to Allocate, continue-as-new to Done; a timeout of AwaitAcks asks Overdue, other ack failures go to Abort', () => {
    expect(st(click, S.commit).Catch).toEqual([{ ErrorEquals: ['States.Timeout'], ResultPath: null, Next: S.allocate }]);
    expect(st(click, S.allocate).Catch).toEqual([
      { ErrorEquals: [LOOP_ERRORS.continuedAsNew], ResultPath: null, Next: S.done },
      { ErrorEquals: [LOOP_ERRORS.inputArrived, 'States.Timeout'], ResultPath: null, Next: S.allocate },
    ]);
    expect(st(click, S.awaitAcks).Catch).toEqual([
      { ErrorEquals: ['States.Timeout'], ResultPath: null, Next: S.overdue },
      { ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: S.abort },
    ]);
    expect((st(click, S.overdue).Parameters as { Payload: unknown }).Payload).toEqual({ action: 'overdue', 'checkpointId.$': '$.ckpt.checkpointId' });
    expect(st(click, S.overdue).Next).toBe(S.extend);
    expect(st(click, S.extend).Choices).toEqual([{ Variable: '$.overdue.extend', BooleanEquals: true, Next: S.awaitAcks }]);
    expect(st(click, S.extend).Default).toBe(S.pause);
  });

  it('retries Allocate on CheckpointInFlightError and Lambda service errors with backoff', () => {
    const retry = st(click, S.allocate).Retry as Array<Record<string, unknown>>;
    expect(retry).toContainEqual(expect.objectContaining({ ErrorEquals: [...LAMBDA_SERVICE_ERRORS], BackoffRate: 2 }));
    expect(retry).toContainEqual(
      expect.objectContaining({ ErrorEquals: [CHECKPOINT_IN_FLIGHT], BackoffRate: 2, MaxDelaySeconds: allocateRetryMaxDelaySeconds(planJob(clickstream).checkpoint), MaxAttempts: allocateRetryAttempts(planJob(clickstream).checkpoint) }),
    );
  });

  it('retries Commit on anything but its pause, and Abort on anything, for a long time', () => {
    const commit = st(click, S.commit).Retry as Array<{ ErrorEquals: string[]; MaxAttempts: number }>;
    expect(commit[0]).toEqual({ ErrorEquals: ['States.Timeout'], MaxAttempts: 0 });
    for (const retry of [commit.slice(1), st(click, S.abort).Retry as typeof commit]) {
      expect(retry).toHaveLength(1);
      expect(retry[0]!.ErrorEquals).toEqual(['States.ALL']);
      expect(retry[0]!.MaxAttempts).toBeGreaterThanOrEqual(1000);
    }
  });

  it('logs errors only by default, and traces only when asked', () => {
    const app = newApp({ bundle: false });
    const stack = new Stack(app, 'S');
    const fn = new lambda.Function(stack, 'F', { runtime: lambda.Runtime.NODEJS_22_X, handler: 'x', code: lambda.Code.fromInline('x') });
    const checkpoint = planJob(clickstream).checkpoint;
    const controlTable = new dynamodb.Table(stack, 'T', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING }, sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING } });
    const off = new CoordinatorStateMachine(stack, 'Off', { stateMachineName: 'off', coordinatorFunction: fn, controlTable, checkpoint });
    const on = new CoordinatorStateMachine(stack, 'On', { stateMachineName: 'on', coordinatorFunction: fn, controlTable, checkpoint, tracing: true });
    const t = Template.fromStack(stack);
    const sms = t.findResources('AWS::StepFunctions::StateMachine');
    const byName = (n: string) => Object.values(sms).find((r) => (r as { Properties: { StateMachineName: string } }).Properties.StateMachineName === n) as { Properties: Record<string, unknown> };
    expect((byName('off').Properties.TracingConfiguration as { Enabled?: boolean } | undefined)?.Enabled ?? false).toBe(false);
    expect(byName('on').Properties.TracingConfiguration).toEqual({ Enabled: true });
    expect((byName('off').Properties.LoggingConfiguration as { Level: string }).Level).toBe('ERROR');
    expect(off.stateMachine && on.stateMachine).toBeTruthy();
  });
});

describe('timing helpers', () => {
  it('rounds up to whole seconds, at least one', () => {
    expect(wholeSeconds(0)).toBe(1);
    expect(wholeSeconds(1000)).toBe(1);
    expect(wholeSeconds(1001)).toBe(2);
    expect(pauseSeconds({ intervalMs: 100, timeoutMs: 1000, minPauseMs: 0, retained: 1, continueAsNewAfter: 1 })).toBe(1);
  });

  it('retries Allocate long enough to outwait two checkpoint timeouts, never more than a window (at most 30 s) apart', () => {
    for (const timeoutMs of [1_000, 2_000, 30_000, 600_000]) {
      const checkpoint = { intervalMs: 1000, timeoutMs, minPauseMs: 0, retained: 1, continueAsNewAfter: 1 };
      const attempts = allocateRetryAttempts(checkpoint);
      const cap = allocateRetryMaxDelaySeconds(checkpoint);
      expect(cap).toBe(Math.min(30, Math.ceil(timeoutMs / 1000)));
      let waited = 0;
      for (let i = 0, d = 1; i < attempts; i++, d = Math.min(2 * d, cap)) waited += d;
      expect(waited).toBeGreaterThanOrEqual((2 * timeoutMs) / 1000);
    }
  });
});

describe('execution in the local Step Functions interpreter', () => {
  /**
   * The coordinator function played by stubs that keep the loop's contract (loop.ts): begin answers
   * its token with the next checkpoint (or parks it), await answers when "the last ack" arrives,
   * commit leaves its token to the pause.
   */
  async function run(d: CoordinatorDefinition, opts: { checkpoints: number; failAcks?: number[]; slowAcks?: number[]; stuck?: number[]; park?: number[] }) {
    const overdueSeen = new Set<number>();
    const calls: Array<Record<string, unknown>> = [];
    let next = 1;
    let sf!: LocalStepFunctions;
    let parked: string | undefined;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const handler = async (payload: unknown) => {
      const p = payload as { action: string; checkpointId?: number; taskToken?: string; iteration?: number };
      calls.push({ action: p.action, ...(p.checkpointId !== undefined ? { checkpointId: p.checkpointId } : {}) });
      // Overdue: acks still arriving (slow) → wait again; none for a window (stuck) → aborted
      if (p.action === 'overdue') {
        overdueSeen.add(p.checkpointId!);
        return { checkpointId: p.checkpointId, extend: !opts.stuck?.includes(p.checkpointId!) };
      }
      const token = p.taskToken!;
      setImmediate(() => {
        if (p.action === 'begin') {
          if (next > opts.checkpoints) return finish();
          if (opts.park?.includes(next) && parked === undefined) {
            parked = token; // idle: nobody answers until input arrives
            return;
          }
          parked = undefined;
          sf.sendTaskSuccess(token, JSON.stringify({ iteration: (p.iteration ?? 0) + 1, ckpt: { checkpointId: next++ } }));
        } else if (p.action === 'await') {
          if (opts.failAcks?.includes(p.checkpointId!)) sf.sendTaskFailure(token, 'AcksFailed', 'an instance failed');
          // no answer: the state's own timeout (the progress window) passes
          else if (opts.stuck?.includes(p.checkpointId!)) return;
          else if (opts.slowAcks?.includes(p.checkpointId!) && !overdueSeen.has(p.checkpointId!)) return;
          else sf.sendTaskSuccess(token, '{}');
        }
        // commit: the token is left to the state's heartbeat timeout (the pause)
      });
      return {};
    };
    sf = new LocalStepFunctions({
      definition: d.definition,
      stateMachineArn: d.stateMachineArn,
      lambdaHandlers: { [d.coordinatorFunctionArn]: handler },
      // the progress window, short only where a test leaves AwaitAcks unanswered
      taskTimeoutOverrides: { ...commitPauseOverride(d.definition, 5), ...(opts.slowAcks || opts.stuck ? { [S.awaitAcks]: 300 } : {}) },
      waitTimeOverrides: { [S.pause]: 5 },
    });
    const { executionArn } = await sf.startExecution({ iteration: 0 });
    const wake = async () => {
      for (let i = 0; i < 2000 && parked === undefined; i++) await new Promise((r) => setTimeout(r, 5));
      const before = sf.transitions(executionArn).total;
      sf.sendTaskFailure(parked!, LOOP_ERRORS.inputArrived, 'input');
      return before;
    };
    const idleTransitions = opts.park?.length ? await wake() : undefined;
    await finished;
    const transitions = sf.transitions(executionArn);
    await sf.stop();
    return { calls, transitions, idleTransitions };
  }

  it('takes three billed transitions per checkpoint on the happy path', async () => {
    const few = await run(click, { checkpoints: 3 });
    const more = await run(click, { checkpoints: 8 });
    expect(few.calls.slice(0, 4)).toEqual([{ action: 'begin' }, { action: 'await', checkpointId: 1 }, { action: 'commit', checkpointId: 1 }, { action: 'begin' }]);
    const perCheckpoint = (more.transitions.total - few.transitions.total) / 5;
    expect(perCheckpoint).toBe(3);
    expect(more.transitions.byState[S.allocate]).toBe(9); // 8 checkpoints + the last begin
    expect(more.transitions.byState[S.pause]).toBeUndefined();
  });

  it('aborts a checkpoint whose acks fail, pauses, and goes on', async () => {
    const { calls } = await run(click, { checkpoints: 3, failAcks: [2] });
    expect(calls.map((c) => `${String(c.action)}${c.checkpointId ?? ''}`).slice(0, 8)).toEqual(['begin', 'await1', 'commit1', 'begin', 'await2', 'abort2', 'begin', 'await3']);
  });

  it('asks Overdue when the progress window passes and waits again while acks arrive, without aborting', async () => {
    const { calls } = await run(click, { checkpoints: 3, slowAcks: [2] });
    // (on a busy machine a window may also pass on a checkpoint that is answered at once: Overdue extends it too)
    const of2 = calls.filter((c) => c.checkpointId === 2).map((c) => String(c.action));
    expect(of2.slice(0, 3)).toEqual(['await', 'overdue', 'await']);
    expect(of2.at(-1)).toBe('commit');
    expect(calls.filter((c) => c.action === 'commit').map((c) => c.checkpointId)).toEqual([1, 2, 3]);
    expect(calls.some((c) => c.action === 'abort')).toBe(false);
  });

  it('goes on to the pause and the next checkpoint when Overdue aborted a stuck one', async () => {
    const { calls, transitions } = await run(click, { checkpoints: 3, stuck: [2] });
    expect(calls.filter((c) => c.checkpointId === 2).map((c) => String(c.action))).toEqual(['await', 'overdue']);
    expect(calls.filter((c) => c.action === 'commit').map((c) => c.checkpointId)).toEqual([1, 3]);
    expect(transitions.byState[S.pause]).toBe(1);
    expect(calls.some((c) => c.action === 'abort')).toBe(false); // Overdue aborted it itself
  });

  it('makes no transition while parked, and the first input wakes it', async () => {
    const { calls, transitions, idleTransitions } = await run(click, { checkpoints: 3, park: [2] });
    // parked after checkpoint 1: Init, Fresh, Allocate, AwaitAcks, Commit, Allocate (parked) = 6
    expect(idleTransitions).toBe(6);
    expect(calls.filter((c) => c.action === 'begin')).toHaveLength(5); // 1, parked, woken 2, 3, last
    expect(transitions.byState[S.allocate]).toBe(5);
  });
});
