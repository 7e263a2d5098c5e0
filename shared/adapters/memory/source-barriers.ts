/**
 * The sources' side of barriers at the read position on the in-memory twin of the control table:
 * the coordinator's announcement (MemoryControlStore.announcedBarriers, written by
 * MemoryCheckpointStore.announceBarrier) and each source instance's placements, fenced by its lease
 * as the DynamoDB store fences them with a condition on the lease item.
 */
import type { AnnouncedBarrier, RecordedBarriers, SourceBarrierRecord, SourceBarrierStore } from '../../runtime/ports.js';
import { FencedError } from '../../util/errors.js';
import { ackSetComplete, type MemoryControlStore } from './memory-ports.js';

export class MemorySourceBarrierStore implements SourceBarrierStore {
  /** the instances' records as JSON, as the lease items keep them */
  private readonly records = new Map<string, string>();
  readonly stats = { records: 0, fenced: 0 };

  constructor(private readonly control: MemoryControlStore) {}

  async announced(): Promise<readonly AnnouncedBarrier[]> {
    return JSON.parse(JSON.stringify(this.control.announcedBarriers)) as AnnouncedBarrier[];
  }

  async recorded(instanceId: string): Promise<RecordedBarriers> {
    const json = this.records.get(instanceId);
    const fence = this.control.lease(instanceId).fence ?? 0;
    return { ...(json ? (JSON.parse(json) as SourceBarrierRecord) : { placed: [], readThrough: undefined }), fence };
  }

  async record(instanceId: string, fence: number, record: SourceBarrierRecord): Promise<void> {
    if (this.control.lease(instanceId).fence !== fence) {
      this.stats.fenced++;
      throw new FencedError(`${instanceId}: fence ${fence} no longer holds the lease`);
    }
    const prev = this.records.get(instanceId);
    // as the DynamoDB update: an absent readThrough leaves the stored one
    const readThrough = record.readThrough ?? (prev ? (JSON.parse(prev) as SourceBarrierRecord).readThrough : undefined);
    this.records.set(instanceId, JSON.stringify({ placed: record.placed, readThrough }));
    this.stats.records++;
  }

  async crossed(checkpointId: number): Promise<boolean> {
    const ck = this.control.checkpoint(checkpointId);
    return !!ck && (ck.status === 'COMPLETED' || (ck.status === 'IN_FLIGHT' && ackSetComplete(ck)));
  }
}
