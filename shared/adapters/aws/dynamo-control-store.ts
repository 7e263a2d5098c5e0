/**
 * The instances' side of the control table: leases, snapshot pointers, deltas and checkpoint acks
 * (its keys: dynamo-checkpoint-store.ts). Deltas too large for an item go to S3 under
 * `deltaObjectPrefix`.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { FencedError } from '../../util/errors.js';
import type { ControlStore, DeltaRef, Lease, SnapshotPointer } from '../../runtime/ports.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';
import { controlKey, pad } from './dynamo-checkpoint-store.js';
import { newWriteToken, ownConditionalWrite, WRITE_TOKEN } from './own-write.js';
import { deltaObjectPrefix } from '../delta-keys.js';

export { pad } from './dynamo-checkpoint-store.js';

/**
 * Deltas up to this size live in the control table, larger ones in S3: a PutItem is billed per KB
 * ($0.625 per million write units) and an S3 PUT at any size ($5 per million), so from 8 KB on S3
 * is cheaper — and a delta holds every dirty row, which the state table then stores again.
 */
export const INLINE_DELTA_LIMIT = 8 * 1024;

export { deltaObjectPrefix } from '../delta-keys.js';

function toLease(item: Record<string, unknown> | undefined): Lease {
  return {
    fence: (item?.fence as number | undefined) ?? 0,
    lastPosition: item?.lastPosition as string | undefined,
    ...(typeof item?.firstPosition === 'string' ? { firstPosition: item.firstPosition } : {}),
    snapshot: item?.snapshot ? (JSON.parse(item.snapshot as string) as SnapshotPointer) : undefined,
    ...(typeof item?.parked === 'string' ? { parked: item.parked } : {}),
  };
}

export class DynamoControlStore implements ControlStore {
  constructor(
    private readonly clients: AwsClients,
    private readonly table: string,
    private readonly bucket: string,
  ) {}

  async readLease(instanceId: string): Promise<Lease> {
    const r = await withThrottleRetry(() =>
      this.clients.doc.send(new GetCommand({ TableName: this.table, Key: controlKey.lease(instanceId), ConsistentRead: true })),
    );
    return toLease(r.Item);
  }

  async takeOver(instanceId: string, expectedFence: number): Promise<Lease> {
    const next = expectedFence + 1;
    const key = controlKey.lease(instanceId);
    const token = newWriteToken();
    // a retry of an applied takeover fails `fence = :expected` on its own write: the token tells
    const r = await ownConditionalWrite(this.clients.doc, this.table, key, token, () =>
      this.clients.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: key,
          UpdateExpression: 'SET fence = :next, takenAt = :now, #wt = :wt',
          ConditionExpression: expectedFence === 0 ? 'attribute_not_exists(fence) OR fence = :expected' : 'fence = :expected',
          ExpressionAttributeNames: { '#wt': WRITE_TOKEN },
          ExpressionAttributeValues: { ':next': next, ':expected': expectedFence, ':now': new Date().toISOString(), ':wt': token },
          ReturnValues: 'ALL_NEW',
        }),
      ),
    );
    if (!r.ok) throw new FencedError(`${instanceId}: lease moved past fence ${expectedFence} during takeover`);
    return toLease(r.out?.Attributes ?? r.item);
  }

  async writeDelta(instanceId: string, checkpointId: number, delta: Uint8Array): Promise<DeltaRef> {
    if (delta.length <= INLINE_DELTA_LIMIT) {
      const key = controlKey.delta(instanceId, checkpointId);
      await withThrottleRetry(() => this.clients.doc.send(new PutCommand({ TableName: this.table, Item: { ...key, data: delta, checkpointId } })));
      return { store: 'inline', key: `${key.pk}|${key.sk}` };
    }
    const key = `${deltaObjectPrefix(instanceId)}${pad(checkpointId)}.bin`;
    await withThrottleRetry(() => this.clients.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: delta })));
    return { store: 's3', key };
  }

  async readDelta(ref: DeltaRef): Promise<Uint8Array> {
    if (ref.store === 'inline') {
      const [pk, sk] = ref.key.split('|') as [string, string];
      const r = await withThrottleRetry(() => this.clients.doc.send(new GetCommand({ TableName: this.table, Key: { pk, sk }, ConsistentRead: true })));
      if (!r.Item) throw new Error(`delta ${ref.key} is missing from ${this.table}`);
      return r.Item.data as Uint8Array;
    }
    const r = await withThrottleRetry(() => this.clients.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: ref.key })));
    return r.Body!.transformToByteArray();
  }

  async publishSnapshot(instanceId: string, fence: number, pointer: SnapshotPointer): Promise<void> {
    await this.fenced(instanceId, fence, 'SET #snapshot = :s, snapshotAt = :now', {
      ':s': JSON.stringify(pointer),
      ':now': new Date().toISOString(),
    });
  }

  async commitPosition(instanceId: string, fence: number, lastPosition: string, firstPosition?: string): Promise<string | undefined> {
    // the item as it was comes back with the write (no capacity of its own): a parked coordinator's
    // token on it tells a source batch with input to wake it (coordinator/wake.ts); a retried write
    // returns it again, since only the waker removes it
    const old =
      firstPosition === undefined
        ? await fencedLeaseUpdate(this.clients, this.table, instanceId, fence, 'SET lastPosition = :p', { ':p': lastPosition }, 'ALL_OLD')
        : await fencedLeaseUpdate(this.clients, this.table, instanceId, fence, 'SET lastPosition = :p, firstPosition = if_not_exists(firstPosition, :f)', { ':p': lastPosition, ':f': firstPosition }, 'ALL_OLD');
    return typeof old?.parked === 'string' ? old.parked : undefined;
  }

  private async fenced(instanceId: string, fence: number, update: string, values: Record<string, unknown>): Promise<void> {
    await fencedLeaseUpdate(this.clients, this.table, instanceId, fence, update, values);
  }

  async ack(checkpointId: number, instanceId: string): Promise<{ completedBy: boolean; taskToken?: string }> {
    try {
      const r = await withThrottleRetry(() =>
        this.clients.doc.send(
          new UpdateCommand({
            TableName: this.table,
            Key: controlKey.checkpoint(checkpointId),
            UpdateExpression: 'ADD acks :me',
            ConditionExpression: 'attribute_exists(pk)',
            ExpressionAttributeValues: { ':me': new Set([instanceId]) },
            ReturnValues: 'ALL_OLD',
          }),
        ),
      );
      const old = r.Attributes ?? {};
      const before = (old.acks as Set<string> | undefined) ?? new Set<string>();
      const members = old.members as Set<string> | undefined;
      const expected = (old.expected as number | undefined) ?? Number.POSITIVE_INFINITY;
      const after = before.has(instanceId) ? before.size : before.size + 1;
      // complete by identity: every instance expected at allocate has acked (an ack from an instance
      // nobody expected, e.g. a shard of a source resharded outside the job, does not count);
      // records written before `members` existed compare counts.
      // Every ack that finds the set complete wakes the workflow, not only the one that completed it:
      // if that one crashed before SendTaskSuccess, its retry (a duplicate ack) must still do it;
      // extra SendTaskSuccess calls on an answered token are ignored
      const complete = members ? [...members].every((m) => m === instanceId || before.has(m)) : after >= expected;
      const completedBy = old.status === 'IN_FLIGHT' && complete;
      return { completedBy, ...(old.taskToken ? { taskToken: old.taskToken as string } : {}) };
    } catch (err) {
      // a checkpoint record that does not exist: nobody waits for this ack
      if (err instanceof ConditionalCheckFailedException) return { completedBy: false };
      throw err;
    }
  }
}

/**
 * An update of an instance's lease item that only its current owner may make (`fence = :fence`); a
 * failed condition is a FencedError. A retry of an applied update succeeds again (the fence is unchanged).
 */
export async function fencedLeaseUpdate(
  clients: Pick<AwsClients, 'doc'>,
  table: string,
  instanceId: string,
  fence: number,
  update: string,
  values: Record<string, unknown>,
  returnValues?: 'ALL_OLD',
): Promise<Record<string, unknown> | undefined> {
  try {
    const r = await withThrottleRetry(() =>
      clients.doc.send(
        new UpdateCommand({
          TableName: table,
          Key: controlKey.lease(instanceId),
          UpdateExpression: update,
          ConditionExpression: 'fence = :fence',
          ...(update.includes('#snapshot') ? { ExpressionAttributeNames: { '#snapshot': 'snapshot' } } : {}),
          ExpressionAttributeValues: { ...values, ':fence': fence },
          ...(returnValues ? { ReturnValues: returnValues } : {}),
        }),
      ),
    );
    return r.Attributes;
  } catch (err) {
    if (err instanceof ConditionalCheckFailedException) throw new FencedError(`${instanceId}: fence ${fence} no longer holds the lease`);
    throw err;
  }
}
