/**
 * Keyed state in the state table, packed per (operator, key group): see `runtime/packed-state.ts`
 * for the layout and its guarantees. This file is the DynamoDB side of it: a strongly consistent
 * Query per group (or BatchGetItem of the items holding the keys, once a group's chain is known;
 * UnprocessedKeys are asked again), PutItem conditioned on the item's version, DeleteItem for what
 * readers no longer look at; throttling is retried (`withThrottleRetry`). Writes ask for their consumed capacity, so
 * the write units a checkpoint costs are what DynamoDB reports, not an estimate.
 */
import { ConditionalCheckFailedException, type ConsumedCapacity } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, DeleteCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { StateRow, StateRowId, StateStore } from '../../runtime/ports.js';
import { groupPk, PackedStateStore, type PackedStateStoreOptions, type PackedTable, type StoredItem } from '../../runtime/packed-state.js';
import type { AwsClients } from './clients.js';
import { backoffMs, sleep, withThrottleRetry } from './clients.js';
import { newWriteToken, ownConditionalWrite, WRITE_TOKEN } from './own-write.js';

export const rowPk = groupPk;

const GET_BATCH = 100;

/** Requests and capacity the state table consumed (as DynamoDB reported it). */
export interface StateTableUsage {
  queries: number;
  batchGets: number;
  readUnits: number;
  puts: number;
  deletes: number;
  writeUnits: number;
  /** conditional writes refused */
  conditionFailures: number;
  /** bytes of the items written */
  bytesWritten: number;
}

export class DynamoPackedTable implements PackedTable {
  readonly usage: StateTableUsage = { queries: 0, batchGets: 0, readUnits: 0, puts: 0, deletes: 0, writeUnits: 0, conditionFailures: 0, bytesWritten: 0 };

  constructor(
    private readonly clients: AwsClients,
    private readonly table: string,
  ) {}

  private consumed(c: ConsumedCapacity | undefined, kind: 'read' | 'write'): void {
    const u = c?.CapacityUnits ?? 0;
    if (kind === 'read') this.usage.readUnits += u;
    else this.usage.writeUnits += u;
  }

  async query(pk: string): Promise<StoredItem[]> {
    const out: StoredItem[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const r = await withThrottleRetry(() =>
        this.clients.doc.send(
          new QueryCommand({
            TableName: this.table,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': pk },
            ConsistentRead: true,
            ReturnConsumedCapacity: 'TOTAL',
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        ),
      );
      this.usage.queries++;
      this.consumed(r.ConsumedCapacity, 'read');
      for (const item of r.Items ?? []) out.push(item as StoredItem);
      start = r.LastEvaluatedKey;
    } while (start);
    return out;
  }

  async getItems(keys: ReadonlyArray<{ pk: string; sk: string }>): Promise<Array<{ pk: string; item: StoredItem }>> {
    const out: Array<{ pk: string; item: StoredItem }> = [];
    for (let i = 0; i < keys.length; i += GET_BATCH) {
      let batch: Array<Record<string, unknown>> = keys.slice(i, i + GET_BATCH).map((k) => ({ pk: k.pk, sk: k.sk }));
      for (let attempt = 0; batch.length; attempt++) {
        const r = await withThrottleRetry(() =>
          this.clients.doc.send(new BatchGetCommand({ RequestItems: { [this.table]: { Keys: batch, ConsistentRead: true } }, ReturnConsumedCapacity: 'TOTAL' })),
        );
        this.usage.batchGets++;
        for (const c of r.ConsumedCapacity ?? []) this.consumed(c, 'read');
        for (const item of r.Responses?.[this.table] ?? []) {
          const { pk, ...rest } = item;
          out.push({ pk: pk as string, item: rest as StoredItem });
        }
        // keys DynamoDB did not get to are asked again
        batch = (r.UnprocessedKeys?.[this.table]?.Keys as Array<Record<string, unknown>> | undefined) ?? [];
        if (batch.length) await sleep(backoffMs(attempt));
      }
    }
    return out;
  }

  async put(pk: string, item: StoredItem, expected: number | undefined): Promise<boolean> {
    const token = newWriteToken();
    // a retry of an applied put fails its own condition (the version moved on by this very write): the token tells
    const r = await ownConditionalWrite(this.clients.doc, this.table, { pk, sk: item.sk }, token, () =>
      this.clients.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: { pk, ...item, [WRITE_TOKEN]: token },
          ConditionExpression: expected === undefined ? 'attribute_not_exists(pk)' : 'r = :r',
          ...(expected === undefined ? {} : { ExpressionAttributeValues: { ':r': expected } }),
          ReturnConsumedCapacity: 'TOTAL',
        }),
      ),
    );
    this.usage.puts++;
    if (r.ok && r.out) {
      this.usage.bytesWritten += item.d?.length ?? 0;
      this.consumed(r.out.ConsumedCapacity, 'write');
      return true;
    }
    // a failed condition is billed too
    this.usage.conditionFailures++;
    this.usage.writeUnits += 1;
    if (r.ok) this.usage.bytesWritten += item.d?.length ?? 0; // this call's own earlier write
    return r.ok;
  }

  async delete(pk: string, sk: string, expected?: number): Promise<void> {
    try {
      const r = await withThrottleRetry(() =>
        this.clients.doc.send(
          new DeleteCommand({
            TableName: this.table,
            Key: { pk, sk },
            ...(expected === undefined ? {} : { ConditionExpression: 'r = :r', ExpressionAttributeValues: { ':r': expected } }),
            ReturnConsumedCapacity: 'TOTAL',
          }),
        ),
      );
      this.usage.deletes++;
      this.consumed(r.ConsumedCapacity, 'write');
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      this.usage.deletes++;
      this.usage.conditionFailures++;
    }
  }
}

export class DynamoStateStore implements StateStore {
  readonly table: DynamoPackedTable;
  readonly packed: PackedStateStore;

  constructor(clients: AwsClients, table: string, options: PackedStateStoreOptions = {}) {
    this.table = new DynamoPackedTable(clients, table);
    this.packed = new PackedStateStore(this.table, options);
  }

  get usage(): StateTableUsage {
    return this.table.usage;
  }

  getRows(ids: readonly StateRowId[]): Promise<StateRow[]> {
    return this.packed.getRows(ids);
  }

  applyRows(checkpointId: number, fence: number, rows: readonly StateRow[]): Promise<void> {
    return this.packed.applyRows(checkpointId, fence, rows);
  }

  readGroup(operatorId: string, keyGroup: number): Promise<StateRow[]> {
    return this.packed.readGroup(operatorId, keyGroup);
  }
}
