/**
 * Waking an idle coordinator from the edge. While the job is quiet the coordinator parks its
 * `Allocate` task token in the control table (`IDLE_KEY`, see loop.ts). A source stage function
 * that handled a data record looks for that token after its batch; the one that deletes it (a
 * conditional delete: exactly one waker) fails the token with `Sluice.InputArrived`, which the
 * workflow catches back to `Allocate`. One consistent read per source invocation, nothing more
 * unless the coordinator is parked.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { SendTaskFailureCommand } from '@aws-sdk/client-sfn';
import { DeleteCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { AwsClients } from '../adapters/aws/clients.js';
import { decodeSourceControl } from '../codec/envelope.js';

export const IDLE_KEY = { pk: 'coordinator', sk: 'idle' } as const;

/** Errors the loop's token tasks fail with on purpose (caught by the workflow). */
export const LOOP_ERRORS = {
  inputArrived: 'Sluice.InputArrived',
  continuedAsNew: 'Sluice.ContinuedAsNew',
} as const;

/** Whether a batch holds a record that is not the coordinator's own (barrier, tick, end). */
export function hasInput(event: { readonly Records: ReadonlyArray<{ readonly kinesis: { readonly data: string } }> }): boolean {
  return event.Records.some((r) => decodeSourceControl(Buffer.from(r.kinesis.data, 'base64')) === undefined);
}

export class CoordinatorWake {
  constructor(
    private readonly clients: AwsClients,
    private readonly controlTable: string,
  ) {}

  /** Wakes the coordinator if it is parked; true when this call woke it. */
  async afterInput(): Promise<boolean> {
    const r = await this.clients.doc.send(new GetCommand({ TableName: this.controlTable, Key: IDLE_KEY, ConsistentRead: true }));
    const token = r.Item?.token as string | undefined;
    if (!token) return false;
    try {
      await this.clients.doc.send(
        new DeleteCommand({ TableName: this.controlTable, Key: IDLE_KEY, ConditionExpression: '#t = :t', ExpressionAttributeNames: { '#t': 'token' }, ExpressionAttributeValues: { ':t': token } }),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false; // another instance woke it
      throw err;
    }
    await this.clients.sfn
      .send(new SendTaskFailureCommand({ taskToken: token, error: LOOP_ERRORS.inputArrived, cause: 'a source stage received input' }))
      .catch((err: unknown) => {
        // the task already timed out (and re-checked for input itself)
        const name = (err as { name?: string }).name;
        if (name !== 'TaskTimedOut' && name !== 'InvalidToken') throw err;
      });
    return true;
  }
}
