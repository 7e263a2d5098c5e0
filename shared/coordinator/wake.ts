/**
 * Waking an idle coordinator from the edge. While the job is quiet the coordinator parks its
 * `Allocate` task token in the checkpoint store and leaves the token on every source instance's
 * lease item (see loop.ts). A source batch's position write returns the lease item as it was, so a
 * batch with input learns at no cost whether the coordinator is parked; the one whose conditional
 * take of the token succeeds (exactly one waker) fails it with `Sluice.InputArrived`, which the
 * workflow catches back to `Allocate`. The waker then removes the token from its lease item, so a
 * token left there by a park that ended otherwise costs one failed take, once per instance.
 *
 * Why no input is missed: the park writes the token, then the marks, then looks at the shards once
 * more. A batch's records were in the shard before its position write; if that write came before
 * the mark on its lease item, the park's last look comes after it and sees the records.
 */
import type { CheckpointStore, Workflow } from './ports.js';

/** Errors the loop's token tasks fail with on purpose (caught by the workflow). */
export const LOOP_ERRORS = {
  inputArrived: 'Sluice.InputArrived',
  continuedAsNew: 'Sluice.ContinuedAsNew',
} as const;

export class CoordinatorWake {
  constructor(
    private readonly store: CheckpointStore,
    private readonly workflow: Workflow,
  ) {}

  /**
   * Wakes the coordinator if it is parked; true when this call woke it. `cue` is the source batch's
   * (`BatchOutcome.wake`): the token on the instance's lease, or none on its first position (a shard
   * newer than the park's marks, such as a reshard's child: the parked token is read instead).
   */
  async afterBatch(instanceId: string, cue: { readonly token?: string }): Promise<boolean> {
    const token = cue.token ?? (await this.store.idleToken());
    if (!token) return false;
    // a conditional take: another instance that took it woke the coordinator
    const woke = await this.store.takeIdle(token);
    if (woke) {
      await this.workflow.fail(token, LOOP_ERRORS.inputArrived, 'a source stage received input').catch((err: unknown) => {
        // the task already timed out (and re-checked for input itself)
        const name = (err as { name?: string }).name;
        if (name !== 'TaskTimedOut' && name !== 'InvalidToken') throw err;
      });
    }
    // after the failure: a waker that dies before it leaves the mark for the instance's next batch
    if (cue.token !== undefined) await this.store.clearParked(instanceId, cue.token);
    return woke;
  }
}
