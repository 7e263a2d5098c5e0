/**
 * The sources' side of barriers at the read position (runtime/source-barriers.ts), in the control
 * table: the coordinator's announcement (written by DynamoCheckpointStore.announceBarrier) and each
 * source instance's placements, kept in its lease item so that one conditional write on the fence
 * both fences them and makes them durable.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { AnnouncedBarrier, SourceBarrierRecord, SourceBarrierStore } from '../../runtime/ports.js';
import { FencedError } from '../../util/errors.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';
import { announcedOf, controlKey } from './dynamo-checkpoint-store.js';

export class DynamoSourceBarrierStore implements SourceBarrierStore {
  constructor(
    private readonly clients: AwsClients,
    private readonly table: string,
  ) {}

  async announced(): Promise<readonly AnnouncedBarrier[]> {
    // an eventually consistent read: a stale one only delays a barrier to the next batch (or the tail)
    const r = await withThrottleRetry(() => this.clients.doc.send(new GetCommand({ TableName: this.table, Key: controlKey.sourceBarriers })));
    return announcedOf(r.Item);
  }

  async recorded(instanceId: string): Promise<SourceBarrierRecord> {
    const r = await withThrottleRetry(() =>
      this.clients.doc.send(new GetCommand({ TableName: this.table, Key: controlKey.lease(instanceId), ProjectionExpression: 'srcPlaced, srcReadThrough', ConsistentRead: true })),
    );
    return {
      placed: typeof r.Item?.srcPlaced === 'string' ? (JSON.parse(r.Item.srcPlaced) as SourceBarrierRecord['placed']) : [],
      readThrough: r.Item?.srcReadThrough as string | undefined,
    };
  }

  async record(instanceId: string, fence: number, record: SourceBarrierRecord): Promise<void> {
    const withRead = record.readThrough !== undefined;
    try {
      await withThrottleRetry(() =>
        this.clients.doc.send(
          new UpdateCommand({
            TableName: this.table,
            Key: controlKey.lease(instanceId),
            UpdateExpression: withRead ? 'SET srcPlaced = :p, srcReadThrough = :r' : 'SET srcPlaced = :p',
            ConditionExpression: 'fence = :fence',
            ExpressionAttributeValues: { ':p': JSON.stringify(record.placed), ':fence': fence, ...(withRead ? { ':r': record.readThrough } : {}) },
          }),
        ),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) throw new FencedError(`${instanceId}: fence ${fence} no longer holds the lease`);
      throw err;
    }
  }

  async crossed(checkpointId: number): Promise<boolean> {
    const r = await withThrottleRetry(() =>
      this.clients.doc.send(
        new GetCommand({ TableName: this.table, Key: controlKey.checkpoint(checkpointId), ProjectionExpression: '#s, acks, members, expected', ExpressionAttributeNames: { '#s': 'status' }, ConsistentRead: true }),
      ),
    );
    const item = r.Item;
    if (!item) return false;
    if (item.status === 'COMPLETED') return true;
    if (item.status !== 'IN_FLIGHT') return false;
    // complete as ack() judges it: by identity, or by count for records without members
    const acks = (item.acks as Set<string> | undefined) ?? new Set<string>();
    const members = item.members as Set<string> | undefined;
    return members ? [...members].every((m) => acks.has(m)) : acks.size >= ((item.expected as number | undefined) ?? Number.POSITIVE_INFINITY);
  }
}
