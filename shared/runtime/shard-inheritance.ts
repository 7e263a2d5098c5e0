/**
 * A shard without a snapshot of its own may be the child of a reshard. Its instance then starts
 * from its parents' final state: each parent restored from its last snapshot and replayed to the
 * end of its closed shard, keeping only the key groups the child owns (a parent with no snapshot
 * of its own is rebuilt from its parents in turn), then handed over (parent-handover.ts).
 */
import { keyGroupsOfHashRange } from '../plan/key-groups.js';
import type { ParentShare } from './parent-handover.js';
import type { RuntimePorts, ShardInfo } from './ports.js';
import { replayStart } from './positions.js';
import { instanceIdOf, StageInstance, type StageSpec } from './stage-instance.js';

export class ShardInheritance {
  constructor(private readonly spec: StageSpec) {}

  /** Starts `child` (of shard `shardId`) from its parents if it has any; returns the parents' ids. */
  async inherit(child: StageInstance, shardId: string): Promise<string[]> {
    const { plan, stage, names, ports } = this.spec;
    const shards = await ports.shards.allShards(names.streamOf(stage));
    const byId = new Map(shards.map((s) => [s.shardId, s]));
    const me = byId.get(shardId);
    const parents = me ? parentsOf(me, byId) : [];
    if (!me || !parents.length) return [];
    const owned = keyGroupsOfHashRange(me.startingHashKey, me.endingHashKey, plan.maxParallelism);
    child.inherit(await Promise.all(parents.map((p) => this.rebuildParent(p, me, byId, owned))));
    return parents.map((p) => p.shardId);
  }

  /** A closed shard's instance as it was at the shard's end, for the key groups of `owned`. */
  private async rebuildParent(shard: ShardInfo, child: ShardInfo, byId: ReadonlyMap<string, ShardInfo>, owned: readonly number[]): Promise<ParentShare> {
    const { job, plan, stage, names, ports, options } = this.spec;
    // it emits nothing: the parent wrote all of it, and dead letters, before its shard closed
    const quiet: RuntimePorts = { ...ports, deadLetters: { put: async () => {} } };
    const p = new StageInstance(job, plan, stage, shard.shardId, names, quiet, options);
    p.standForChild(owned);
    await p.init();
    const lease = await ports.control.readLease(instanceIdOf(stage.id, shard.shardId));
    if (lease.snapshot) await p.restore(lease.snapshot);
    else {
      const grandparents = parentsOf(shard, byId);
      if (grandparents.length) p.inherit(await Promise.all(grandparents.map((g) => this.rebuildParent(g, shard, byId, owned))));
    }
    const stream = names.streamOf(stage);
    for await (const page of ports.reader.read(stream, shard.shardId, replayStart(p.skipThrough, lease.snapshot ? undefined : lease.firstPosition), undefined)) {
      await p.processRecords(page);
      p.outbox.discard();
    }
    const children = [...byId.values()].filter((s) => s.parentShardId === shard.shardId || s.adjacentParentShardId === shard.shardId);
    children.sort((a, b) => (BigInt(a.startingHashKey) < BigInt(b.startingHashKey) ? -1 : 1));
    return { handover: p.handOver(), childIndex: Math.max(0, children.findIndex((c) => c.shardId === child.shardId)), children: Math.max(1, children.length) };
  }
}

/** The parents of a shard still listed by the stream (one after a split, two after a merge). */
function parentsOf(shard: ShardInfo, byId: ReadonlyMap<string, ShardInfo>): ShardInfo[] {
  return [shard.parentShardId, shard.adjacentParentShardId].filter((id): id is string => id !== undefined && byId.has(id)).map((id) => byId.get(id)!);
}
