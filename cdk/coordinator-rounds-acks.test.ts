/**
 * The round's direct read of a checkpoint's acks (coordinator-rounds-acks.ts) agrees with `allAcked`:
 * records are written into the DynamoDB emulator by the real stores, and the synthesized states
 * from the record's key to the decision run in the local interpreter, whose DynamoDB task calls the
 * emulator over the wire. Each outcome state (Commit, Poll, CountRead) is replaced by a Pass that
 * names it.
 */
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { createAwsClients, type AwsClients } from '../shared/adapters/aws/clients.js';
import { controlKey, DynamoCheckpointStore } from '../shared/adapters/aws/dynamo-checkpoint-store.js';
import { DynamoControlStore } from '../shared/adapters/aws/dynamo-control-store.js';
import { allAcked } from '../shared/coordinator/records.js';
import { startEmulators, type LocalEmulators } from '../local/emulators.js';
import { createTable } from '../local/provision.js';
import { LocalStepFunctions } from '../local/step-functions-local.js';
import { ACK_READ_STATES as R } from './coordinator-rounds-acks.js';
import { coordinatorDefinition, type AslDefinition } from './coordinator-definition.js';
import { COORDINATOR_STATES as S } from './coordinator-state-machine.js';

type Outcome = 'acked' | 'notYet' | 'poll';

let emulators: LocalEmulators;
let clients: AwsClients;
let store: DynamoCheckpointStore;
let acks: DynamoControlStore;
let sf: LocalStepFunctions;
let table: string;

beforeAll(async () => {
  const d = coordinatorDefinition(clickstream, { expressCheckpoints: true });
  const rounds = d.rounds!.definition;
  const read = rounds.States[R.read] as { Parameters: { TableName: string } };
  table = read.Parameters.TableName;
  emulators = await startEmulators({ services: ['dynamodb'] });
  clients = createAwsClients({ region: emulators.region, credentials: emulators.credentials, endpoints: { dynamodb: emulators.endpoints.dynamodb }, maxAttempts: 3 });
  await createTable(clients, table, 'pk', 'sk');
  store = new DynamoCheckpointStore(clients, table);
  acks = new DynamoControlStore(clients, table, 'no-bucket');
  // the synthesized states from the key to the decision; what follows a decision is cut off (and left unreachable: not validated)
  const outcome = (o: Outcome) => ({ Type: 'Pass', Result: o, ResultPath: '$.outcome', End: true });
  const definition: AslDefinition = { ...rounds, StartAt: R.key, States: { ...rounds.States, [S.commit]: outcome('acked'), [S.poll]: outcome('poll'), [R.count]: outcome('notYet') } };
  sf = new LocalStepFunctions({ definition, stateMachineArn: `${d.rounds!.stateMachineArn}-reads`, lambdaHandlers: {}, dynamodb: clients.dynamodb, validate: false, waitTimeOverrides: { [S.ackWait]: 0, [S.barrierWait]: 0 } });
}, 120_000);

afterAll(async () => {
  await sf?.stop();
  await emulators?.stop();
});

async function decide(n: number): Promise<Outcome> {
  const { executionArn } = await sf.startExecution({ iteration: 1, ckpt: { checkpointId: n } });
  const e = await sf.waitFor(executionArn);
  expect(e.status).toBe('SUCCEEDED');
  return (e.output as { outcome: Outcome }).outcome;
}

const MEMBERS = ['s0/shardId-000000000000', 's0/shardId-000000000001', 's1/0'];
/** ids of the cases, apart from the ids of the key test */
let next = 20_000;

/** A checkpoint record as the coordinator opens it, acked by `by` (the instances' ack writes). */
async function checkpoint(by: readonly string[], id = next++): Promise<number> {
  expect(await store.createCheckpoint({ checkpointId: id, members: MEMBERS, topology: [2, 1], startedAt: new Date().toISOString(), savepoint: false })).toBe(true);
  for (const instance of by) await acks.ack(id, instance);
  return id;
}

describe('the direct read of the acks agrees with allAcked on the records the stores write', () => {
  it('in flight: acked exactly when every expected member acked (acks of instances nobody expected do not count); not yet otherwise', async () => {
    const cases: Array<readonly string[]> = [
      [],
      [MEMBERS[0]!],
      [MEMBERS[0]!, MEMBERS[1]!],
      MEMBERS,
      [...MEMBERS, 's0/shardId-000000000002'],
      // as many acks as expected, one of them from an instance nobody expected: not complete
      [MEMBERS[0]!, MEMBERS[1]!, 's0/shardId-000000000002'],
      ['s0/shardId-000000000002', 's0/shardId-000000000003', 's0/shardId-000000000004'],
      [MEMBERS[2]!, MEMBERS[1]!, MEMBERS[0]!, MEMBERS[0]!],
    ];
    for (const by of cases) {
      const n = await checkpoint(by);
      const record = (await store.getCheckpoint(n))!;
      expect(record.status).toBe('IN_FLIGHT');
      expect({ by, outcome: await decide(n) }).toEqual({ by, outcome: allAcked(record) ? 'acked' : 'notYet' });
    }
  });

  it('reads the record of n whatever its number of digits (the zero-padded sort key)', async () => {
    for (const n of [7, 42, 998, 1000, 123_456, 98_765_432, 10_000_000_000, 123_456_789_012]) {
      await checkpoint(MEMBERS, n);
      expect({ n, outcome: await decide(n) }).toEqual({ n, outcome: 'acked' });
      await checkpoint([], n + 1);
      expect({ n: n + 1, outcome: await decide(n + 1) }).toEqual({ n: n + 1, outcome: 'notYet' });
    }
  });

  it('a COMPLETED record is acked (the commit is idempotent); ABORTED, none, or one without members goes to the coordinator function', async () => {
    const completed = await checkpoint(MEMBERS);
    await store.finishCheckpoint(completed, { status: 'COMPLETED', endedAt: new Date().toISOString(), durationMs: 5 });
    expect((await store.getCheckpoint(completed))!.status).toBe('COMPLETED');
    expect(await decide(completed)).toBe('acked');

    const aborted = await checkpoint(MEMBERS);
    await store.finishCheckpoint(aborted, { status: 'ABORTED', endedAt: new Date().toISOString(), durationMs: 5, reason: 'stuck' });
    expect(await decide(aborted)).toBe('poll');
    const abortedAtAllocate = next++;
    await store.createAbortedCheckpoint({ checkpointId: abortedAtAllocate, members: MEMBERS, topology: [2, 1], startedAt: new Date().toISOString(), reason: 'no injection' });
    expect(await decide(abortedAtAllocate)).toBe('poll');

    expect(await store.getCheckpoint(next)).toBeUndefined();
    expect(await decide(next++)).toBe('poll');

    // a record written before members were kept: allAcked counts acks, the coordinator function decides
    const old = next++;
    const key = controlKey.checkpoint(old);
    await clients.dynamodb.send(
      new PutItemCommand({
        TableName: table,
        Item: { pk: { S: key.pk }, sk: { S: key.sk }, status: { S: 'IN_FLIGHT' }, expected: { N: '2' }, acks: { SS: ['a', 'b'] }, topology: { L: [] }, startedAt: { S: new Date().toISOString() }, savepoint: { BOOL: false } },
      }),
    );
    expect(allAcked((await store.getCheckpoint(old))!)).toBe(true);
    expect(await decide(old)).toBe('poll');
  });
});
