/**
 * LocalStepFunctions: a hand-written coordinator-shaped machine (allocate → wait for a task token →
 * commit → wait → loop → continue as new), driven through @aws-sdk/client-sfn over HTTP.
 */
import {
  DescribeExecutionCommand,
  ListExecutionsCommand,
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  StartExecutionCommand,
  StopExecutionCommand,
  type SFNClient,
} from '@aws-sdk/client-sfn';
import { CreateTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import { localDynamoClient, localSfnClient } from './aws-env.js';
import { startEmulators, type LocalEmulators } from './emulators.js';
import { LocalStepFunctions } from './step-functions-local.js';

const ARN = 'arn:aws:states:us-east-1:000000000000:stateMachine:coordinator';
const fnArn = (name: string) => `arn:aws:lambda:us-east-1:000000000000:function:${name}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let running: LocalStepFunctions[] = [];
const clients: SFNClient[] = [];
afterEach(async () => {
  await Promise.all(running.map((m) => m.stop()));
  running = [];
  for (const c of clients.splice(0)) c.destroy();
});

async function serve(opts: ConstructorParameters<typeof LocalStepFunctions>[0]) {
  const machine = new LocalStepFunctions(opts);
  running.push(machine);
  const { endpoint } = await machine.listen();
  expect(endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  const sfn = localSfnClient(endpoint);
  clients.push(sfn);
  return { machine, sfn };
}

async function waitDone(sfn: SFNClient, executionArn: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const d = await sfn.send(new DescribeExecutionCommand({ executionArn }));
    if (d.status !== 'RUNNING') return d;
    if (Date.now() > deadline) throw new Error(`${executionArn} still RUNNING`);
    await sleep(20);
  }
}

class Transient extends Error {
  override name = 'Transient';
}

const coordinator = {
  Comment: 'allocate → inject and wait for acks → commit → wait → loop; continue as new after 3',
  StartAt: 'Allocate',
  States: {
    Allocate: {
      Type: 'Task',
      Resource: 'arn:aws:states:::lambda:invoke',
      Parameters: { FunctionName: fnArn('allocate'), Payload: { 'count.$': '$.count', 'executionId.$': '$$.Execution.Id' } },
      ResultSelector: { 'n.$': '$.Payload.n', 'status.$': '$.StatusCode' },
      ResultPath: '$.alloc',
      Retry: [{ ErrorEquals: ['Transient'], IntervalSeconds: 5, MaxAttempts: 2 }],
      Next: 'Count',
    },
    Count: {
      Type: 'Pass',
      Parameters: { 'count.$': 'States.MathAdd($.count, 1)', 'generation.$': '$.generation', 'alloc.$': '$.alloc' },
      Next: 'WaitForAcks',
    },
    WaitForAcks: {
      Type: 'Task',
      Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
      Parameters: {
        FunctionName: 'inject',
        Payload: { 'taskToken.$': '$$.Task.Token', 'n.$': '$.alloc.n', 'label.$': "States.Format('cp-{}', $.alloc.n)" },
      },
      TimeoutSeconds: 1,
      ResultPath: '$.ack',
      Catch: [
        { ErrorEquals: ['States.Timeout'], ResultPath: '$.error', Next: 'Abort' },
        { ErrorEquals: ['Ack.Rejected'], ResultPath: '$.error', Next: 'Abort' },
        { ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'Failed' },
      ],
      Next: 'Commit',
    },
    Commit: { Type: 'Task', Resource: fnArn('commit'), ResultPath: null, Next: 'Pause' },
    Abort: { Type: 'Task', Resource: fnArn('abort'), ResultPath: null, Next: 'Pause' },
    Pause: { Type: 'Wait', Seconds: 3600, Next: 'Again?' },
    'Again?': {
      Type: 'Choice',
      Choices: [
        { Variable: '$.count', NumericLessThan: 3, Next: 'Allocate' },
        { Variable: '$.generation', NumericLessThan: 1, Next: 'ContinueAsNew' },
      ],
      Default: 'Done',
    },
    ContinueAsNew: {
      Type: 'Task',
      Resource: 'arn:aws:states:::states:startExecution',
      Parameters: {
        StateMachineArn: ARN,
        Input: { count: 0, 'generation.$': 'States.MathAdd($.generation, 1)', 'AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$': '$$.Execution.Id' },
      },
      ResultPath: '$.next',
      Next: 'Done',
    },
    Failed: { Type: 'Fail', Error: 'Coordinator.Failed', Cause: 'unexpected ack error' },
    Done: { Type: 'Succeed' },
  },
};

describe('LocalStepFunctions', () => {
  it('runs the coordinator loop: retry, task tokens over HTTP, timeout → Catch, continue-as-new', async () => {
    let allocations = 0;
    let allocateCalls = 0;
    const injected: Array<{ taskToken: string; n: number; label: string }> = [];
    const commits: number[] = [];
    const aborts: Array<{ n: number; error: string }> = [];
    const executionIds: string[] = [];
    let sfn!: SFNClient;
    const answer = async (token: string, output: unknown) =>
      sfn.send(new SendTaskSuccessCommand({ taskToken: token, output: JSON.stringify(output) }));

    const served = await serve({
      definition: coordinator,
      stateMachineArn: ARN,
      waitTimeOverrides: { Pause: 5 },
      retryIntervalOverrides: { Allocate: 10 },
      lambdaHandlers: {
        allocate: async (p) => {
          executionIds.push((p as { executionId: string }).executionId);
          if (++allocateCalls === 1) throw new Transient('try again');
          return { n: ++allocations };
        },
        [fnArn('inject')]: async (p) => {
          const msg = p as { taskToken: string; n: number; label: string };
          injected.push(msg);
          if (msg.n === 1) setTimeout(() => void answer(msg.taskToken, { acked: msg.n }), 20);
          // n = 2: never answered → States.Timeout
          if (msg.n === 3) {
            setTimeout(
              () => void sfn.send(new SendTaskFailureCommand({ taskToken: msg.taskToken, error: 'Ack.Rejected', cause: 'instance 7 said no' })),
              20,
            );
          }
          if (msg.n >= 4) await answer(msg.taskToken, { acked: msg.n }); // answered before the Lambda returns
          return { injected: true };
        },
        commit: async (p) => {
          commits.push((p as { alloc: { n: number } }).alloc.n);
          return 'ignored';
        },
        abort: async (p) => {
          const s = p as { alloc: { n: number }; error: { Error: string } };
          aborts.push({ n: s.alloc.n, error: s.error.Error });
        },
      },
    });
    sfn = served.sfn;
    const machine = served.machine;

    const started = await sfn.send(
      new StartExecutionCommand({ stateMachineArn: ARN, name: 'gen-0', input: JSON.stringify({ count: 0, generation: 0 }) }),
    );
    expect(started.executionArn).toBe('arn:aws:states:us-east-1:000000000000:execution:coordinator:gen-0');
    expect(started.startDate).toBeInstanceOf(Date);

    const first = await waitDone(sfn, started.executionArn!);
    expect(first.status).toBe('SUCCEEDED');
    const out1 = JSON.parse(first.output!) as { next: { ExecutionArn: string }; count: number };
    expect(out1.count).toBe(3);
    const second = await waitDone(sfn, out1.next.ExecutionArn);
    expect(second.status).toBe('SUCCEEDED');
    expect(JSON.parse(second.input!)).toEqual({
      count: 0,
      generation: 1,
      AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID: started.executionArn,
    });

    expect(allocateCalls).toBe(7); // one Transient failure retried
    expect(injected.map((i) => i.n)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(injected.map((i) => i.label)).toEqual(['cp-1', 'cp-2', 'cp-3', 'cp-4', 'cp-5', 'cp-6']);
    expect(new Set(injected.map((i) => i.taskToken)).size).toBe(6);
    expect(commits).toEqual([1, 4, 5, 6]);
    expect(aborts).toEqual([
      { n: 2, error: 'States.Timeout' },
      { n: 3, error: 'Ack.Rejected' },
    ]);
    expect(executionIds.slice(0, 4).every((id) => id === started.executionArn)).toBe(true);

    // Tokens of closed tasks (answered or timed out) get TaskTimedOut; unknown ones InvalidToken.
    await expect(answer(injected[0].taskToken, {})).rejects.toMatchObject({ name: 'TaskTimedOut' });
    await expect(answer(injected[1].taskToken, {})).rejects.toMatchObject({ name: 'TaskTimedOut' });
    await expect(answer('not-a-token', {})).rejects.toMatchObject({ name: 'InvalidToken' });

    const listed = await sfn.send(new ListExecutionsCommand({ stateMachineArn: ARN }));
    expect(listed.executions?.map((e) => [e.name, e.status])).toEqual([
      [second.name, 'SUCCEEDED'],
      ['gen-0', 'SUCCEEDED'],
    ]);
    expect(machine.executions().map((e) => e.status)).toEqual(['SUCCEEDED', 'SUCCEEDED']);
    const history = machine.history(started.executionArn!) as Array<{ type: string }>;
    expect(history.some((e) => e.type === 'StateRetried')).toBe(true);
    expect(history.filter((e) => e.type === 'StateCaught')).toHaveLength(2);
  });

  it('StopExecution aborts a task waiting on a token; SendTaskFailure errors reach Catch/Fail', async () => {
    const tokens: string[] = [];
    const { machine, sfn } = await serve({
      stateMachineArn: ARN,
      definition: {
        StartAt: 'Wait',
        States: {
          Wait: {
            Type: 'Task',
            Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
            Parameters: { FunctionName: 'f', Payload: { 'token.$': '$$.Task.Token' } },
            End: true,
          },
        },
      },
      lambdaHandlers: {
        f: async (p) => {
          tokens.push((p as { token: string }).token);
        },
      },
    });
    const a = await machine.startExecution({}, 'a');
    const b = await machine.startExecution({}, 'b');
    await expect(machine.startExecution({ other: 1 }, 'a')).rejects.toMatchObject({ type: 'ExecutionAlreadyExists' });
    await sleep(50);
    expect(tokens).toHaveLength(2);
    await sfn.send(new StopExecutionCommand({ executionArn: a.executionArn, error: 'Operator', cause: 'test' }));
    const da = await waitDone(sfn, a.executionArn);
    expect([da.status, da.error, da.cause]).toEqual(['ABORTED', 'Operator', 'test']);
    await sfn.send(new SendTaskFailureCommand({ taskToken: tokens[1], error: 'Custom.Error', cause: 'why' }));
    const db = await waitDone(sfn, b.executionArn);
    expect([db.status, db.error, db.cause]).toEqual(['FAILED', 'Custom.Error', 'why']);
    await expect(sfn.send(new DescribeExecutionCommand({ executionArn: `${a.executionArn}x` }))).rejects.toMatchObject({
      name: 'ExecutionDoesNotExist',
    });
    // No timers left behind by the (never-ending) task of a: stop() returns promptly.
    const t0 = Date.now();
    await machine.stop();
    expect(Date.now() - t0).toBeLessThan(500);
  });

  it('an execution stopped during a Retry backoff calls its task no more (the call would never settle and its timeout timer would hold the process)', async () => {
    let calls = 0;
    let firstFailed!: () => void;
    const failed = new Promise<void>((r) => (firstFailed = r));
    const machine = new LocalStepFunctions({
      stateMachineArn: ARN,
      definition: {
        StartAt: 'Flaky',
        States: {
          Flaky: {
            Type: 'Task',
            Resource: fnArn('flaky'),
            TimeoutSeconds: 900,
            Retry: [{ ErrorEquals: ['Transient'], IntervalSeconds: 3600, MaxAttempts: 3 }],
            End: true,
          },
        },
      },
      lambdaHandlers: {},
      resourceHandlers: {
        [fnArn('flaky')]: () => {
          calls++;
          if (calls > 1) return new Promise<never>(() => undefined); // a call after the stop never answers
          setImmediate(firstFailed);
          return Promise.reject(new Transient('try again'));
        },
      },
    });
    running.push(machine);
    const timersBefore = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const { executionArn } = await machine.startExecution({});
    await failed;
    // the interpreter is in the Retry's backoff (a 3600 s sleep) once the failure has been handled
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    machine.stopExecution(executionArn, 'Operator', 'test');
    await machine.stop();
    // the backoff ends at the abort; give the interpreter turns to (wrongly) call the task again
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    expect(calls).toBe(1);
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBeLessThanOrEqual(timersBefore);
  });

  it('keeps a task alive with heartbeats and fails it with States.Timeout without them', async () => {
    let sfn!: SFNClient;
    const tagged: string[] = [];
    let beating: Promise<unknown> = Promise.resolve();
    const served = await serve({
      stateMachineArn: ARN,
      definition: {
        StartAt: 'Work',
        States: {
          Work: {
            Type: 'Task',
            Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
            Parameters: {
              FunctionName: 'worker',
              // the token also works inside intrinsics
              Payload: { 'token.$': '$$.Task.Token', 'tagged.$': "States.Format('tok:{}', $$.Task.Token)", 'beat.$': '$.beat' },
            },
            HeartbeatSeconds: 1,
            TimeoutSeconds: 10,
            Catch: [{ ErrorEquals: ['States.Timeout'], ResultPath: '$.err', Next: 'TimedOut' }],
            End: true,
          },
          TimedOut: { Type: 'Pass', Result: 'heartbeat missed', End: true },
        },
      },
      lambdaHandlers: {
        worker: async (p) => {
          const { token, beat } = p as { token: string; beat: boolean };
          tagged.push((p as { tagged: string }).tagged.slice(4) === token ? 'ok' : 'mismatch');
          if (!beat) return;
          beating = (async () => {
            for (let i = 0; i < 4; i++) {
              await sleep(300);
              await sfn.send(new SendTaskHeartbeatCommand({ taskToken: token }));
            }
            await sfn.send(new SendTaskSuccessCommand({ taskToken: token, output: '"done"' }));
          })();
        },
      },
    });
    sfn = served.sfn;
    const withBeats = await served.machine.startExecution({ beat: true });
    const without = await served.machine.startExecution({ beat: false });
    const [d1, d2] = await Promise.all([served.machine.waitFor(withBeats.executionArn), served.machine.waitFor(without.executionArn)]);
    expect([d1.status, d1.output]).toEqual(['SUCCEEDED', 'done']); // ran 1.2 s on 1 s heartbeats
    expect([d2.status, d2.output]).toEqual(['SUCCEEDED', 'heartbeat missed']);
    expect(tagged).toEqual(['ok', 'ok']);
    await beating; // its last response may still be in flight
  });

  it('maps Lambda errors and DynamoDB conditional failures to Step Functions error names', async () => {
    const emu: LocalEmulators = await startEmulators({ services: ['dynamodb'] });
    const ddb: DynamoDBClient = localDynamoClient(emu.endpoints.dynamodb);
    try {
      await ddb.send(
        new CreateTableCommand({
          TableName: 'checkpoints',
          AttributeDefinitions: [{ AttributeName: 'n', AttributeType: 'N' }],
          KeySchema: [{ AttributeName: 'n', KeyType: 'HASH' }],
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
      class BoomError extends Error {
        override name = 'BoomError';
      }
      const { machine } = await serve({
        stateMachineArn: ARN,
        dynamodb: ddb,
        definition: {
          StartAt: 'Claim',
          States: {
            Claim: {
              Type: 'Task',
              Resource: 'arn:aws:states:::dynamodb:putItem',
              Parameters: {
                TableName: 'checkpoints',
                Item: { n: { 'N.$': 'States.Format(\'{}\', $.n)' }, status: { S: 'PENDING' } },
                ConditionExpression: 'attribute_not_exists(n)',
              },
              ResultPath: null,
              Catch: [{ ErrorEquals: ['DynamoDB.ConditionalCheckFailedException'], ResultPath: '$.err', Next: 'Taken' }],
              Next: 'Explode',
            },
            Explode: {
              Type: 'Task',
              Resource: 'arn:aws:states:::lambda:invoke',
              Parameters: { FunctionName: 'explode', 'Payload.$': '$' },
              // States.TaskFailed matches any error of a Task except States.Timeout
              Catch: [{ ErrorEquals: ['States.TaskFailed'], ResultPath: '$.err', Next: 'Exploded' }],
              End: true,
            },
            Exploded: { Type: 'Pass', End: true },
            Taken: { Type: 'Fail', Error: 'Checkpoint.Taken', Cause: 'n is taken' },
          },
        },
        lambdaHandlers: {
          explode: async () => {
            throw new BoomError('kaboom');
          },
        },
      });
      const first = await machine.waitFor((await machine.startExecution({ n: 1 })).executionArn);
      expect(first.status).toBe('SUCCEEDED');
      const err = (first.output as { err: { Error: string; Cause: string } }).err;
      expect(err.Error).toBe('BoomError');
      expect(JSON.parse(err.Cause)).toMatchObject({ errorType: 'BoomError', errorMessage: 'kaboom' });
      const second = await machine.waitFor((await machine.startExecution({ n: 1 })).executionArn);
      expect([second.status, second.error]).toEqual(['FAILED', 'Checkpoint.Taken']);
    } finally {
      ddb.destroy();
      await emu.stop();
    }
  });
  it('keeps only the retention\'s worth of closed executions (older ones do not exist any more), never a running one, and still counts their transitions', async () => {
    const tokens: string[] = [];
    const { machine, sfn } = await serve({
      stateMachineArn: ARN,
      closedExecutionRetention: 3,
      definition: {
        StartAt: 'Step',
        States: {
          Step: { Type: 'Pass', Next: 'Wait' },
          Wait: { Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken', Parameters: { FunctionName: 'f', Payload: { 'token.$': '$$.Task.Token' } }, End: true },
        },
      },
      lambdaHandlers: {
        f: async (p) => {
          tokens.push((p as { token: string }).token);
        },
      },
    });
    const first = await machine.startExecution({}, 'first'); // stays RUNNING throughout
    const arns: string[] = [];
    for (let i = 0; i < 8; i++) {
      const { executionArn } = await machine.startExecution({ i }, `e${i}`);
      arns.push(executionArn);
      while (tokens.length < i + 2) await sleep(5);
      machine.sendTaskSuccess(tokens.at(-1)!, JSON.stringify({ i }));
      expect((await machine.waitFor(executionArn)).status).toBe('SUCCEEDED');
    }
    expect(machine.executions().map((e) => [e.arn.split(':').at(-1), e.status])).toEqual([
      ['first', 'RUNNING'],
      ['e5', 'SUCCEEDED'],
      ['e6', 'SUCCEEDED'],
      ['e7', 'SUCCEEDED'],
    ]);
    const listed = await sfn.send(new ListExecutionsCommand({ stateMachineArn: ARN }));
    expect(listed.executions?.map((e) => e.name)).toEqual(['e7', 'e6', 'e5', 'first']);
    await expect(sfn.send(new DescribeExecutionCommand({ executionArn: arns[0] }))).rejects.toMatchObject({ name: 'ExecutionDoesNotExist' });
    expect((await sfn.send(new DescribeExecutionCommand({ executionArn: arns[7] }))).status).toBe('SUCCEEDED');
    expect(machine.history(arns[0]!)).toEqual([]);
    // every execution entered Step and Wait: 2 transitions each, dropped ones included (the first's may still be arriving)
    while (machine.totalTransitions() < 18) await sleep(5);
    expect(machine.totalTransitions()).toBe(18);
    expect(machine.describe(first.executionArn).status).toBe('RUNNING');
  });
});

