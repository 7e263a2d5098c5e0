/**
 * The sources' side of barriers at the read position (runtime/source-barriers.ts), in the control
 * table: the coordinator's announcement (written by DynamoCheckpointStore.announceBarrier) and each
 * source instance's placements, kept in its lease item so that one conditional write on the fence
 * both fences them and makes them durable.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { AnnouncedBarrier, RecordedBarriers, SourceBarrierRecord, SourceBarrierStore } from '../../runtime/ports.js';
import { fencedLeaseUpdate } from './dynamo-control-store.js';
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

  async recorded(instanceId: string): Promise<RecordedBarriers> {
    const r = await withThrottleRetry(() =>
      this.clients.doc.send(
        new GetCommand({ TableName: this.table, Key: controlKey.lease(instanceId), ProjectionExpression: 'srcPlaced, srcReadThrough, fence', ConsistentRead: true }),
      ),
    );
    return {
      placed: typeof r.Item?.srcPlaced === 'string' ? (JSON.parse(r.Item.srcPlaced) as SourceBarrierRecord['placed']) : [],
      readThrough: r.Item?.srcReadThrough as string | undefined,
      fence: (r.Item?.fence as number | undefined) ?? 0,
    };
  }

  async record(instanceId: string, fence: number, record: SourceBarrierRecord): Promise<void> {
    const withRead = record.readThrough !== undefined;
    await fencedLeaseUpdate(this.clients, this.table, instanceId, fence, withRead ? 'SET srcPlaced = :p, srcReadThrough = :r' : 'SET srcPlaced = :p', {
      ':p': JSON.stringify(record.placed),
      ...(withRead ? { ':r': record.readThrough } : {}),
    });
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
