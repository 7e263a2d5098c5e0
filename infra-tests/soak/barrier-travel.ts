/**
 * How long barriers wait in each stage's input stream: for every barrier an invocation is handed,
 * the time from the barrier record's arrival in the stream (Kinesis' ApproximateArrivalTimestamp) to
 * the invocation that processes it, next to the same age of the oldest record of every batch (the
 * stream's backlog, as the iterator age measures it). A barrier waits behind what is queued before
 * it, so in a FIFO stream its wait follows the backlog's age; the question is by how much.
 */
import type { KinesisStreamEvent } from 'aws-lambda';
import { decodePacket, decodeSourceControl, isPacket } from '../../shared/codec/envelope.js';

export interface StreamWaits {
  /** ms from a barrier's arrival in the stream to the invocation that handles it */
  readonly barrier: number[];
  /** ms from the arrival of a batch's oldest record to its invocation (the backlog's age) */
  readonly backlog: number[];
}

export class BarrierTravel {
  /** stage id → phase → waits */
  readonly waits = new Map<string, Map<string, StreamWaits>>();
  private readonly seen = new Set<string>();

  /** Call right before an invocation of `stage` starts (after any slowness the test adds). */
  observe(stage: string, event: KinesisStreamEvent, phase: string): void {
    const now = Date.now();
    const records = event.Records;
    if (!records.length) return;
    let byPhase = this.waits.get(stage);
    if (!byPhase) this.waits.set(stage, (byPhase = new Map()));
    let w = byPhase.get(phase);
    if (!w) byPhase.set(phase, (w = { barrier: [], backlog: [] }));
    w.backlog.push(Math.round(now - records[0]!.kinesis.approximateArrivalTimestamp * 1000));
    for (const r of records) {
      const data = Buffer.from(r.kinesis.data, 'base64');
      const ids = barrierIds(data);
      for (const n of ids) {
        // a retried batch hands the same barrier again: its first hand-over counts
        const key = `${stage}/${r.eventID}/${n}`;
        if (this.seen.has(key)) continue;
        this.seen.add(key);
        w.barrier.push(Math.round(now - r.kinesis.approximateArrivalTimestamp * 1000));
      }
    }
  }
}

function barrierIds(data: Uint8Array): number[] {
  if (isPacket(data)) {
    try {
      return decodePacket(data).envelopes.flatMap((e) => (e.kind === 'barrier' ? [e.checkpointId] : []));
    } catch {
      return [];
    }
  }
  const c = decodeSourceControl(data);
  return c?.kind === 'barrier' ? [c.checkpointId] : [];
}
