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
 * for its own key groups (StageRunner.inheritFromParents). A checkpoint n that aborts sends the
 * request back to phase 1.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateShardCountCommand } from '@aws-sdk/client-kinesis';
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { AwsClients } from '../adapters/aws/clients.js';
import { withThrottleRetry } from '../adapters/aws/clients.js';
import { describeStreamSummary } from '../adapters/aws/stream-mode.js';
import type { Plan } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import { SluiceError } from '../util/errors.js';

export type RescalePhase = 'requested' | 'draining' | 'resharding' | 'done';

export interface RescaleRecord {
  readonly stage: string;
  readonly fromShards: number;
  readonly toShards: number;
  readonly phase: RescalePhase;
  readonly requestedAt: string;
  /** the checkpoint whose barriers announced the reshard */
  readonly checkpointId?: number;
  readonly reshardedAt?: string;
  readonly finishedAt?: string;
}

/** What allocate must do about a rescale in progress. */
export type RescaleStep =
  /** go on; these stage numbers (if any) go into the checkpoint's barriers */
  | { readonly proceed: true; readonly reshard: readonly number[] }
  /** start no checkpoint now (the stream is being resharded) */
  | { readonly proceed: false; readonly why: string };

const KEY = { pk: 'coordinator', sk: 'rescale' };

export class InPlaceRescale {
  constructor(
    private readonly plan: Plan,
    private readonly names: ResourceNames,
    private readonly clients: AwsClients,
    private readonly now: () => Date,
  ) {}

  private get table(): string {
    return this.names.controlTable;
  }

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
    try {
      await this.clients.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: { ...KEY, ...record },
          ConditionExpression: 'attribute_not_exists(pk) OR phase = :done',
          ExpressionAttributeValues: { ':done': 'done' },
        }),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) throw new SluiceError('another rescale is still in progress', 'RESCALE_PENDING', true);
      throw err;
    }
    return record;
  }

  async get(): Promise<RescaleRecord | undefined> {
    const r = await this.clients.doc.send(new GetCommand({ TableName: this.table, Key: KEY, ConsistentRead: true }));
    if (!r.Item) return undefined;
    const { pk: _pk, sk: _sk, ...rest } = r.Item;
    return rest as RescaleRecord;
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
            await withThrottleRetry(() =>
              this.clients.kinesis.send(new UpdateShardCountCommand({ StreamName: stream, TargetShardCount: r.toShards, ScalingType: 'UNIFORM_SCALING' })),
            );
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
    await this.clients.doc.send(new DeleteCommand({ TableName: this.table, Key: KEY }));
  }

  private async setPhase(phase: RescalePhase, extra: Record<string, unknown> = {}): Promise<void> {
    const names: Record<string, string> = { '#phase': 'phase' };
    const values: Record<string, unknown> = { ':p': phase };
    let set = '#phase = :p';
    for (const [k, v] of Object.entries(extra)) {
      names[`#${k}`] = k;
      values[`:${k}`] = v;
      set += `, #${k} = :${k}`;
    }
    await this.clients.doc.send(
      new UpdateCommand({ TableName: this.table, Key: KEY, UpdateExpression: `SET ${set}`, ExpressionAttributeNames: names, ExpressionAttributeValues: values }),
    );
  }

  private describe(stream: string) {
    return describeStreamSummary(this.clients, stream);
  }
}
