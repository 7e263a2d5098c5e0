/**
 * How a stage instance's snapshot is made durable, in this order: every pending output accepted
 * (`drain`: the barrier was closed into the outbox before), then the dirty rows (with the spilled
 * ones) as one delta, then the lease's pointer (fenced), then the rows applied to the state table
 * when due (changelog.ts), then the ack.
 */
import { encodeDelta, type SnapshotExtrasToWrite } from '../codec/snapshot.js';
import type { DirtySpill } from './dirty-spill.js';
import { compareRows, type KeyedStateCache } from './keyed-state.js';
import type { Outbox } from './outbox.js';
import type { PendingRows } from './changelog.js';
import type { ReplayPoint, RuntimePorts } from './ports.js';

/** What a snapshot holds besides the rows, read when the rows are (after the drain). */
export interface SnapshotContent {
  extras(): SnapshotExtrasToWrite;
  /** the checkpoint record's part, read once the delta is written */
  meta(): { watermark: number | null; timers: number; finished: boolean };
}

/** A snapshot's checkpoint and where it sits. */
export interface SnapshotCut {
  readonly checkpointId: number;
  readonly fence: number;
  readonly replayPoint: ReplayPoint;
  /** a savepoint's or a reshard's barrier: the rows are applied now (someone reads the table next) */
  readonly readsTable: boolean;
}

export class SnapshotWriter {
  private reportedOut = 0;

  constructor(
    private readonly id: string,
    private readonly ports: RuntimePorts,
    private readonly outbox: Outbox,
    private readonly state: KeyedStateCache,
    private readonly spill: DirtySpill,
    private readonly pending: PendingRows,
    private readonly stats: { recordsOut: number; snapshots: number },
  ) {}

  /** Writes every pending output; resolves when all were accepted. */
  async drain(): Promise<void> {
    if (!this.outbox.pending) return;
    const { records, upserts, collected } = this.outbox.take();
    for (const r of records) for (const w of r.waves) this.stats.recordsOut += w.length;
    this.ports.telemetry.count('RecordsOut', this.outbox.dataOut - this.reportedOut);
    this.reportedOut = this.outbox.dataOut;
    await Promise.all([
      ...records.map(async (r) => {
        for (const w of r.waves) await this.ports.writer.putAll(r.stream, w);
      }),
      ...upserts.map((u) => this.ports.upsertSink.write(u.table, u.keyAttribute, u.writes)),
      ...collected.map((c) => this.ports.collectSink.stage(c.sink, c.outputs)),
    ]);
  }

  /** Drains, then makes snapshot `cut` durable and acks it; `started` is when the snapshot began. */
  async write(cut: SnapshotCut, content: SnapshotContent, started: number): Promise<void> {
    const { checkpointId: n, fence } = cut;
    // the barrier and everything before it must be accepted downstream before the snapshot is durable
    await this.drain();
    let rows = this.state.dirtyRows();
    if (this.spill.size) rows = rows.concat(await this.spill.readAll(fence)).sort(compareRows);
    const delta = encodeDelta(rows, content.extras());
    const ref = await this.ports.control.writeDelta(this.id, n, delta);
    // bytes and keys flushed: the coordinator copies them into the checkpoint's record at commit
    const m = content.meta();
    const meta = { watermark: m.watermark, timers: m.timers, bytes: delta.length, keys: rows.length, finished: m.finished };
    // rows applied to the table when due, and before anything reads it: a savepoint, a reshard's children, the job's end
    await this.pending.publish(this.ports.control, this.id, fence, { checkpointId: n, replayPoint: cut.replayPoint, delta: ref, meta }, { rows, bytes: delta.length }, cut.readsTable || meta.finished);
    this.state.markClean();
    if (this.spill.size) await this.spill.clear(fence);
    this.stats.snapshots++;
    const t = this.ports.telemetry;
    t.count('CheckpointKeys', rows.length);
    t.count('CheckpointBytes', delta.length);
    t.timing('CheckpointDurationMs', Date.now() - started);
    const ack = await this.ports.control.ack(n, this.id);
    if (ack.completedBy && ack.taskToken) await this.ports.notifier.succeed(ack.taskToken, { checkpointId: n });
  }
}
