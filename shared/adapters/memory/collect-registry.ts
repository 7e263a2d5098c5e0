/**
 * The store behind `collectSink`: outputs staged per (producer, epoch, seq) and published when a
 * checkpoint commits — every unpublished epoch below it, in a deterministic order. It lives in the
 * memory of the process running the job (tests and the local runner), shared by all simulated
 * execution environments, as an external system would be. With the in-memory ports every
 * transactional sink (collect, S3 file, Kinesis) stages here, so a job written for S3 or Kinesis
 * output runs unchanged in unit tests; on AWS those sinks stage in S3 instead
 * (shared/adapters/aws/staged-sinks.ts).
 */
import { createHash } from 'node:crypto';
import type { CollectSinkStore, StagedOutput } from '../../runtime/ports.js';

/**
 * A 30-bit digest of an output's content: all the registry keeps of a published output, to tell a
 * re-stage with other content (a different content is missed only when its digest collides, 1 in
 * 2^30). 30 bits keep it a small integer, stored in an array slot without a boxed number.
 */
const fingerprint = (value: unknown) => createHash('sha1').update(JSON.stringify(value) ?? 'undefined').digest().readUInt32BE(0) >>> 2;

/**
 * Where published outputs go: the downstream system's contents. Kept in memory by default; a long
 * run can keep them outside the process (local/published-outputs-file.ts), as a real downstream
 * would, so that the process's heap is the job's.
 */
export interface PublishedOutputs {
  append(sink: string, values: readonly unknown[]): void;
  /** every value published to the sink so far, in publishing order */
  values<T = unknown>(sink: string): T[];
}

export class MemoryPublishedOutputs implements PublishedOutputs {
  private readonly out = new Map<string, unknown[]>();
  append(sink: string, values: readonly unknown[]): void {
    let list = this.out.get(sink);
    if (!list) this.out.set(sink, (list = []));
    for (const v of values) list.push(v);
  }
  values<T = unknown>(sink: string): T[] {
    return (this.out.get(sink) ?? []) as T[];
  }
}

export class CollectRegistry implements CollectSinkStore {
  /** staged outputs not published yet, per sink and id; a published one leaves (a long run would otherwise keep every output twice) */
  private readonly staged = new Map<string, Map<string, StagedOutput>>();
  /** every published output: per `sink/producer/epoch`, its content's fingerprint at its seq (an array: a long run publishes many) */
  private readonly publishedIds = new Map<string, number[]>();
  /** how often a staged id was rewritten with different content (must stay 0: determinism) */
  conflicts = 0;
  /** the sinks whose staged ids were rewritten with different content */
  readonly conflictedSinks = new Set<string>();

  constructor(private readonly out: PublishedOutputs = new MemoryPublishedOutputs()) {}

  async stage(sink: string, outputs: readonly StagedOutput[]): Promise<void> {
    let m = this.staged.get(sink);
    if (!m) this.staged.set(sink, (m = new Map()));
    for (const o of outputs) {
      const id = `${o.producer}/${o.epoch}/${o.seq}`;
      const done = this.publishedIds.get(`${sink}/${o.producer}/${o.epoch}`)?.[o.seq];
      if (done !== undefined) {
        if (done !== fingerprint(o.value)) this.conflict(sink);
        continue;
      }
      const prev = m.get(id);
      if (prev && JSON.stringify(prev.value) !== JSON.stringify(o.value)) this.conflict(sink);
      if (!prev) m.set(id, o);
    }
  }

  private conflict(sink: string): void {
    this.conflicts++;
    this.conflictedSinks.add(sink);
  }

  /** Staged outputs not published yet, over every sink. */
  pending(): number {
    let n = 0;
    for (const m of this.staged.values()) n += m.size;
    return n;
  }

  /** Publishes every staged output of an epoch below `checkpointId` not yet published; idempotent. */
  publish(checkpointId: number): number {
    let n = 0;
    for (const [sink, m] of this.staged) {
      const ready = [...m.entries()].filter(([, o]) => o.epoch < checkpointId);
      ready.sort(([, a], [, b]) => a.epoch - b.epoch || (a.producer < b.producer ? -1 : a.producer > b.producer ? 1 : a.seq - b.seq));
      const values: unknown[] = [];
      for (const [id, o] of ready) {
        const epoch = `${sink}/${o.producer}/${o.epoch}`;
        let seqs = this.publishedIds.get(epoch);
        if (!seqs) this.publishedIds.set(epoch, (seqs = []));
        seqs[o.seq] = fingerprint(o.value);
        m.delete(id);
        values.push(o.value);
        n++;
      }
      if (values.length) this.out.append(sink, values);
    }
    return n;
  }

  published<T = unknown>(sink: string): T[] {
    return this.out.values<T>(sink);
  }
}
