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
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { collectSink, job as defineJob } from '../shared/api/index.js';
import { LocalStepFunctions } from '../local/step-functions-local.js';
import { coordinatorDefinition, newApp, type CoordinatorDefinition } from './coordinator-definition.js';
import { ACK_POLL_SECONDS, directAckReads } from './ack-wait.js';
import { ACK_READ_STATES as R } from './coordinator-rounds-acks.js';
import { createAwsClients, type AwsClients } from '../shared/adapters/aws/clients.js';
import { DynamoCheckpointStore } from '../shared/adapters/aws/dynamo-checkpoint-store.js';
import { DynamoControlStore } from '../shared/adapters/aws/dynamo-control-store.js';
import { allAcked } from '../shared/coordinator/records.js';
import { startEmulators, type LocalEmulators } from '../local/emulators.js';
import { createTable } from '../local/provision.js';
import { COORDINATOR_STATES as S, CoordinatorStateMachine, pauseSeconds } from './coordinator-state-machine.js';
import type { CheckpointSettings } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { synthJob, threeStageJob } from './test-support.js';

type Validate = (definition: unknown) => { isValid: boolean; errors: Array<{ message: string }> };
const aslValidator = createRequire(import.meta.url)('asl-validator') as Validate;

let d: CoordinatorDefinition;
let runs = 0;
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

  it('the rounds may read items of the control table (GetItem, nothing else, no other table), and decrypt with its customer-managed key', () => {
    type Statement = { Action: string | string[]; Resource: unknown };
    const roundsStatements = (template: Template): Statement[] => {
      const [express] = Object.entries(template.findResources('AWS::StepFunctions::StateMachine', { Properties: { StateMachineType: 'EXPRESS' } }));
      const role = (express![1].Properties.RoleArn as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      const policies = Object.values(template.findResources('AWS::IAM::Policy')).filter((p) => (p.Properties.Roles as Array<{ Ref: string }>).some((r) => r.Ref === role));
      return policies.flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[]);
    };
    const dynamo = (statements: Statement[]) => statements.filter((st) => [st.Action].flat().some((a) => a.startsWith('dynamodb:')));
    const { template, stack } = synthJob(clickstream, { expressCheckpoints: true });
    const control = Object.keys(template.findResources('AWS::DynamoDB::Table', { Properties: { TableName: 'sluice-clickstream-control' } }))[0]!;
    const [read] = dynamo(roundsStatements(template));
    expect(dynamo(roundsStatements(template))).toHaveLength(1);
    expect(read!.Action).toBe('dynamodb:GetItem');
    expect(JSON.stringify(stack.resolve(read!.Resource))).toContain(`{"Ref":"${control}"}`);
    expect(JSON.stringify(read!.Resource)).not.toContain('*');
    const keyed = synthJob(clickstream, (stack) => ({ expressCheckpoints: true, encryptionKey: new kms.Key(stack, 'Key', { enableKeyRotation: true }) }));
    expect(roundsStatements(keyed.template).some((st) => [st.Action].flat().includes('kms:Decrypt'))).toBe(true);
    expect(new AwsSolutionsChecks().validateScope(keyed.stack).violations.map((v) => v.ruleName)).toEqual([]);
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
    // after allocating (and at the round's start) the record's key, then the first wait
    const afterAllocating = (states: States) => {
      expect(states[S.allocated]!.Choices!.find((c) => c.StringEquals === 'allocated')!.Next).toBe(R.key);
      return states[R.keyOf(1)]!.Next;
    };
    // s0 (source) → s1 → s2: two exchange hops of the default 1 s window (a fifth of the 7 s pause)
    const three = roundStates(synthJob(threeStageJob(), { expressCheckpoints: true }).template);
    expect(afterAllocating(three)).toBe(S.barrierWait);
    expect(three[S.barrierWait]).toMatchObject({ Type: 'Wait', Seconds: 2, Next: R.read });
    expect(three[S.ackWait]).toMatchObject({ Seconds: ACK_POLL_SECONDS, Next: R.read });
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
    const controlTable = new dynamodb.Table(stack, 'T', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING }, sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING } });
    const machine = (name: string, checkpoint: Partial<CheckpointSettings>, expressCheckpoints?: boolean) =>
      new CoordinatorStateMachine(stack, name, { stateMachineName: name, coordinatorFunction: fn, controlTable, checkpoint: { ...base, ...checkpoint }, ...(expressCheckpoints !== undefined ? { expressCheckpoints } : {}) });
    const rounds = (m: CoordinatorStateMachine) => m.rounds !== undefined;
    expect(rounds(machine('ten', { intervalMs: 10_000 }))).toBe(true);
    expect(rounds(machine('fiftysix', { intervalMs: 56_000 }))).toBe(true);
    // three checkpoints a round: four Standard transitions and the round's duration cost more than nine
    expect(rounds(machine('fiftyseven', { intervalMs: 57_000 }))).toBe(false);
    expect(rounds(machine('fiftysevenForced', { intervalMs: 57_000 }, true))).toBe(true);
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
    /** checkpoints never acked: the coordinator aborts them as stuck after this many polls that find them open */
    readonly abort?: Record<number, number>;
    readonly failCommit?: number[];
    /** checkpoints not acked until a poll said the round is out of time */
    readonly late?: number[];
  }

  // the rounds read the acks in the control table themselves: the DynamoDB emulator holds the
  // records, written by the real store; the instances' last ack lands right after the first read
  let emulators: LocalEmulators;
  let clients: AwsClients;
  let store: DynamoCheckpointStore;
  let acks: DynamoControlStore;
  let table: string;
  /** direct reads per checkpoint (GetItem calls the emulator answered) */
  const reads = new Map<number, number>();
  const MEMBERS = ['s0/0', 's1/0'];
  /** checkpoints that get their last ack after their first read */
  const ackAfterRead = new Set<number>();
  beforeAll(async () => {
    table = (d.rounds!.definition.States[R.read] as { Parameters: { TableName: string } }).Parameters.TableName;
    emulators = await startEmulators({ services: ['dynamodb'] });
    clients = createAwsClients({ region: emulators.region, credentials: emulators.credentials, endpoints: { dynamodb: emulators.endpoints.dynamodb }, maxAttempts: 3 });
    await createTable(clients, table, 'pk', 'sk');
    store = new DynamoCheckpointStore(clients, table);
    acks = new DynamoControlStore(clients, table, 'no-bucket');
    clients.dynamodb.middlewareStack.add(
      (next, context) => async (args) => {
        const out = await next(args);
        if (context.commandName === 'GetItemCommand') {
          const id = Number((args.input as { Key: { sk: { S: string } } }).Key.sk.S);
          reads.set(id, (reads.get(id) ?? 0) + 1);
          if (ackAfterRead.delete(id)) await acks.ack(id, MEMBERS[1]!);
        }
        return out;
      },
      { step: 'initialize', name: 'countReads' },
    );
  }, 120_000);
  afterAll(async () => {
    await emulators?.stop();
  });

  async function run(script: Script) {
    const calls: string[] = [];
    const startedAt = new Set<string>();
    let n = 0;
    let inRound = 0;
    const polls = new Map<number, number>();
    const lateDone = new Set<number>();
    const failed = new Set<number>();
    // every run takes its checkpoint ids afresh in one table
    const base = 1000 * ++runs;
    reads.clear();
    const open = async (id: number) => {
      await store.createCheckpoint({ checkpointId: id, members: MEMBERS, topology: [1, 1], startedAt: new Date().toISOString(), savepoint: false });
      if (script.abort?.[id - base] !== undefined || script.late?.includes(id - base)) return;
      await acks.ack(id, MEMBERS[0]!);
      ackAfterRead.add(id);
    };
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
          await open(base + n);
          setImmediate(() => sf.sendTaskSuccess(p.taskToken!, JSON.stringify({ iteration: p.iteration + 1, ckpt: { checkpointId: base + n } })));
          return {};
        case 'poll': {
          const id = p.checkpointId! - base;
          const polled = (polls.get(id) ?? 0) + 1;
          polls.set(id, polled);
          if (script.late?.includes(id) && !lateDone.has(id)) {
            lateDone.add(id);
            await acks.ack(p.checkpointId!, MEMBERS[0]!);
            await acks.ack(p.checkpointId!, MEMBERS[1]!);
            return { acked: false, aborted: false, late: true };
          }
          if (script.abort?.[id] !== undefined) return { acked: false, aborted: polled > script.abort[id]!, late: false };
          return { acked: allAcked((await store.getCheckpoint(p.checkpointId!))!), aborted: false, late: false };
        }
        case 'commit':
          if (script.failCommit?.includes(p.checkpointId! - base) && p.roundStartedAt !== undefined) {
            failed.add(p.checkpointId!);
            throw new Error('the sink is down');
          }
          return p.roundStartedAt === undefined ? { checkpointId: p.checkpointId } : { checkpointId: p.checkpointId, more: ++inRound < script.perRound };
        case 'abort':
          return {};
        case 'next':
          if (n >= script.checkpoints) return { iteration: p.iteration, ckpt: { checkpointId: base + n }, end: 'idle' };
          n++;
          await open(base + n);
          return { iteration: p.iteration + 1, ckpt: { checkpointId: base + n }, end: 'allocated' };
      }
      throw new Error(`unexpected action ${p.action}`);
    };
    const lambdaHandlers = { [d.coordinatorFunctionArn]: handler };
    const rounds = new LocalStepFunctions({ definition: d.rounds!.definition, stateMachineArn: d.rounds!.stateMachineArn, lambdaHandlers, dynamodb: clients.dynamodb, waitTimeOverrides: { [S.pause]: 2, [S.ackWait]: 2 }, retryIntervalOverrides: { [S.commit]: 1 } });
    sf = new LocalStepFunctions({ definition: d.definition, stateMachineArn: d.stateMachineArn, lambdaHandlers, nested: [rounds], waitTimeOverrides: { [S.pause]: 2 }, retryIntervalOverrides: { [S.commitAgain]: 1 } });
    const { executionArn } = await sf.startExecution({ iteration: 0 });
    await finished;
    // the interpreter reports a state entered asynchronously: wait until the last Allocate is counted
    const begins = calls.filter((c) => c === 'begin').length;
    for (let i = 0; i < 400 && (sf.transitions(executionArn).byState[S.allocate] ?? 0) < begins; i++) await new Promise((r) => setTimeout(r, 5));
    const transitions = sf.transitions(executionArn);
    const roundExecutions = rounds.executions();
    await sf.stop();
    // calls and reads by checkpoint number within the run
    const named = calls.map((c) => c.replace(/\d+$/, (id) => String(Number(id) - base)));
    const readsOf = Object.fromEntries([...reads].map(([id, k]) => [id - base, k]));
    return { calls: named, reads: readsOf, transitions, roundExecutions, rounds: startedAt.size };
  }

  const K = directAckReads(planJob(clickstream).checkpoint.timeoutMs);

  it('reads the acks itself, commits, pauses and allocates inside the round: no poll of the coordinator function, far fewer Standard transitions than checkpoints', async () => {
    const r = await run({ checkpoints: 12, perRound: 4 });
    expect(r.calls.slice(0, 6)).toEqual(['begin', 'commit1', 'next', 'commit2', 'next', 'commit3']);
    // the first read finds one ack of two, the second both: two reads of each record, and no invocation
    expect(r.calls.filter((c) => c.startsWith('poll'))).toEqual([]);
    expect(r.reads).toEqual(Object.fromEntries(Array.from({ length: 12 }, (_, i) => [i + 1, 2])));
    expect(r.calls.filter((c) => c.startsWith('commit'))).toEqual(Array.from({ length: 12 }, (_, i) => `commit${i + 1}`));
    expect(r.roundExecutions).toHaveLength(3);
    expect(r.roundExecutions.every((e) => e.status === 'SUCCEEDED')).toBe(true);
    // Init, Resume, then per round Allocate, Round, Rounded?, Pause; the last Allocate parks
    expect(r.transitions.byState).toEqual({ Init: 1, Resume: 1, [S.allocate]: 4, [S.round]: 3, [S.rounded]: 3, [S.pause]: 3 });
    expect(r.transitions.total / 12).toBeLessThan(1.5);
  });

  it('a round out of time hands its open checkpoint to the next round, which goes on waiting for it: after K reads without the acks the coordinator function decides', async () => {
    expect(K).toBeGreaterThan(1);
    const r = await run({ checkpoints: 3, perRound: 10, late: [2] });
    expect(r.calls.filter((c) => c !== 'next')).toEqual(['begin', 'commit1', 'poll2', 'commit2', 'commit3', 'begin']);
    // K direct reads, the poll that ends the round, one read in the next round
    expect(r.reads[2]).toBe(K + 1);
    expect(r.transitions.byState[S.round]).toBe(2);
  });

  it('a commit the round cannot do is retried by the Standard execution (CommitAgain); after a stuck checkpoint is aborted the round goes on', async () => {
    const failing = await run({ checkpoints: 3, perRound: 10, failCommit: [2] });
    expect(failing.calls.filter((c) => c.startsWith('commit'))).toEqual(['commit1', 'commit2', 'commit2', 'commit2', 'commit3']);
    expect(failing.transitions.byState[S.commitAgain]).toBe(1);
    // never acked: K reads, a poll that finds it open (within its window), K reads, a poll that aborts it
    const stuck = await run({ checkpoints: 3, perRound: 10, abort: { 2: 1 } });
    expect(stuck.calls.filter((c) => c.startsWith('commit') || c.startsWith('poll'))).toEqual(['commit1', 'poll2', 'poll2', 'commit3']);
    expect(stuck.reads[2]).toBe(2 * K);
    expect(stuck.transitions.byState[S.round]).toBe(1);
  });
});
