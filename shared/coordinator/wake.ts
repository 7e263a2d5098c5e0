/**
 * Waking an idle coordinator from the edge. While the job is quiet the coordinator parks its
 * `Allocate` task token in the checkpoint store (see loop.ts). A source stage function
 * that handled a data record looks for that token after its batch; the one that deletes it (a
 * conditional delete: exactly one waker) fails the token with `Sluice.InputArrived`, which the
 * workflow catches back to `Allocate`. One consistent read per source invocation, nothing more
 * unless the coordinator is parked.
 */
import { decodeSourceControl } from '../codec/envelope.js';
import type { CheckpointStore, Workflow } from './ports.js';

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
    private readonly store: CheckpointStore,
    private readonly workflow: Workflow,
  ) {}

  /** Wakes the coordinator if it is parked; true when this call woke it. */
  async afterInput(): Promise<boolean> {
    const token = await this.store.idleToken();
    if (!token) return false;
    // a conditional delete: another instance that took it woke the coordinator
    if (!(await this.store.takeIdle(token))) return false;
    await this.workflow.fail(token, LOOP_ERRORS.inputArrived, 'a source stage received input').catch((err: unknown) => {
      // the task already timed out (and re-checked for input itself)
      const name = (err as { name?: string }).name;
      if (name !== 'TaskTimedOut' && name !== 'InvalidToken') throw err;
    });
    return true;
  }
}
