/**
 * The streams an instance writes to (the inputs of the stages its exchanges lead to), as the
 * outbox's destinations: their open shards, looked up at start and again when a checkpoint's
 * topology says a destination was resharded.
 */
import type { Plan, PlanStage } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import { SluiceError } from '../util/errors.js';
import { makeDestination, type Outbox } from './outbox.js';
import type { RuntimePorts, ShardDirectory } from './ports.js';

/** Looks up the shards of every stream the stage writes to. */
export async function openDestinations(plan: Plan, stage: PlanStage, names: ResourceNames, shards: ShardDirectory, outbox: Outbox): Promise<void> {
  for (const op of stage.operators) {
    if (!op.exchange) continue;
    const target = plan.stages.find((s) => s.id === op.exchange!.toStage)!;
    const stream = names.streamOf(target);
    const open = await shards.openShards(stream);
    outbox.addDestination(target.id, makeDestination(stream, open, plan.maxParallelism), plan.stages.indexOf(target));
  }
}

/**
 * A barrier's topology announces a destination stream with another number of shards (it was
 * resharded after the previous checkpoint): forward the barrier to the new shards. The coordinator
 * injects the barrier only once the reshard is done, so ListShards already shows them.
 */
export async function refreshDestinations(
  instanceId: string,
  plan: Plan,
  stage: PlanStage,
  names: ResourceNames,
  ports: Pick<RuntimePorts, 'shards' | 'telemetry'>,
  outbox: Outbox,
  topology: readonly number[],
): Promise<void> {
  for (const op of stage.operators) {
    if (!op.exchange) continue;
    const target = plan.stages.find((s) => s.id === op.exchange!.toStage)!;
    const want = topology[plan.stages.indexOf(target)];
    if (!want || outbox.destination(target.id).shards.length === want) continue;
    const stream = names.streamOf(target);
    let shards = await ports.shards.openShards(stream);
    for (let attempt = 0; shards.length !== want && attempt < 20; attempt++) {
      await new Promise((r) => setTimeout(r, 250));
      shards = await ports.shards.openShards(stream);
    }
    if (shards.length !== want) {
      throw new SluiceError(`${instanceId}: ${stream} has ${shards.length} open shards, checkpoint topology says ${want}`, 'TOPOLOGY_MISMATCH', true);
    }
    outbox.replaceDestination(target.id, makeDestination(stream, shards, plan.maxParallelism));
    ports.telemetry.log('info', 'destination resharded: barriers and records go to its new shards', { instance: instanceId, stream, shards: shards.length });
  }
}
