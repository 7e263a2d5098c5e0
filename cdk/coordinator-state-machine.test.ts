/**
 * The coordinator workflow, as synthesized: the definition is taken from the template with every
 * token resolved (`coordinatorDefinition`), validated with asl-validator, checked state by state,
 * and executed in the ASL interpreter the local runner uses (aws-local-stepfunctions), with the
 * coordinator's tasks played by stubs.
 */
import { createRequire } from 'node:module';
import { StateMachine } from 'aws-local-stepfunctions';
import { beforeAll, describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { collectSink, job as defineJob } from '../shared/api/index.js';
import { CHECKPOINT_IN_FLIGHT } from '../shared/coordinator/protocol.js';
import type { CoordinatorTaskInput } from '../shared/coordinator/protocol.js';
import { planJob } from '../shared/plan/planner.js';
import { coordinatorDefinition } from './coordinator-definition.js';
import type { CoordinatorDefinition } from './coordinator-definition.js';
import { COORDINATOR_STATES as S, LAMBDA_SERVICE_ERRORS, allocateRetryAttempts, pauseSeconds, wholeSeconds } from './coordinator-state-machine.js';
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
    expect((st(orders, S.continueAsNew).Parameters as { StateMachineArn: string }).StateMachineArn).toBe(
      'arn:aws:states:eu-west-1:123456789012:stateMachine:orders-dev-coordinator',
    );
    expect(click.functionNameToHandler).toEqual({
      'sluice-clickstream-coordinator': { kind: 'coordinator' },
      'sluice-clickstream-s0': { kind: 'operator', stageId: 's0' },
      'sluice-clickstream-s1': { kind: 'operator', stageId: 's1' },
    });
    expect(click.functionArnToHandler[click.coordinatorFunctionArn]).toEqual({ kind: 'coordinator' });
  });

  it('has the documented states and transitions', () => {
    const d = click.definition;
    expect(d.StartAt).toBe(S.init);
    const concurrentOnly: string[] = [S.settle, S.full, S.awaitOldest];
    expect(Object.keys(d.States).sort()).toEqual(Object.values(S).filter((n) => !concurrentOnly.includes(n)).sort());
    const next = (name: string) => st(click, name).Next;
    expect(next(S.fresh)).toBe(S.allocate);
    expect(next(S.resume)).toBe(S.allocate);
    expect(next(S.allocate)).toBe(S.inject);
    expect(next(S.inject)).toBe(S.awaitAcks);
    expect(next(S.awaitAcks)).toBe(S.commit);
    expect(next(S.commit)).toBe(S.pause);
    expect(next(S.abort)).toBe(S.pause);
    expect(next(S.pause)).toBe(S.count);
    expect(next(S.count)).toBe(S.continueAsNewChoice);
    expect(next(S.continueAsNew)).toBe(S.done);
    expect(st(click, S.done).Type).toBe('Succeed');
    const choice = st(click, S.continueAsNewChoice);
    expect(choice.Choices).toEqual([{ Variable: '$.iteration', NumericGreaterThanEquals: planJob(clickstream).checkpoint.continueAsNewAfter, Next: S.continueAsNew }]);
    expect(choice.Default).toBe(S.allocate);
    expect(st(click, S.count).Parameters).toEqual({ 'iteration.$': 'States.MathAdd($.iteration, 1)' });
  });

  it('sends the protocol payloads (action, checkpointId, taskToken, reason)', () => {
    const payload = (name: string) => (st(click, name).Parameters as { Payload: unknown }).Payload;
    expect(payload(S.allocate)).toEqual({ action: 'allocate' });
    expect(payload(S.inject)).toEqual({ action: 'inject', 'checkpointId.$': '$.ckpt.checkpointId' });
    expect(payload(S.awaitAcks)).toEqual({ action: 'await', 'checkpointId.$': '$.ckpt.checkpointId', 'taskToken.$': '$$.Task.Token' });
    expect(payload(S.commit)).toEqual({ action: 'commit', 'checkpointId.$': '$.ckpt.checkpointId' });
    expect(payload(S.abort)).toEqual({ action: 'abort', 'checkpointId.$': '$.ckpt.checkpointId', 'reason.$': '$.error' });
    expect(st(click, S.allocate).ResultSelector).toEqual({ 'checkpointId.$': '$.Payload.checkpointId' });
    expect(st(click, S.allocate).ResultPath).toBe('$.ckpt');
  });

  it('waits for the acks with a task token and the plan timeout, rounded up to whole seconds', () => {
    expect(st(click, S.awaitAcks).Resource).toBe('arn:aws:states:::lambda:invoke.waitForTaskToken');
    expect(st(click, S.awaitAcks).TimeoutSeconds).toBe(30); // 30_000 ms
    expect(st(orders, S.awaitAcks).TimeoutSeconds).toBe(46); // 45_500 ms
    for (const name of [S.allocate, S.inject, S.commit, S.abort]) expect(st(click, name).Resource).toBe('arn:aws:states:::lambda:invoke');
  });

  it('aborts on any error of Inject or AwaitAcks (timeouts included), keeping the error for the reason', () => {
    for (const name of [S.inject, S.awaitAcks]) {
      expect(st(click, name).Catch).toEqual([{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: S.abort }]);
    }
    expect(st(click, S.commit).Catch).toBeUndefined();
  });

  it('retries Allocate on CheckpointInFlightError and Lambda service errors with backoff', () => {
    const retry = st(click, S.allocate).Retry as Array<Record<string, unknown>>;
    expect(retry).toContainEqual(expect.objectContaining({ ErrorEquals: [...LAMBDA_SERVICE_ERRORS], BackoffRate: 2 }));
    expect(retry).toContainEqual(
      expect.objectContaining({ ErrorEquals: [CHECKPOINT_IN_FLIGHT], BackoffRate: 2, MaxDelaySeconds: 30, MaxAttempts: allocateRetryAttempts(planJob(clickstream).checkpoint) }),
    );
  });

  it('retries Commit and Abort on anything, for a long time', () => {
    for (const name of [S.commit, S.abort]) {
      const retry = st(click, name).Retry as Array<{ ErrorEquals: string[]; MaxAttempts: number; BackoffRate: number }>;
      expect(retry).toHaveLength(1);
      expect(retry[0]!.ErrorEquals).toEqual(['States.ALL']);
      expect(retry[0]!.MaxAttempts).toBeGreaterThanOrEqual(1000);
      expect(retry[0]!.BackoffRate).toBe(2);
    }
  });

  it('pauses max(intervalMs, minPauseMs) in whole seconds', () => {
    expect(st(click, S.pause)).toMatchObject({ Type: 'Wait', Seconds: 2 }); // interval 2 s, no min pause
    expect(st(orders, S.pause)).toMatchObject({ Type: 'Wait', Seconds: 7 }); // interval 5 s, min pause 7 s
  });

  it('continues as new with {iteration: 0} under a fresh name', () => {
    const s = st(click, S.continueAsNew);
    expect(s.Resource).toBe('arn:aws:states:::states:startExecution');
    expect(s.Parameters).toMatchObject({ Input: { iteration: 0 }, 'Name.$': 'States.UUID()' });
  });
});

describe('timing helpers', () => {
  it('rounds up to whole seconds, at least one', () => {
    expect(wholeSeconds(0)).toBe(1);
    expect(wholeSeconds(1000)).toBe(1);
    expect(wholeSeconds(1001)).toBe(2);
    expect(pauseSeconds({ intervalMs: 100, timeoutMs: 1000, minPauseMs: 0, retained: 1, continueAsNewAfter: 1 })).toBe(1);
  });

  it('retries Allocate long enough to outwait two checkpoint timeouts', () => {
    for (const timeoutMs of [1_000, 30_000, 600_000]) {
      const attempts = allocateRetryAttempts({ intervalMs: 1000, timeoutMs, minPauseMs: 0, retained: 1, continueAsNewAfter: 1 });
      let waited = 0;
      for (let i = 0, d = 1; i < attempts; i++, d = Math.min(2 * d, 30)) waited += d;
      expect(waited).toBeGreaterThanOrEqual((2 * timeoutMs) / 1000);
    }
  });
});

describe('execution in the local ASL interpreter', () => {
  type Payload = CoordinatorTaskInput & { taskToken?: string };
  interface Stubs {
    allocate?: (n: number) => void;
    awaitAcks?: (p: Payload) => void;
    inject?: (p: Payload) => void;
  }

  async function run(d: CoordinatorDefinition, input: unknown, stubs: Stubs = {}) {
    const calls: unknown[] = [];
    let next = 1;
    let allocations = 0;
    // the Lambda integration's answer: the function's result under Payload
    const lambda = (fn: (p: Payload) => unknown) => async (input: unknown): Promise<never> => {
      const { FunctionName, Payload } = input as { FunctionName: string; Payload: Payload };
      expect(FunctionName).toBe(d.coordinatorFunctionArn);
      calls.push(Payload);
      return { StatusCode: 200, Payload: await fn(Payload) } as never;
    };
    const machine = new StateMachine(d.definition as never, { validationOptions: { checkPaths: true, checkArn: true } });
    const execution = machine.run(input as never, {
      overrides: {
        taskResourceLocalHandlers: {
          [S.allocate]: lambda(() => {
            stubs.allocate?.(allocations++);
            return { checkpointId: next++ };
          }),
          [S.inject]: lambda((p) => {
            stubs.inject?.(p);
            return { checkpointId: (p as { checkpointId: number }).checkpointId, shards: 2 };
          }),
          [S.awaitAcks]: lambda((p) => {
            stubs.awaitAcks?.(p);
            return {};
          }),
          [S.commit]: lambda((p) => ({ checkpointId: (p as { checkpointId: number }).checkpointId, published: 0 })),
          [S.abort]: lambda((p) => ({ checkpointId: (p as { checkpointId: number }).checkpointId })),
          [S.continueAsNew]: async (i: unknown): Promise<never> => {
            calls.push({ continueAsNew: i });
            return { ExecutionArn: 'arn:x', StartDate: 0 } as never;
          },
        },
        waitTimeOverrides: { [S.pause]: 0 },
        retryIntervalOverrides: { [S.allocate]: 0, [S.commit]: 0, [S.abort]: 0 },
      },
      context: { Task: { Token: 'token-1' } },
    });
    const output = await execution.result;
    return { output, calls };
  }

  it('loops allocate → inject → await → commit, then continues as new after continueAsNewAfter checkpoints', async () => {
    const { output, calls } = await run(click, { iteration: 0 });
    const after = planJob(clickstream).checkpoint.continueAsNewAfter;
    expect(output).toEqual({ iteration: after });
    expect(calls.slice(0, 5)).toEqual([
      { action: 'allocate' },
      { action: 'inject', checkpointId: 1 },
      { action: 'await', checkpointId: 1, taskToken: 'token-1' },
      { action: 'commit', checkpointId: 1 },
      { action: 'allocate' },
    ]);
    expect(calls.filter((c) => (c as Payload).action === 'commit')).toHaveLength(after);
    expect(calls.at(-1)).toMatchObject({
      continueAsNew: { Input: { iteration: 0 }, StateMachineArn: click.stateMachineArn, Name: expect.stringMatching(/^[0-9a-f-]{36}$/) },
    });
  });

  it('resumes the iteration count from the input, and starts at 0 without one', async () => {
    const after = planJob(clickstream).checkpoint.continueAsNewAfter;
    const resumed = await run(click, { iteration: after - 2 });
    expect(resumed.calls.filter((c) => (c as Payload).action === 'commit')).toHaveLength(2);
    const fresh = await run(click, { Comment: 'Insert your JSON here' });
    expect(fresh.output).toEqual({ iteration: after });
    const junk = await run(click, { iteration: 'seven' });
    expect(junk.output).toEqual({ iteration: after });
  });

  it('retries Allocate while a checkpoint is in flight', async () => {
    const { calls } = await run(click, { iteration: planJob(clickstream).checkpoint.continueAsNewAfter - 1 }, {
      allocate: (n) => {
        if (n < 2) throw Object.assign(new Error('checkpoint 7 is still open'), { name: CHECKPOINT_IN_FLIGHT });
      },
    });
    expect(calls.slice(0, 4)).toEqual([
      { action: 'allocate' },
      { action: 'allocate' },
      { action: 'allocate' },
      { action: 'inject', checkpointId: 1 },
    ]);
  });

  it('aborts a checkpoint whose acks time out or fail, passes the error as the reason, and goes on', async () => {
    const { calls } = await run(click, { iteration: planJob(clickstream).checkpoint.continueAsNewAfter - 2 }, {
      awaitAcks: (p) => {
        if ((p as { checkpointId: number }).checkpointId === 1) throw Object.assign(new Error('no acks from s1/0'), { name: 'States.Timeout' });
      },
    });
    expect(calls.slice(0, 8)).toEqual([
      { action: 'allocate' },
      { action: 'inject', checkpointId: 1 },
      { action: 'await', checkpointId: 1, taskToken: 'token-1' },
      { action: 'abort', checkpointId: 1, reason: { Error: 'States.Timeout', Cause: 'no acks from s1/0' } },
      { action: 'allocate' },
      { action: 'inject', checkpointId: 2 },
      { action: 'await', checkpointId: 2, taskToken: 'token-1' },
      { action: 'commit', checkpointId: 2 },
    ]);
  });

  it('aborts when the barrier injection fails', async () => {
    const { calls } = await run(click, { iteration: planJob(clickstream).checkpoint.continueAsNewAfter - 1 }, {
      inject: () => {
        throw Object.assign(new Error('ProvisionedThroughputExceeded'), { name: 'InjectFailed' });
      },
    });
    expect(calls.slice(0, 3)).toEqual([
      { action: 'allocate' },
      { action: 'inject', checkpointId: 1 },
      { action: 'abort', checkpointId: 1, reason: { Error: 'InjectFailed', Cause: 'ProvisionedThroughputExceeded' } },
    ]);
  });
});
