/**
 * The DynamoDB upsert sink. Each write is conditioned on the emitting instance's output version
 * (epoch, seq): a replay rewrites the same values, and a row never moves back in time. Another
 * producer of the same epoch wins by arrival (a key written from several keys), unless the row came
 * from a later generation (a child shard's instance took the key over from its parent in that
 * epoch: the parent's late writes must not undo it). Several writes of one key in a batch collapse
 * to the last.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { UpsertSinkWriter, UpsertWrite } from '../../runtime/ports.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';

const CONCURRENCY = 32;

export class DynamoUpsertSinkWriter implements UpsertSinkWriter {
  constructor(private readonly clients: AwsClients) {}

  async write(table: string, keyAttribute: string, writes: readonly UpsertWrite[]): Promise<void> {
    const last = new Map<string, UpsertWrite>();
    for (const w of writes) last.set(w.key, w);
    const todo = [...last.values()];
    let next = 0;
    const worker = async () => {
      while (next < todo.length) {
        const w = todo[next++]!;
        const gen = w.generation ?? 0;
        const names: Record<string, string> = { '#e': '_sluice_epoch', '#s': '_sluice_seq', '#p': '_sluice_producer', '#g': '_sluice_gen' };
        const values: Record<string, unknown> = { ':e': w.epoch, ':s': w.seq, ':p': w.producer, ':g': gen };
        const sets = ['#e = :e', '#s = :s', '#p = :p'];
        if (gen) sets.push('#g = :g');
        let i = 0;
        for (const [k, v] of Object.entries(w.item)) {
          if (k === keyAttribute || v === undefined) continue;
          names[`#a${i}`] = k;
          values[`:a${i}`] = v;
          sets.push(`#a${i} = :a${i}`);
          i++;
        }
        try {
          await withThrottleRetry(() =>
            this.clients.doc.send(
              new UpdateCommand({
                TableName: table,
                Key: { [keyAttribute]: w.key },
                UpdateExpression: `SET ${sets.join(', ')}${gen ? '' : ' REMOVE #g'}`,
                // newer epoch, or same epoch and producer with a later seq; another producer in the
                // same epoch wins by arrival unless the row is of a later generation
                ConditionExpression:
                  'attribute_not_exists(#e) OR #e < :e OR (#e = :e AND #p <> :p AND (attribute_not_exists(#g) OR #g <= :g)) OR (#e = :e AND #p = :p AND #s < :s)',
                ExpressionAttributeNames: names,
                ExpressionAttributeValues: values,
              }),
            ),
          );
        } catch (err) {
          if (!(err instanceof ConditionalCheckFailedException)) throw err; // a newer version is there already
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, todo.length) }, worker));
  }
}
