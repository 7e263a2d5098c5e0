/**
 * How far a local run has produced into its sources, and whether a checkpoint covers it: the last
 * record put on each source shard, kept by the source instance that reads the shard, and the test
 * that a checkpoint's replay points are past all of them (sources put barriers at their read
 * position, so a checkpoint started after a put may still leave the put's records out).
 */
import type { CheckpointRecord } from '../shared/coordinator/coordinator.js';
import type { Plan } from '../shared/plan/plan.js';
import { compareSeq } from '../shared/runtime/positions.js';
import { instanceIdOf } from '../shared/runtime/stage-instance.js';
import type { RecordPosition } from './input-lines.js';

export class ProducedPositions {
  /** The last record put on each source shard, by the source instance that reads it. */
  private readonly producedThrough = new Map<string, string>();

  constructor(private readonly plan: Plan) {}

  /** Notes a record put on source `sourceId`. */
  note(sourceId: string, p: RecordPosition): void {
    for (const stage of this.plan.stages) {
      if (stage.input.kind !== 'source' || stage.input.sourceId !== sourceId) continue;
      const id = instanceIdOf(stage.id, p.shardId);
      const prev = this.producedThrough.get(id);
      if (prev === undefined || compareSeq(p.sequenceNumber, prev) > 0) this.producedThrough.set(id, p.sequenceNumber);
    }
  }

  /**
   * Whether a checkpoint covers every record produced until now (later puts do not count). An
   * instance the checkpoint does not name is covered only when its shard is closed (`open`: the
   * source instances whose shards are open when the checkpoint is judged): a reshard closed it
   * before the checkpoint, and its records went on with the children. An open shard the checkpoint
   * does not name was split off after its allocate (someone resharded the source), and its records
   * are not in it.
   */
  coverageOfNow(): (open: ReadonlySet<string>) => (c: CheckpointRecord) => boolean {
    const through = new Map(this.producedThrough);
    return (open) => (c) =>
      c.instances !== undefined &&
      [...through].every(([id, seq]) => {
        const rp = c.instances![id]?.replayPoint;
        if (!rp) return !open.has(id);
        return rp.from === 'after' ? compareSeq(rp.sequenceNumber, seq) >= 0 : rp.from === 'at' && compareSeq(rp.sequenceNumber, seq) > 0;
      });
  }
}
