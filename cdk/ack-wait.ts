/**
 * When an Express round reads a checkpoint's acks (cdk/coordinator-state-machine.ts). Pure numbers
 * (no CDK) so that `sluice cost` prices the reads the deployed round makes (bench/cost.ts).
 */
import type { Plan } from '../shared/plan/plan.js';

/** How often an Express round reads a checkpoint's acks while it waits for them. */
export const ACK_POLL_SECONDS = 1;

/** At most this many direct reads of a checkpoint's record without its acks before the coordinator function looks. */
export const MAX_DIRECT_ACK_READS = 5;

/**
 * Direct reads (a Step Functions GetItem, no invocation) a round makes of an unacked checkpoint's
 * record before it asks the coordinator function (`poll`: the progress window, the round's time,
 * abort), and again after each such poll. A quarter of the progress window at most, so a stuck
 * checkpoint is still found within about a window (cdk/coordinator-rounds-acks.ts).
 */
export function directAckReads(timeoutMs: number): number {
  return Math.max(1, Math.min(MAX_DIRECT_ACK_READS, Math.floor(timeoutMs / 4 / 1000 / ACK_POLL_SECONDS)));
}

/**
 * The least time a checkpoint's barrier takes, once injected, until the last stage can ack it: the
 * round's first read of the acks waits this long (a Wait state is free in Express; a read costs an
 * invocation). Every instance acks after its snapshot, which follows the barrier from all its inputs.
 * A source stage may find the barrier in a batch whose window is about to close (no time), but an
 * exchange stage's barrier comes in its upstream's put, which is made once per upstream batch and
 * opens a window of its own: each exchange hop takes at least the receiving stage's window. The
 * longest path of such hops is the bound (`windowMsOf`: a stage's deployed window, 0 with none).
 */
export function barrierWaitMs(plan: Plan, windowMsOf: (stageId: string) => number): number {
  const reached = new Map<string, number>();
  for (const s of plan.stages) {
    // stages come in topological order (the planner's)
    const upstream = s.input.kind === 'exchange' ? Math.max(...s.input.fromStages.map((id) => reached.get(id) ?? 0)) + windowMsOf(s.id) : 0;
    reached.set(s.id, upstream);
  }
  return Math.max(0, ...reached.values());
}
