/**
 * The coordinator's tasks. The state machine (defined once, in CDK) sequences them; this class does
 * the work of each, and is the only writer of checkpoint status:
 *
 * 1. allocate n — a conditional write, so at most one checkpoint is in flight;
 * 2. inject barrier n into every open shard of every source stream;
 * 3. await — store the task token; the instance whose ack completes the ack set wakes the workflow;
 * 4. commit n — mark it COMPLETED, then publish what transactional sinks staged below n;
 *    or abort n — mark it ABORTED and still deliver barrier n everywhere (a channel that skips a
 *    barrier number would stall every later alignment).
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import { SendTaskSuccessCommand } from '@aws-sdk/client-sfn';
import { GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { AwsClients } from '../adapters/aws/clients.js';
import { withThrottleRetry } from '../adapters/aws/clients.js';
import { pad } from '../adapters/aws/dynamo-control-store.js';
import { KinesisShardDirectory } from '../adapters/aws/kinesis.js';
import { encodeSourceControl } from '../codec/envelope.js';
import type { Plan } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import { SluiceError } from '../util/errors.js';
import type { AbortOutput, AllocateOutput, CommitOutput, CoordinatorTaskInput, InjectOutput } from './protocol.js';
import { CHECKPOINT_IN_FLIGHT } from './protocol.js';

export class CheckpointInFlightError extends SluiceError {
  override readonly name = CHECKPOINT_IN_FLIGHT;
  constructor(n: number) {
    super(`checkpoint ${n} is still in flight`, 'CHECKPOINT_IN_FLIGHT', true);
  }
}

export type CheckpointStatus = 'IN_FLIGHT' | 'COMPLETED' | 'ABORTED';

export interface CheckpointRecord {
  readonly checkpointId: number;
  readonly status: CheckpointStatus;
  readonly savepoint: boolean;
  readonly expected: number;
  readonly acks: number;
  readonly topology: readonly number[];
  readonly startedAt: string;
  readonly endedAt?: string;
  readonly durationMs?: number;
  readonly reason?: string;
}

/** Something that publishes staged sink outputs when a checkpoint commits. */
export interface CommitTarget {
  publish(checkpointId: number): number | Promise<number>;
}

export class Coordinator {
  private readonly shards: KinesisShardDirectory;

  constructor(
    private readonly plan: Plan,
    private readonly names: ResourceNames,
    private readonly clients: AwsClients,
    private readonly commitTargets: readonly CommitTarget[] = [],
    private readonly now: () => Date = () => new Date(),
  ) {
    this.shards = new KinesisShardDirectory(clients);
  }

  async run(input: CoordinatorTaskInput): Promise<unknown> {
    switch (input.action) {
      case 'allocate':
        return this.allocate(input.savepoint ?? false);
      case 'inject':
        return this.inject(input.checkpointId);
      case 'await':
        return this.await(input.checkpointId, input.taskToken);
      case 'commit':
        return this.commit(input.checkpointId);
      case 'abort':
        return this.abort(input.checkpointId, input.reason);
      default:
        throw new SluiceError(`unknown coordinator action ${JSON.stringify((input as { action?: unknown }).action)}`, 'BAD_INPUT');
    }
  }

  private get table(): string {
    return this.names.controlTable;
  }

  async allocate(savepoint = false): Promise<AllocateOutput> {
    const state = await this.clients.doc.send(new GetCommand({ TableName: this.table, Key: { pk: 'coordinator', sk: 'state' }, ConsistentRead: true }));
    const last = (state.Item?.last as number | undefined) ?? 0;
    const inFlight = state.Item?.inFlight as number | undefined;
    if (inFlight !== undefined) throw new CheckpointInFlightError(inFlight);
    const n = last + 1;
    const topology = await Promise.all(this.plan.stages.map(async (s) => (await this.shards.openShards(this.names.streamOf(s))).length));
    try {
      await this.clients.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { pk: 'coordinator', sk: 'state' },
          UpdateExpression: 'SET #last = :n, inFlight = :n',
          ConditionExpression: '(attribute_not_exists(#last) OR #last = :prev) AND attribute_not_exists(inFlight)',
          ExpressionAttributeNames: { '#last': 'last' },
          ExpressionAttributeValues: { ':n': n, ':prev': last },
        }),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) throw new CheckpointInFlightError(n);
      throw err;
    }
    await this.clients.doc.send(
      new UpdateCommand({
        TableName: this.table,
        Key: { pk: 'checkpoint', sk: pad(n) },
        UpdateExpression: 'SET #status = :s, #expected = :e, #topology = :t, startedAt = :now, #savepoint = :sp',
        ExpressionAttributeNames: { '#status': 'status', '#expected': 'expected', '#topology': 'topology', '#savepoint': 'savepoint' },
        ExpressionAttributeValues: {
          ':s': 'IN_FLIGHT',
          ':e': topology.reduce((a, b) => a + b, 0),
          ':t': topology,
          ':now': this.now().toISOString(),
          ':sp': savepoint,
        },
      }),
    );
    return { checkpointId: n };
  }

  /** Puts barrier n into every open shard of every source stream. Safe to repeat: sources ignore old barriers. */
  async inject(n: number): Promise<InjectOutput> {
    const ck = await this.get(n);
    if (!ck) throw new SluiceError(`checkpoint ${n} does not exist`, 'NO_CHECKPOINT');
    const data = encodeSourceControl({ kind: 'barrier', checkpointId: n, topology: ck.topology, savepoint: ck.savepoint, time: this.now().getTime() });
    let shards = 0;
    for (const stage of this.plan.stages) {
      if (stage.input.kind !== 'source') continue;
      const stream = this.names.streamOf(stage);
      const open = await this.shards.openShards(stream);
      await Promise.all(
        open.map((s) =>
          withThrottleRetry(() =>
            this.clients.kinesis.send(new PutRecordCommand({ StreamName: stream, PartitionKey: 'barrier', ExplicitHashKey: s.startingHashKey, Data: data })),
          ),
        ),
      );
      shards += open.length;
    }
    return { checkpointId: n, shards };
  }

  /** Stores the task token; if every ack is already in, wakes the workflow itself. */
  async await(n: number, taskToken: string): Promise<{ checkpointId: number }> {
    const r = await this.clients.doc.send(
      new UpdateCommand({
        TableName: this.table,
        Key: { pk: 'checkpoint', sk: pad(n) },
        UpdateExpression: 'SET taskToken = :t',
        ExpressionAttributeValues: { ':t': taskToken },
        ReturnValues: 'ALL_NEW',
      }),
    );
    const acks = (r.Attributes?.acks as Set<string> | undefined)?.size ?? 0;
    if (acks >= ((r.Attributes?.expected as number | undefined) ?? Number.POSITIVE_INFINITY)) {
      await this.clients.sfn.send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify({ checkpointId: n }) })).catch((err: unknown) => {
        if ((err as { name?: string }).name !== 'TaskTimedOut' && (err as { name?: string }).name !== 'InvalidToken') throw err;
      });
    }
    return { checkpointId: n };
  }

  async commit(n: number): Promise<CommitOutput> {
    const ck = await this.get(n);
    if (!ck) throw new SluiceError(`checkpoint ${n} does not exist`, 'NO_CHECKPOINT');
    if (ck.status === 'IN_FLIGHT') await this.finish(n, 'COMPLETED', ck);
    else if (ck.status === 'ABORTED') throw new SluiceError(`checkpoint ${n} was aborted and cannot commit`, 'CHECKPOINT_ABORTED');
    // publishing is idempotent: a commit retried after a crash publishes what is left
    let published = 0;
    for (const t of this.commitTargets) published += await t.publish(n);
    return { checkpointId: n, published };
  }

  async abort(n: number, reason?: unknown): Promise<AbortOutput> {
    const ck = await this.get(n);
    if (ck?.status === 'IN_FLIGHT') await this.finish(n, 'ABORTED', ck, JSON.stringify(reason ?? 'aborted').slice(0, 1000));
    if (ck) await this.inject(n);
    await this.clients.doc.send(
      new UpdateCommand({
        TableName: this.table,
        Key: { pk: 'coordinator', sk: 'state' },
        UpdateExpression: 'REMOVE inFlight',
        ConditionExpression: 'inFlight = :n',
        ExpressionAttributeValues: { ':n': n },
      }),
    ).catch((err: unknown) => {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    });
    return { checkpointId: n };
  }

  private async finish(n: number, status: CheckpointStatus, ck: CheckpointRecord, reason?: string): Promise<void> {
    const end = this.now();
    await this.clients.doc.send(
      new UpdateCommand({
        TableName: this.table,
        Key: { pk: 'checkpoint', sk: pad(n) },
        UpdateExpression: `SET #status = :s, endedAt = :end, durationMs = :d${reason ? ', #reason = :r' : ''} REMOVE taskToken`,
        ConditionExpression: '#status = :inflight',
        ExpressionAttributeNames: { '#status': 'status', ...(reason ? { '#reason': 'reason' } : {}) },
        ExpressionAttributeValues: {
          ':s': status,
          ':end': end.toISOString(),
          ':d': end.getTime() - Date.parse(ck.startedAt),
          ':inflight': 'IN_FLIGHT',
          ...(reason ? { ':r': reason } : {}),
        },
      }),
    ).catch((err: unknown) => {
      if (!(err instanceof ConditionalCheckFailedException)) throw err; // finished by an earlier try
    });
    await this.clients.doc.send(
      new UpdateCommand({
        TableName: this.table,
        Key: { pk: 'coordinator', sk: 'state' },
        UpdateExpression: 'REMOVE inFlight',
        ConditionExpression: 'inFlight = :n',
        ExpressionAttributeValues: { ':n': n },
      }),
    ).catch((err: unknown) => {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    });
  }

  async get(n: number): Promise<CheckpointRecord | undefined> {
    const r = await this.clients.doc.send(new GetCommand({ TableName: this.table, Key: { pk: 'checkpoint', sk: pad(n) }, ConsistentRead: true }));
    return r.Item ? toRecord(r.Item) : undefined;
  }

  /** Every checkpoint record, oldest first. */
  async list(): Promise<CheckpointRecord[]> {
    const out: CheckpointRecord[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const r = await this.clients.doc.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': 'checkpoint' },
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of r.Items ?? []) out.push(toRecord(item));
      start = r.LastEvaluatedKey;
    } while (start);
    return out;
  }
}

function toRecord(item: Record<string, unknown>): CheckpointRecord {
  return {
    checkpointId: Number(item.sk),
    status: item.status as CheckpointStatus,
    savepoint: item.savepoint === true,
    expected: (item.expected as number | undefined) ?? 0,
    acks: (item.acks as Set<string> | undefined)?.size ?? 0,
    topology: (item.topology as number[] | undefined) ?? [],
    startedAt: item.startedAt as string,
    ...(item.endedAt ? { endedAt: item.endedAt as string } : {}),
    ...(item.durationMs !== undefined ? { durationMs: item.durationMs as number } : {}),
    ...(item.reason ? { reason: item.reason as string } : {}),
  };
}
