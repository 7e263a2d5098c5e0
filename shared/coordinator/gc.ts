/**
 * Garbage collection of deltas and checkpoint records (a commit runs it about once a minute).
 * Which deltas of one instance the coordinator may delete: a delta of checkpoint k is needed while
 *
 * - k is the instance's current snapshot pointer, or in the chain the pointer names (base < k ≤
 *   pointer: a restore folds those deltas, runtime/changelog.ts), or
 * - k is one of the retained completed checkpoints (`plan.checkpoint.retained`), or
 * - k is newer than every completed checkpoint (in flight, or written by a snapshot whose
 *   checkpoint has not committed yet).
 *
 * Everything else (older checkpoints, aborted ones the pointer has moved past) goes. Savepoints
 * never need deltas: they are self-contained copies (shared/adapters/aws/savepoints.ts).
 */
import type { Plan } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import type { SnapshotPointer } from '../runtime/ports.js';
import { chainOf } from '../runtime/changelog.js';
import { instanceIdOf } from '../runtime/stage-instance.js';
import type { CoordinatorPorts } from './ports.js';

export interface DeltaNeeds {
  readonly retained: ReadonlySet<number>;
  /** checkpoint id of the instance's current snapshot pointer, if any */
  readonly pointer: number | undefined;
  /** the last checkpoint applied before the pointer's chain (`chainOf`); absent: pointer − 1 */
  readonly base?: number | undefined;
  /** the newest completed checkpoint */
  readonly latestCompleted: number;
}

export function deltaNeeded(k: number, needs: DeltaNeeds): boolean {
  const { pointer } = needs;
  const inChain = pointer !== undefined && k <= pointer && k > (needs.base ?? pointer - 1);
  return inChain || needs.retained.has(k) || k > needs.latestCompleted;
}

/** The checkpoint ids among `existing` whose deltas can be deleted, ascending, without repeats. */
export function deltasToDelete(existing: readonly number[], needs: DeltaNeeds): number[] {
  return [...new Set(existing)].filter((k) => !deltaNeeded(k, needs)).sort((a, b) => a - b);
}

/** A commit collects garbage at most about this often: each run reads every instance's pointer and deltas. */
export const GC_PERIOD_MS = 60_000;

/**
 * Whether the commit of checkpoint n collects garbage: every `ceil(GC_PERIOD_MS / pauseMs)`-th
 * checkpoint id, so a job pays one LIST (for all its instances) and two reads per instance a
 * minute rather than per checkpoint. Checkpoints that take longer than the pause come far less
 * often than that (a short pause and 10 s checkpoints: one every 200 ids is once in half an hour, and deltas and records
 * pile up meanwhile), so a commit also collects when n was open across a GC_PERIOD_MS boundary
 * (`open`: its start and its commit, ms since the epoch). Collecting less often is safe: a delta no
 * checkpoint needs stays unneeded (the retained window and the pointers only move forward), it is
 * just deleted a little later.
 */
export function collectsGarbage(n: number, pauseMs: number, open?: { readonly startedAt: number; readonly committedAt: number }): boolean {
  const every = Math.max(1, Math.ceil(GC_PERIOD_MS / Math.max(1, pauseMs)));
  if (n % every === 0) return true;
  return open !== undefined && Math.floor(open.startedAt / GC_PERIOD_MS) !== Math.floor(open.committedAt / GC_PERIOD_MS);
}

/** Checkpoint records kept for `sluice checkpoints` (deltas are kept only for `plan.checkpoint.retained`). */
export const CHECKPOINT_HISTORY = 100;

/**
 * One collection over the whole job: deletes every instance's deltas that `deltasToDelete` lets go
 * (inline ones from the control table, the others from the bucket, found with one listing for the
 * job) and the checkpoint records beyond CHECKPOINT_HISTORY (savepoints' and retained ones stay).
 */
export async function collectGarbage(plan: Plan, names: ResourceNames, ports: CoordinatorPorts): Promise<{ deleted: number; kept: number }> {
  const all = await ports.store.listCheckpoints();
  const completed = all.filter((c) => c.status === 'COMPLETED').map((c) => c.checkpointId);
  const retained = new Set(completed.slice(-plan.checkpoint.retained));
  const latest = completed.length ? completed[completed.length - 1]! : 0;
  let deleted = 0;
  let kept = 0;
  const instances: Array<{ id: string; pointer: SnapshotPointer | undefined; inline: number[] }> = [];
  for (const stage of plan.stages) {
    for (const shard of await ports.shards.allShards(names.streamOf(stage))) {
      const id = instanceIdOf(stage.id, shard.shardId);
      // small deltas inline in the control table, large ones as objects
      instances.push({ id, pointer: await ports.store.snapshotPointer(id), inline: await ports.store.inlineDeltas(id) });
    }
  }
  // one listing for the whole job (after the pointers were read, as each instance's was before)
  const objectsOf = await ports.deltas.listByInstance(instances.map((i) => i.id));
  for (const { id, pointer, inline } of instances) {
    const objects = objectsOf.get(id) ?? new Map<number, string>();
    const needs = { retained, pointer: pointer?.checkpointId, base: pointer && chainOf(pointer).base, latestCompleted: latest };
    const del = deltasToDelete([...inline, ...objects.keys()], needs);
    for (const k of del) {
      if (inline.includes(k)) await ports.store.deleteInlineDelta(id, k);
      const key = objects.get(k);
      if (key) await ports.deltas.delete(key);
      deleted++;
    }
    kept += inline.length + objects.size - del.length;
  }
  // checkpoint records beyond the history
  for (const c of all.slice(0, Math.max(0, all.length - CHECKPOINT_HISTORY))) {
    if (c.savepoint || retained.has(c.checkpointId)) continue;
    await ports.store.deleteCheckpoint(c.checkpointId);
  }
  return { deleted, kept };
}
