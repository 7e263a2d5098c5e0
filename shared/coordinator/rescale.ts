/**
 * Rescaling a running stage in place: its input stream is resharded at a checkpoint boundary while
 * the job keeps running. The coordinator drives it from `allocate`, one phase per call:
 *
 * 1. requested — the next checkpoint n carries the stage in its barriers' `reshard` list: from
 *    barrier n on, producers route to the stage by key group (a packet holds one key group and goes
 *    to its hash key), so every packet lands in the shard that owns its key group in the old layout
 *    and in the new one alike;
 * 2. draining — once n completes, every instance of the stage holds a snapshot at n and no barrier
 *    is pending: UpdateShardCount is called, and no checkpoint starts meanwhile;
 * 3. resharding — when the stream is ACTIVE with the target count, the next checkpoint's topology
 *    names the new shards: producers forward its barrier to them and stop routing by key group.
 *
 * The children start from their parents: Kinesis (and the event source mapping) delivers a child's
 * records only after its parents' ended, and the child instance rebuilds each parent's final state
 * for its own key groups (runtime/shard-inheritance.ts). A checkpoint n that aborts sends the
 * request back to phase 1.
 */
import type { Plan } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import { SluiceError } from '../util/errors.js';
import type { CheckpointStore, StreamScaler, StreamSummary } from './ports.js';
import type { RescalePhase, RescaleRecord } from './records.js';

export type { RescalePhase, RescaleRecord } from './records.js';

/** What allocate must do about a rescale in progress. */
export type RescaleStep =
  /** go on; these stage numbers (if any) go into the checkpoint's barriers */
  | { readonly proceed: true; readonly reshard: readonly number[] }
  /** start no checkpoint now (the stream is being resharded) */
  | { readonly proceed: false; readonly why: string };

export class InPlaceRescale {
  constructor(
    private readonly plan: Plan,
    private readonly names: ResourceNames,
    private readonly store: CheckpointStore,
    private readonly scaler: StreamScaler,
    private readonly now: () => Date,
  ) {}

  /**
   * Asks for the input stream of `stageId` to be resharded to `shards` at the next checkpoint
   * boundary. Kinesis' UpdateShardCount limits apply: at most double, at least half the current count.
   */
  async request(stageId: string, shards: number): Promise<RescaleRecord> {
    const stage = this.plan.stages.find((s) => s.id === stageId);
    if (!stage) throw new SluiceError(`no stage "${stageId}" (stages: ${this.plan.stages.map((s) => s.id).join(', ')})`, 'BAD_INPUT');
    const max = this.plan.maxParallelism;
    if (!Number.isInteger(shards) || shards < 1 || shards > max) throw new SluiceError(`shards must be an integer in [1, ${max}] (the job's maxParallelism), got ${shards}`, 'BAD_INPUT');
    const current = await this.describe(this.names.streamOf(stage));
    if (current.mode === 'ON_DEMAND') {
      throw new SluiceError(`stream ${this.names.streamOf(stage)} of stage ${stageId} is in on-demand mode: Kinesis scales it by itself and refuses UpdateShardCount, so it cannot be rescaled in place`, 'BAD_INPUT');
    }
    if (current.status !== 'ACTIVE') throw new SluiceError(`stream ${this.names.streamOf(stage)} is ${current.status}, not ACTIVE`, 'RESCALE_PENDING', true);
    if (shards === current.open) throw new SluiceError(`stage ${stageId} already has ${shards} shards`, 'BAD_INPUT');
    if (shards > 2 * current.open || shards < Math.ceil(current.open / 2)) {
      throw new SluiceError(`Kinesis reshards a stream to between half and double its shards in one step: ${current.open} → ${shards} is out of range; rescale in steps`, 'BAD_INPUT');
    }
    const record: RescaleRecord = { stage: stageId, fromShards: current.open, toShards: shards, phase: 'requested', requestedAt: this.now().toISOString() };
    if (!(await this.store.createRescale(record))) throw new SluiceError('another rescale is still in progress', 'RESCALE_PENDING', true);
    return record;
  }

  async get(): Promise<RescaleRecord | undefined> {
    return this.store.getRescale();
  }

  /** Called by allocate before it starts a checkpoint: advances the rescale by one phase if it can. */
  async beforeAllocate(statusOf: (n: number) => Promise<string | undefined>): Promise<RescaleStep> {
    const r = await this.get();
    if (!r || r.phase === 'done') return { proceed: true, reshard: [] };
    const stageIndex = this.plan.stages.findIndex((s) => s.id === r.stage);
    const stream = this.names.streamOf(this.plan.stages[stageIndex]!);
    switch (r.phase) {
      case 'requested':
        return { proceed: true, reshard: [stageIndex] };
      case 'draining': {
        const status = r.checkpointId === undefined ? undefined : await statusOf(r.checkpointId);
        if (status === 'COMPLETED') {
          const s = await this.describe(stream);
          if (s.status === 'ACTIVE' && s.open !== r.toShards) {
            await this.scaler.updateShardCount(stream, r.toShards);
          }
          await this.setPhase('resharding', { reshardedAt: this.now().toISOString() });
          return { proceed: false, why: `resharding ${stream} to ${r.toShards} shards` };
        }
        // with several checkpoints in flight, none may start after the announcing one until it ends
        if (status === 'IN_FLIGHT') return { proceed: false, why: `waiting for checkpoint ${r.checkpointId} to announce the reshard of ${stream}` };
        // the announcing checkpoint failed: announce again with the next one
        await this.setPhase('requested');
        return { proceed: true, reshard: [stageIndex] };
      }
      case 'resharding': {
        const s = await this.describe(stream);
        if (s.status === 'ACTIVE' && s.open === r.toShards) {
          await this.setPhase('done', { finishedAt: this.now().toISOString() });
          return { proceed: true, reshard: [] };
        }
        return { proceed: false, why: `waiting for ${stream} to reach ${r.toShards} shards (${s.status}, ${s.open} open)` };
      }
    }
  }

  /** Records that checkpoint n announces the reshard. */
  async announced(n: number): Promise<void> {
    await this.setPhase('draining', { checkpointId: n });
  }

  /** Forgets a finished rescale (a restore from a savepoint starts without one). */
  async clear(): Promise<void> {
    await this.store.clearRescale();
  }

  private async setPhase(phase: RescalePhase, extra: Partial<RescaleRecord> = {}): Promise<void> {
    await this.store.updateRescale({ phase, ...extra });
  }

  private describe(stream: string): Promise<StreamSummary> {
    return this.scaler.describe(stream);
  }
}
