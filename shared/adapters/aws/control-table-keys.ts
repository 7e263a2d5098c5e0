/**
 * The control table (pk, sk), the one place its keys are spelled:
 *
 * | pk                     | sk                  | what                                                    |
 * |------------------------|---------------------|---------------------------------------------------------|
 * | `lease#<instance>`     | `lease`             | fence, first/lastPosition, snapshot (current pointer);  |
 * |                        |                     | a source's barrier placements (`srcPlaced`, `srcReadThrough`) |
 * | `delta#<instance>`     | `<n, padded>`       | a small delta, inline (larger ones go to S3)            |
 * | `checkpoint`           | `<n, padded>`       | status, members (expected acks), ack set, token, times  |
 * | `savepoint`            | `<id>`              | a savepoint's status, checkpoint and files              |
 * | `coordinator`          | `state`             | last allocated checkpoint, the open ones, stop/finish   |
 * | `coordinator`          | `savepoint-request` | the savepoint the next allocate takes                   |
 * | `coordinator`          | `rescale`           | an in-place rescale in progress                         |
 * | `coordinator`          | `idle`              | the parked `Allocate` task token                        |
 * | `coordinator`          | `loop`              | a commit in progress, an operator's stop                |
 * | `coordinator`          | `source-barriers`   | the checkpoints last opened, announced to the sources   |
 *
 * The coordinator's side of it is dynamo-checkpoint-store.ts, the instances' side is
 * dynamo-control-store.ts, restore is savepoints.ts; the rounds' workflow reads checkpoint records
 * by these keys too (cdk/coordinator-rounds-acks.ts).
 */

/** Numbered items' sort keys, zero-padded so they sort as numbers (the rounds' workflow pads to this width too). */
export const pad = (n: number) => String(n).padStart(12, '0');

const LEASE = 'lease#';
const DELTA = 'delta#';

/** Keys of the control table's items. */
export const controlKey = {
  state: { pk: 'coordinator', sk: 'state' },
  savepointRequest: { pk: 'coordinator', sk: 'savepoint-request' },
  rescale: { pk: 'coordinator', sk: 'rescale' },
  idle: { pk: 'coordinator', sk: 'idle' },
  loop: { pk: 'coordinator', sk: 'loop' },
  sourceBarriers: { pk: 'coordinator', sk: 'source-barriers' },
  checkpoint: (n: number) => ({ pk: 'checkpoint', sk: pad(n) }),
  savepoint: (id: string) => ({ pk: 'savepoint', sk: id }),
  lease: (instanceId: string) => ({ pk: `${LEASE}${instanceId}`, sk: 'lease' }),
  delta: (instanceId: string, n: number) => ({ pk: `${DELTA}${instanceId}`, sk: pad(n) }),
} as const;

/** Partition keys that hold several items. */
export const controlPartition = {
  checkpoints: 'checkpoint',
  savepoints: 'savepoint',
  deltas: (instanceId: string) => `${DELTA}${instanceId}`,
  /** the instance a lease item belongs to */
  instanceOfLease: (pk: string) => pk.slice(LEASE.length),
} as const;

/** Whether a control-table item outlives a restore (savepoint records and sink marks stay). */
export const keptByRestore = (pk: unknown) => pk === controlPartition.savepoints || pk === 'sink';
