/**
 * Keyed state rows in the state table: pk = `<operator>#<key group>`, sk = the key; attributes
 * `ckpt` (the checkpoint that wrote the row) and `v` (state name → bytes). Rows are written with a
 * condition `ckpt <= n`, so a slow writer of an older checkpoint can never overwrite a newer one,
 * and a redo of the same checkpoint rewrites the same values.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { StateRow, StateRowId, StateStore } from '../../runtime/ports.js';
import type { AwsClients } from './clients.js';
import { backoffMs, sleep, withThrottleRetry } from './clients.js';

const GET_BATCH = 100;
const WRITE_CONCURRENCY = 32;

export const rowPk = (operatorId: string, keyGroup: number) => `${operatorId}#${keyGroup}`;

export class DynamoStateStore implements StateStore {
  constructor(
    private readonly clients: AwsClients,
    private readonly table: string,
  ) {}

  async getRows(ids: readonly StateRowId[]): Promise<StateRow[]> {
    const out: StateRow[] = [];
    for (let i = 0; i < ids.length; i += GET_BATCH) {
      let keys: Array<Record<string, unknown>> = ids.slice(i, i + GET_BATCH).map((id) => ({ pk: rowPk(id.operatorId, id.keyGroup), sk: id.key }));
      for (let attempt = 0; keys.length; attempt++) {
        const r = await withThrottleRetry(() =>
          this.clients.doc.send(new BatchGetCommand({ RequestItems: { [this.table]: { Keys: keys, ConsistentRead: true } } })),
        );
        for (const item of r.Responses?.[this.table] ?? []) {
          const pk = item.pk as string;
          const cut = pk.lastIndexOf('#');
          const values: Record<string, Uint8Array> = {};
          for (const [k, v] of Object.entries((item.v as Record<string, Uint8Array> | undefined) ?? {})) values[k] = v;
          out.push({ operatorId: pk.slice(0, cut), keyGroup: Number(pk.slice(cut + 1)), key: item.sk as string, values, checkpointId: item.ckpt as number });
        }
        keys = (r.UnprocessedKeys?.[this.table]?.Keys as Array<Record<string, unknown>> | undefined) ?? [];
        if (keys.length) await sleep(backoffMs(attempt));
      }
    }
    return out;
  }

  async applyRows(checkpointId: number, _fence: number, rows: readonly StateRow[]): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < rows.length) {
        const row = rows[next++]!;
        try {
          await withThrottleRetry(() =>
            this.clients.doc.send(
              new UpdateCommand({
                TableName: this.table,
                Key: { pk: rowPk(row.operatorId, row.keyGroup), sk: row.key },
                UpdateExpression: 'SET ckpt = :n, v = :v',
                ConditionExpression: 'attribute_not_exists(ckpt) OR ckpt <= :n',
                ExpressionAttributeValues: { ':n': checkpointId, ':v': row.values },
              }),
            ),
          );
        } catch (err) {
          // a later checkpoint already wrote this row: it stays
          if (!(err instanceof ConditionalCheckFailedException)) throw err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(WRITE_CONCURRENCY, rows.length) }, worker));
  }
}
