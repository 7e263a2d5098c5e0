/**
 * The coordinator's side of the control table (shared/coordinator/ports.ts `CheckpointStore`): the
 * checkpoint records, the coordinator's own items and what it reads of the instances' leases. The
 * table's keys are spelled in control-table-keys.ts; the instances' side is dynamo-control-store.ts,
 * restore is savepoints.ts.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, DeleteCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ANNOUNCED_KEPT, type CheckpointEnd, type CheckpointStore, type CoordinatorState, type LoopState, type NewCheckpoint } from '../../coordinator/ports.js';
import type { CheckpointRecord, CheckpointStatus, InstanceCheckpointStats, RescaleRecord, SavepointRecord, SavepointStatus } from '../../coordinator/records.js';
import type { AnnouncedBarrier, SnapshotPointer } from '../../runtime/ports.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';
import { newWriteToken, ownConditionalWrite, WRITE_TOKEN } from './own-write.js';
import { controlKey, controlPartition } from './control-table-keys.js';

export { controlKey, controlPartition, keptByRestore, pad } from './control-table-keys.js';

const ignoreConditionFailed = (err: unknown): void => {
  if (!(err instanceof ConditionalCheckFailedException)) throw err;
};

/** false when the write's condition failed */
async function conditional(write: Promise<unknown>): Promise<boolean> {
  try {
    await write;
    return true;
  } catch (err) {
    ignoreConditionFailed(err);
    return false;
  }
}

/** The announcement item's checkpoints, oldest first. */
export function announcedOf(item: Record<string, unknown> | undefined): AnnouncedBarrier[] {
  return typeof item?.barriers === 'string' ? (JSON.parse(item.barriers) as AnnouncedBarrier[]) : [];
}

export class DynamoCheckpointStore implements CheckpointStore {
  constructor(
    private readonly clients: AwsClients,
    private readonly table: string,
  ) {}

  private async item(key: { pk: string; sk: string }): Promise<Record<string, unknown> | undefined> {
    return (await this.clients.doc.send(new GetCommand({ TableName: this.table, Key: key, ConsistentRead: true }))).Item;
  }

  private update(key: { pk: string; sk: string }, p: Omit<ConstructorParameters<typeof UpdateCommand>[0], 'TableName' | 'Key'>) {
    return this.clients.doc.send(new UpdateCommand({ TableName: this.table, Key: key, ...p }));
  }

  // ---- the coordinator's state

  async announceBarrier(announced: AnnouncedBarrier): Promise<void> {
    const n = announced.barrier.checkpointId;
    // a conditional write on a version: two writers never drop each other's checkpoint
    for (;;) {
      const item = await this.item(controlKey.sourceBarriers);
      const version = (item?.v as number | undefined) ?? 0;
      const list = [...announcedOf(item).filter((a) => a.barrier.checkpointId !== n), announced].sort((a, b) => a.barrier.checkpointId - b.barrier.checkpointId);
      const put = this.clients.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: { ...controlKey.sourceBarriers, v: version + 1, barriers: JSON.stringify(list.slice(-ANNOUNCED_KEPT)) },
          ConditionExpression: 'attribute_not_exists(v) OR v = :v',
          ExpressionAttributeValues: { ':v': version },
        }),
      );
      if (await conditional(put)) return;
    }
  }

  async readState(): Promise<CoordinatorState> {
    const item = await this.item(controlKey.state);
    return {
      last: (item?.last as number | undefined) ?? 0,
      open: openOf(item),
      ...(typeof item?.stopping === 'number' ? { stopping: item.stopping } : {}),
      ...(typeof item?.stoppedAt === 'number' ? { stoppedAt: item.stoppedAt } : {}),
      ...(typeof item?.finishedAt === 'number' ? { finishedAt: item.finishedAt } : {}),
    };
  }

  async openNext(n: number, previous: number, maxOpen: number, stop: boolean): Promise<boolean> {
    const token = newWriteToken();
    // a retry of an applied open fails `#last = :prev` on its own write: the token tells
    const r = await ownConditionalWrite(this.clients.doc, this.table, controlKey.state, token, () =>
      this.update(controlKey.state, {
        UpdateExpression: `SET #last = :n, #wt = :wt${stop ? ', stopping = :n' : ''} ADD #open :ns`,
        ConditionExpression:
          '(attribute_not_exists(#last) OR #last = :prev) AND (attribute_not_exists(#open) OR size(#open) < :max) AND attribute_not_exists(stoppedAt) AND attribute_not_exists(stopping)',
        ExpressionAttributeNames: { '#last': 'last', '#open': 'open', '#wt': WRITE_TOKEN },
        ExpressionAttributeValues: { ':n': n, ':prev': previous, ':ns': new Set([n]), ':max': maxOpen, ':wt': token },
      }),
    );
    return r.ok;
  }

  async closeOpen(n: number): Promise<void> {
    await this.update(controlKey.state, {
      // `inFlight`: the single open checkpoint as earlier versions recorded it
      UpdateExpression: 'DELETE #open :ns REMOVE inFlight',
      ExpressionAttributeNames: { '#open': 'open' },
      ExpressionAttributeValues: { ':ns': new Set([n]) },
    });
  }

  async liftStop(n: number): Promise<void> {
    await this.update(controlKey.state, { UpdateExpression: 'REMOVE stopping', ConditionExpression: 'stopping = :n', ExpressionAttributeValues: { ':n': n } }).catch(ignoreConditionFailed);
  }

  async markFinished(n: number): Promise<void> {
    await this.update(controlKey.state, { UpdateExpression: 'SET finishedAt = :n, stoppedAt = if_not_exists(stoppedAt, :n)', ExpressionAttributeValues: { ':n': n } });
  }

  async markStopped(n: number): Promise<void> {
    await this.update(controlKey.state, { UpdateExpression: 'SET stoppedAt = :n', ExpressionAttributeValues: { ':n': n } });
  }

  // ---- checkpoint records

  async getCheckpoint(n: number): Promise<CheckpointRecord | undefined> {
    const item = await this.item(controlKey.checkpoint(n));
    return item ? toRecord(item) : undefined;
  }

  async listCheckpoints(): Promise<CheckpointRecord[]> {
    return (await this.queryPartition(controlPartition.checkpoints)).map(toRecord);
  }

  async membersOf(n: number): Promise<readonly string[] | undefined> {
    const r = await this.clients.doc.send(new GetCommand({ TableName: this.table, Key: controlKey.checkpoint(n), ConsistentRead: true, ProjectionExpression: 'members' }));
    const members = r.Item?.members as Set<string> | undefined;
    return members ? [...members] : undefined;
  }

  async acksOf(n: number): Promise<readonly string[]> {
    return [...(((await this.item(controlKey.checkpoint(n)))?.acks as Set<string> | undefined) ?? [])].sort();
  }

  createCheckpoint(c: NewCheckpoint): Promise<boolean> {
    const { savepointId, reshard } = c;
    return conditional(
      this.update(controlKey.checkpoint(c.checkpointId), {
        UpdateExpression: `SET #status = :s, #expected = :e, #members = :m, #topology = :t, startedAt = :now, #savepoint = :sp${savepointId !== undefined ? ', savepointId = :spid' : ''}${reshard?.length ? ', reshard = :rs' : ''}`,
        ConditionExpression: 'attribute_not_exists(#status) OR (#status = :s AND startedAt = :now)',
        ExpressionAttributeNames: { '#status': 'status', '#expected': 'expected', '#members': 'members', '#topology': 'topology', '#savepoint': 'savepoint' },
        ExpressionAttributeValues: {
          ':s': 'IN_FLIGHT',
          ':e': c.members.length,
          ':m': new Set(c.members),
          ':t': c.topology,
          ':now': c.startedAt,
          ':sp': c.savepoint,
          ...(savepointId !== undefined ? { ':spid': savepointId } : {}),
          ...(reshard?.length ? { ':rs': reshard } : {}),
        },
      }),
    );
  }

  async fixInjection(n: number, listed: { readonly members: readonly string[]; readonly topology: readonly number[] }): Promise<{ readonly topology: readonly number[]; readonly listing: number } | undefined> {
    try {
      const r = await this.update(controlKey.checkpoint(n), {
        UpdateExpression: 'SET #expected = :e, #members = :m, #topology = :t ADD listing :one',
        ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(injected)',
        ExpressionAttributeNames: { '#expected': 'expected', '#members': 'members', '#topology': 'topology' },
        ExpressionAttributeValues: { ':e': listed.members.length, ':m': new Set(listed.members), ':t': listed.topology, ':one': 1 },
        ReturnValues: 'ALL_NEW',
      });
      return { topology: (r.Attributes?.topology as number[] | undefined) ?? [...listed.topology], listing: (r.Attributes?.listing as number | undefined) ?? 0 };
    } catch (err) {
      ignoreConditionFailed(err);
    }
    // n is injected already (or has no record)
    const item = await this.item(controlKey.checkpoint(n));
    return item ? { topology: (item.topology as number[] | undefined) ?? [], listing: (item.listing as number | undefined) ?? 0 } : undefined;
  }

  markInjected(n: number, listing: number): Promise<boolean> {
    return conditional(
      this.update(controlKey.checkpoint(n), {
        UpdateExpression: 'SET injected = :y',
        ConditionExpression: 'listing = :v',
        ExpressionAttributeValues: { ':y': true, ':v': listing },
      }),
    );
  }

  async createAbortedCheckpoint(c: Omit<NewCheckpoint, 'savepoint' | 'savepointId' | 'reshard'> & { readonly reason: string }): Promise<void> {
    const { members, topology, startedAt: at, reason } = c;
    await this.clients.doc
      .send(
        new PutCommand({
          TableName: this.table,
          Item: { ...controlKey.checkpoint(c.checkpointId), status: 'ABORTED', savepoint: false, expected: members.length, members: new Set(members), topology, startedAt: at, endedAt: at, durationMs: 0, reason },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      )
      .catch(ignoreConditionFailed);
  }

  async finishCheckpoint(n: number, end: CheckpointEnd): Promise<void> {
    const { reason } = end;
    await this.update(controlKey.checkpoint(n), {
      UpdateExpression: `SET #status = :s, endedAt = :end, durationMs = :d${reason ? ', #reason = :r' : ''} REMOVE taskToken`,
      ConditionExpression: '#status = :inflight',
      ExpressionAttributeNames: { '#status': 'status', ...(reason ? { '#reason': 'reason' } : {}) },
      ExpressionAttributeValues: { ':s': end.status, ':end': end.endedAt, ':d': end.durationMs, ':inflight': 'IN_FLIGHT', ...(reason ? { ':r': reason } : {}) },
    }).catch(ignoreConditionFailed);
  }

  async noteProgress(n: number, acks: number, at: string): Promise<void> {
    await this.update(controlKey.checkpoint(n), {
      UpdateExpression: 'SET progressAcks = :a, progressAt = :t',
      ConditionExpression: '#status = :inflight AND (attribute_not_exists(progressAcks) OR progressAcks < :a)',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: { ':a': acks, ':t': at, ':inflight': 'IN_FLIGHT' },
    }).catch(ignoreConditionFailed);
  }

  async setTaskToken(n: number, taskToken: string): Promise<boolean> {
    const r = await this.update(controlKey.checkpoint(n), { UpdateExpression: 'SET taskToken = :t', ExpressionAttributeValues: { ':t': taskToken }, ReturnValues: 'ALL_NEW' });
    return ackState(r.Attributes).complete;
  }

  async recordInstances(n: number, instances: Readonly<Record<string, InstanceCheckpointStats>>, bytes: number, keys: number): Promise<void> {
    await this.update(controlKey.checkpoint(n), {
      UpdateExpression: 'SET instances = :i, #bytes = :b, #keys = :k',
      ExpressionAttributeNames: { '#bytes': 'bytes', '#keys': 'keys' },
      ExpressionAttributeValues: { ':i': JSON.stringify(instances), ':b': bytes, ':k': keys },
    });
  }

  async deleteCheckpoint(n: number): Promise<void> {
    await this.clients.doc.send(new DeleteCommand({ TableName: this.table, Key: controlKey.checkpoint(n) }));
  }

  // ---- savepoints

  async getSavepoint(id: string): Promise<SavepointRecord | undefined> {
    const item = await this.item(controlKey.savepoint(id));
    return item ? toSavepoint(item) : undefined;
  }

  async listSavepoints(): Promise<SavepointRecord[]> {
    return (await this.queryPartition(controlPartition.savepoints)).map(toSavepoint);
  }

  createSavepoint(record: SavepointRecord): Promise<boolean> {
    return conditional(this.clients.doc.send(new PutCommand({ TableName: this.table, Item: { ...controlKey.savepoint(record.id), ...record }, ConditionExpression: 'attribute_not_exists(pk)' })));
  }

  async updateSavepoint(id: string, fields: Partial<Omit<SavepointRecord, 'id'>>, options: { readonly unless?: SavepointStatus } = {}): Promise<void> {
    const { set, names, values } = setExpression(fields);
    if (options.unless !== undefined) {
      names['#status'] = 'status';
      values[':unless'] = options.unless;
    }
    const write = this.update(controlKey.savepoint(id), {
      UpdateExpression: set,
      ...(options.unless !== undefined ? { ConditionExpression: '#status <> :unless' } : {}),
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    });
    await (options.unless !== undefined ? write.catch(ignoreConditionFailed) : write);
  }

  async dropRequestedSavepoint(id: string): Promise<void> {
    await this.clients.doc
      .send(
        new DeleteCommand({ TableName: this.table, Key: controlKey.savepoint(id), ConditionExpression: '#status = :s', ExpressionAttributeNames: { '#status': 'status' }, ExpressionAttributeValues: { ':s': 'REQUESTED' } }),
      )
      .catch(ignoreConditionFailed);
  }

  async getSavepointRequest(): Promise<{ id: string; stop: boolean } | undefined> {
    const item = await this.item(controlKey.savepointRequest);
    return typeof item?.id === 'string' ? { id: item.id, stop: item.stop === true } : undefined;
  }

  putSavepointRequest(request: { readonly id: string; readonly stop: boolean; readonly requestedAt: string }): Promise<boolean> {
    return conditional(
      this.clients.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: { ...controlKey.savepointRequest, id: request.id, stop: request.stop, requestedAt: request.requestedAt },
          ConditionExpression: 'attribute_not_exists(pk) OR id = :id',
          ExpressionAttributeValues: { ':id': request.id },
        }),
      ),
    );
  }

  async deleteSavepointRequest(id: string): Promise<void> {
    await this.clients.doc
      .send(new DeleteCommand({ TableName: this.table, Key: controlKey.savepointRequest, ConditionExpression: 'id = :id', ExpressionAttributeValues: { ':id': id } }))
      .catch(ignoreConditionFailed);
  }

  // ---- an in-place rescale

  async getRescale(): Promise<RescaleRecord | undefined> {
    const item = await this.item(controlKey.rescale);
    if (!item) return undefined;
    const { pk: _pk, sk: _sk, [WRITE_TOKEN]: _wt, ...rest } = item;
    return rest as unknown as RescaleRecord;
  }

  async createRescale(record: RescaleRecord): Promise<boolean> {
    const token = newWriteToken();
    // a retry of an applied create fails its own condition (a rescale in progress): the token tells
    const r = await ownConditionalWrite(this.clients.doc, this.table, controlKey.rescale, token, () =>
      this.clients.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: { ...controlKey.rescale, ...record, [WRITE_TOKEN]: token },
          ConditionExpression: 'attribute_not_exists(pk) OR phase = :done',
          ExpressionAttributeValues: { ':done': 'done' },
        }),
      ),
    );
    return r.ok;
  }

  async updateRescale(fields: Partial<RescaleRecord>): Promise<void> {
    const { set, names, values } = setExpression(fields);
    await this.update(controlKey.rescale, { UpdateExpression: set, ExpressionAttributeNames: names, ExpressionAttributeValues: values });
  }

  async clearRescale(): Promise<void> {
    await this.clients.doc.send(new DeleteCommand({ TableName: this.table, Key: controlKey.rescale }));
  }

  // ---- the instances' side

  async snapshotPointer(instanceId: string): Promise<SnapshotPointer | undefined> {
    return pointerOf(await this.item(controlKey.lease(instanceId)));
  }

  async snapshotPointers(instanceIds: readonly string[]): Promise<Map<string, SnapshotPointer>> {
    const out = new Map<string, SnapshotPointer>();
    for (let i = 0; i < instanceIds.length; i += 100) {
      let pending: Array<Record<string, unknown>> = instanceIds.slice(i, i + 100).map((id) => controlKey.lease(id));
      while (pending.length) {
        const b = await withThrottleRetry(() => this.clients.doc.send(new BatchGetCommand({ RequestItems: { [this.table]: { Keys: pending, ConsistentRead: true } } })));
        for (const item of b.Responses?.[this.table] ?? []) {
          const p = pointerOf(item);
          if (p) out.set(controlPartition.instanceOfLease(item.pk as string), p);
        }
        pending = (b.UnprocessedKeys?.[this.table]?.Keys as Array<Record<string, unknown>> | undefined) ?? [];
      }
    }
    return out;
  }

  async inlineDeltas(instanceId: string): Promise<number[]> {
    const out: number[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const r = await this.clients.doc.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': controlPartition.deltas(instanceId) },
          ProjectionExpression: 'sk',
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of r.Items ?? []) out.push(Number(item.sk));
      start = r.LastEvaluatedKey;
    } while (start);
    return out;
  }

  async deleteInlineDelta(instanceId: string, checkpointId: number): Promise<void> {
    await this.clients.doc.send(new DeleteCommand({ TableName: this.table, Key: controlKey.delta(instanceId, checkpointId) }));
  }

  // ---- the loop

  async parkIdle(taskToken: string, since: string): Promise<void> {
    await this.clients.doc.send(new PutCommand({ TableName: this.table, Item: { ...controlKey.idle, token: taskToken, since } }));
  }

  async idleToken(): Promise<string | undefined> {
    const item = await this.item(controlKey.idle);
    return item?.[WRITE_TOKEN] === undefined ? (item?.token as string | undefined) : undefined;
  }

  async takeIdle(taskToken: string): Promise<boolean> {
    // marked taken rather than deleted: a retry after a lost response finds its own mark (a deleted
    // item would say nothing about who deleted it); the next parkIdle replaces the item
    const token = newWriteToken();
    const r = await ownConditionalWrite(this.clients.doc, this.table, controlKey.idle, token, () =>
      this.update(controlKey.idle, {
        UpdateExpression: 'SET #wt = :wt',
        ConditionExpression: '#t = :t AND attribute_not_exists(#wt)',
        ExpressionAttributeNames: { '#t': 'token', '#wt': WRITE_TOKEN },
        ExpressionAttributeValues: { ':t': taskToken, ':wt': token },
      }),
    );
    return r.ok;
  }

  async markParked(instanceIds: readonly string[], taskToken: string): Promise<void> {
    // an instance with no lease item yet has no position write to return the mark: the stage looks
    // for the token on its first position instead (wake.ts)
    await Promise.all(
      instanceIds.map((id) =>
        this.update(controlKey.lease(id), {
          UpdateExpression: 'SET parked = :t',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: { ':t': taskToken },
        }).catch(ignoreConditionFailed),
      ),
    );
  }

  async clearParked(instanceId: string, taskToken: string): Promise<void> {
    await this.update(controlKey.lease(instanceId), {
      UpdateExpression: 'REMOVE parked',
      ConditionExpression: 'parked = :t',
      ExpressionAttributeValues: { ':t': taskToken },
    }).catch(ignoreConditionFailed);
  }

  async loopState(): Promise<LoopState> {
    const item = await this.item(controlKey.loop);
    return {
      ...(item?.committing !== undefined ? { committing: item.committing as number } : {}),
      ...(item?.committingAt !== undefined ? { committingAt: String(item.committingAt) } : {}),
      ...(item?.stopped !== undefined ? { stopped: String(item.stopped) } : {}),
    };
  }

  async markCommitting(n: number, at: string): Promise<void> {
    await this.update(controlKey.loop, { UpdateExpression: 'SET committing = :n, committingAt = :at', ExpressionAttributeValues: { ':n': n, ':at': at } });
  }

  async clearCommitting(n: number): Promise<void> {
    await this.update(controlKey.loop, { UpdateExpression: 'REMOVE committing, committingAt', ConditionExpression: 'committing = :n', ExpressionAttributeValues: { ':n': n } }).catch(
      ignoreConditionFailed,
    );
  }

  async setOperatorStop(at: string | undefined): Promise<void> {
    await this.update(controlKey.loop, { UpdateExpression: at !== undefined ? 'SET stopped = :at' : 'REMOVE stopped', ...(at !== undefined ? { ExpressionAttributeValues: { ':at': at } } : {}) });
  }

  /** Every item of one partition, in sort-key order (consistent reads, paged). */
  private async queryPartition(pk: string): Promise<Array<Record<string, unknown>>> {
    const out: Array<Record<string, unknown>> = [];
    let start: Record<string, unknown> | undefined;
    do {
      const r = await this.clients.doc.send(
        new QueryCommand({ TableName: this.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) }),
      );
      out.push(...(r.Items ?? []));
      start = r.LastEvaluatedKey;
    } while (start);
    return out;
  }
}

/** `SET #a = :a, …` for the fields given, with their names and values. */
function setExpression(fields: object): { set: string; names: Record<string, string>; values: Record<string, unknown> } {
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  const parts = Object.entries(fields).map(([k, v]) => {
    names[`#${k}`] = k;
    values[`:${k}`] = v;
    return `#${k} = :${k}`;
  });
  return { set: `SET ${parts.join(', ')}`, names, values };
}

function pointerOf(lease: Record<string, unknown> | undefined): SnapshotPointer | undefined {
  return typeof lease?.snapshot === 'string' ? (JSON.parse(lease.snapshot) as SnapshotPointer) : undefined;
}

function toSavepoint(item: Record<string, unknown>): SavepointRecord {
  const opt = (k: string) => (item[k] !== undefined ? { [k]: item[k] } : {});
  return {
    id: item.sk as string,
    status: item.status as SavepointStatus,
    stop: item.stop === true,
    requestedAt: item.requestedAt as string,
    ...opt('checkpointId'),
    ...opt('completedAt'),
    ...opt('location'),
    ...opt('rows'),
    ...opt('timers'),
    ...opt('bytes'),
    ...opt('reason'),
  } as SavepointRecord;
}

function toRecord(item: Record<string, unknown>): CheckpointRecord {
  return {
    checkpointId: Number(item.sk),
    status: item.status as CheckpointStatus,
    savepoint: item.savepoint === true,
    ...(item.savepointId !== undefined ? { savepointId: item.savepointId as string } : {}),
    ...(typeof item.instances === 'string' ? { instances: JSON.parse(item.instances) as Record<string, InstanceCheckpointStats> } : {}),
    ...(item.bytes !== undefined ? { bytes: item.bytes as number } : {}),
    ...(item.keys !== undefined ? { keys: item.keys as number } : {}),
    ...(item.restoredFrom !== undefined ? { restoredFrom: item.restoredFrom as string } : {}),
    ...(Array.isArray(item.reshard) && item.reshard.length ? { reshard: item.reshard as number[] } : {}),
    expected: (item.expected as number | undefined) ?? 0,
    acks: (item.acks as Set<string> | undefined)?.size ?? 0,
    ...ackState(item),
    topology: (item.topology as number[] | undefined) ?? [],
    ...(item.injected === true ? { injected: true } : {}),
    startedAt: item.startedAt as string,
    ...(item.endedAt ? { endedAt: item.endedAt as string } : {}),
    ...(item.durationMs !== undefined ? { durationMs: item.durationMs as number } : {}),
    ...(item.reason ? { reason: item.reason as string } : {}),
    ...(item.progressAcks !== undefined ? { progressAcks: item.progressAcks as number, progressAt: item.progressAt as string } : {}),
  };
}

/**
 * Whether a checkpoint item's ack set is complete: by the identities expected at allocate
 * (`members`), so that acks of instances nobody expected (a source stream resharded behind the
 * job's back, a child acking a checkpoint its parent was expected for) can never fill it; records
 * written before `members` existed compare counts.
 */
function ackState(item: Record<string, unknown> | undefined): { complete: boolean; missing?: string[] } {
  const acks = (item?.acks as Set<string> | undefined) ?? new Set<string>();
  const members = item?.members as Set<string> | undefined;
  if (!members) return { complete: acks.size >= ((item?.expected as number | undefined) ?? Number.POSITIVE_INFINITY) };
  const missing = [...members].filter((m) => !acks.has(m)).sort();
  return { complete: missing.length === 0, missing };
}

/** The checkpoints in flight, ascending (a number set in the coordinator's state item). */
function openOf(item: Record<string, unknown> | undefined): number[] {
  const open = new Set([...((item?.open as Set<number> | undefined) ?? [])].map(Number));
  // a state item written by an earlier version names its one open checkpoint `inFlight`
  if (typeof item?.inFlight === 'number') open.add(item.inFlight);
  return [...open].sort((a, b) => a - b);
}
