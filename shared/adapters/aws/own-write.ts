/**
 * Conditional writes that know their own success. On AWS a write can be applied while its response
 * is lost (a reset connection, a timeout); the SDK sends the same request again, and the retry fails
 * its condition on the caller's own earlier write. Read as "someone else wrote", that turns a success
 * into a fence or a conflict. So such a write carries a token of its own (attribute `wt`, new per
 * call) and, when its condition fails, the item is read back strongly consistent: if it holds the
 * token, the write is this call's — a success. (dynalite does not implement
 * ReturnValuesOnConditionCheckFailure, so the read is a GetItem; a failed condition is rare.)
 *
 * Only for writes that leave the item in place: after a delete there is nothing to read back.
 */
import { randomBytes } from 'node:crypto';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { withThrottleRetry } from './clients.js';

/** The attribute holding the token of the write that last wrote the item. */
export const WRITE_TOKEN = 'wt';

/**
 * A token for one write call (each call its own: a token shared by two writers would make them one);
 * 96 random bits in 16 characters, since it is stored in every item written (state items included).
 */
export const newWriteToken = (): string => randomBytes(12).toString('base64url');

export type OwnWriteResult<T> =
  /** `out` is the write's own answer; `item` the item read back when the retry's condition failed on this call's earlier write */
  | { readonly ok: true; readonly out?: T; readonly item?: Record<string, unknown> }
  | { readonly ok: false; readonly error: ConditionalCheckFailedException };

/**
 * Runs `write` (a conditional write that stores `token` under WRITE_TOKEN in the item at `key`);
 * a failed condition is a success when the item holds the token, else `ok: false`.
 */
export async function ownConditionalWrite<T>(
  doc: DynamoDBDocumentClient,
  table: string,
  key: Record<string, unknown>,
  token: string,
  write: () => Promise<T>,
): Promise<OwnWriteResult<T>> {
  try {
    return { ok: true, out: await withThrottleRetry(write) };
  } catch (err) {
    if (!(err instanceof ConditionalCheckFailedException)) throw err;
    const r = await withThrottleRetry(() => doc.send(new GetCommand({ TableName: table, Key: key, ConsistentRead: true })));
    if (r.Item?.[WRITE_TOKEN] === token) return { ok: true, item: r.Item };
    return { ok: false, error: err };
  }
}
