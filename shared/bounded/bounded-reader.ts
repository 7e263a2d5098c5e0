/**
 * Bounded input for the same jobs that read streams. A BoundedReader is a producer like any other:
 * it lists the objects under an S3 prefix, reads them in parallel (JSON lines or CSV, gzip or not),
 * puts their records into the job's source stream with PutRecords, and when every object is in, puts
 * the end-of-input control record into every shard of that stream. The job then sees the end in
 * band: each source instance raises its watermark to the maximum (every window fires) and forwards
 * the end downstream, and the next checkpoint commits the final results. No batch engine, no second
 * plan: one job graph for both kinds of input.
 *
 * Order and watermarks: objects are fetched `concurrency` at a time but, by default, their records
 * are put in the order of the object keys (`ordered: true`), so objects named by time (the usual
 * layout, e.g. `dt=2026-01-01/part-0001.json.gz`) reach each shard in time order and the source's
 * usual watermark delay applies. With `ordered: false` (or readers fanned out over objects, one per
 * Lambda invocation), records of different objects interleave: give the source a watermark delay
 * that covers the disorder, or `HOLD_UNTIL_END` (the watermark then stays back until the end of
 * input, as in a batch job).
 */
import { gunzipSync } from 'node:zlib';
import { WatermarkStrategies } from '../api/job.js';
import { encodeSourceControl } from '../codec/envelope.js';
import { splitCsvLine } from '../sql/catalog.js';

/** Where the objects are: S3, or a map in memory (tests). */
export interface ObjectStore {
  /** keys (and sizes) under a prefix, in key order, every page */
  list(bucket: string, prefix: string): Promise<Array<{ key: string; size: number }>>;
  get(bucket: string, key: string): Promise<Uint8Array>;
}

/** Where the records go: the job's source stream. */
export interface SourceWriter {
  /** puts records (retrying throttled or failed entries until every one is in) */
  putRecords(stream: string, records: ReadonlyArray<{ data: Uint8Array; partitionKey: string }>): Promise<void>;
  /** the starting hash key of every shard, to put one control record into each */
  shardHashKeys(stream: string): Promise<string[]>;
  putRecordAt(stream: string, data: Uint8Array, explicitHashKey: string): Promise<void>;
}

export type BoundedFormat = 'jsonl' | 'csv';

export interface BoundedReadOptions {
  readonly bucket: string;
  readonly prefix: string;
  /** the source stream's physical name (resourceNames(plan).sourceStream(source)) */
  readonly stream: string;
  /** @default by extension: .csv / .csv.gz → csv, else jsonl */
  readonly format?: BoundedFormat;
  /**
   * csv only: turn each line into a JSON object with these field names (or, when `true`, the names in
   * each object's header line), for sources whose format is 'json'. Without it, lines go as text
   * (sources with format 'text', e.g. SQL tables with format 'csv').
   */
  readonly csvColumns?: readonly string[] | true;
  /** csv only, lines as text: the first line of each object is a header, skip it; @default false */
  readonly csvHeader?: boolean;
  /** objects fetched at once; @default 8 */
  readonly concurrency?: number;
  /** put records in object-key order (see the module doc); @default true */
  readonly ordered?: boolean;
  /** put the end-of-input record into every shard after the last object; @default true */
  readonly end?: boolean;
  /** called after each object is in */
  readonly onObject?: (key: string, records: number) => void;
}

export interface BoundedReadStats {
  readonly objects: number;
  readonly records: number;
  readonly bytes: number;
}

/** A watermark strategy for bounded input read out of order: nothing is late, every window fires at the end of input. */
export const HOLD_UNTIL_END = WatermarkStrategies.boundedOutOfOrderness(2 ** 50);

const GZIP = [0x1f, 0x8b];
const utf8 = new TextDecoder();
const enc = new TextEncoder();
const MAX_BATCH = 500;
const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/** The records of one object's bytes: one per non-blank line (gunzipped first when gzip). */
export function recordsOfObject(key: string, body: Uint8Array, options: Pick<BoundedReadOptions, 'format' | 'csvColumns' | 'csvHeader'> = {}): Uint8Array[] {
  const bytes = body.length >= 2 && body[0] === GZIP[0] && body[1] === GZIP[1] ? new Uint8Array(gunzipSync(body)) : body;
  const format = options.format ?? (/\.csv(\.gz)?$/i.test(key) ? 'csv' : 'jsonl');
  const lines = utf8.decode(bytes).split('\n');
  const out: Uint8Array[] = [];
  if (format === 'jsonl') {
    for (const l of lines) if (l.trim() !== '') out.push(enc.encode(l.replace(/\r$/, '')));
    return out;
  }
  let columns: readonly string[] | undefined = Array.isArray(options.csvColumns) ? options.csvColumns : undefined;
  let first = true;
  for (const raw of lines) {
    const l = raw.replace(/\r$/, '');
    if (l.trim() === '') continue;
    if (first) {
      first = false;
      if (options.csvColumns === true) {
        columns = splitCsvLine(l);
        continue;
      }
      if (options.csvHeader && !options.csvColumns) continue;
    }
    if (columns) {
      const fields = splitCsvLine(l);
      out.push(enc.encode(JSON.stringify(Object.fromEntries(columns.map((c, i) => [c, fields[i] ?? null])))));
    } else {
      out.push(enc.encode(l));
    }
  }
  return out;
}

export class BoundedReader {
  constructor(
    private readonly store: ObjectStore,
    private readonly writer: SourceWriter,
  ) {}

  /** Reads every object under the prefix into the stream, then (by default) ends the input. */
  async run(options: BoundedReadOptions): Promise<BoundedReadStats> {
    const objects = await this.store.list(options.bucket, options.prefix);
    const stats = { objects: 0, records: 0, bytes: 0 };
    const concurrency = Math.max(1, options.concurrency ?? 8);
    const ordered = options.ordered ?? true;
    let next = 0;
    // ordered mode: the index of the object whose records go next, and the workers waiting their turn
    let turn = 0;
    const waiters = new Map<number, () => void>();
    const putObject = async (i: number, records: Uint8Array[]) => {
      const key = objects[i]!.key;
      await this.put(options.stream, key, records);
      stats.objects++;
      stats.records += records.length;
      options.onObject?.(key, records.length);
    };
    const worker = async () => {
      for (;;) {
        const i = next++;
        if (i >= objects.length) return;
        const { key, size } = objects[i]!;
        const body = await this.store.get(options.bucket, key);
        stats.bytes += size || body.length;
        const records = recordsOfObject(key, body, options);
        if (!ordered) {
          await putObject(i, records);
          continue;
        }
        // wait for this object's turn (the worker that puts object i - 1 wakes it)
        if (turn !== i) await new Promise<void>((resolve) => waiters.set(i, resolve));
        await putObject(i, records);
        turn = i + 1;
        waiters.get(turn)?.();
        waiters.delete(turn);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, Math.max(1, objects.length)) }, worker));
    if (options.end ?? true) await endInput(this.writer, options.stream);
    return stats;
  }

  /** Reads one object (the body of a fanned-out reader invocation). */
  async readObject(options: Pick<BoundedReadOptions, 'bucket' | 'stream' | 'format' | 'csvColumns' | 'csvHeader'> & { key: string }): Promise<BoundedReadStats> {
    const body = await this.store.get(options.bucket, options.key);
    const records = recordsOfObject(options.key, body, options);
    await this.put(options.stream, options.key, records);
    return { objects: 1, records: records.length, bytes: body.length };
  }

  private async put(stream: string, key: string, records: Uint8Array[]): Promise<void> {
    let batch: Array<{ data: Uint8Array; partitionKey: string }> = [];
    let bytes = 0;
    for (let j = 0; j < records.length; j++) {
      const data = records[j]!;
      // deterministic partition keys: the same object spreads over the shards the same way every time
      const partitionKey = `${key.slice(-200)}#${j}`;
      if (batch.length === MAX_BATCH || bytes + data.length + partitionKey.length > MAX_BATCH_BYTES) {
        await this.writer.putRecords(stream, batch);
        batch = [];
        bytes = 0;
      }
      batch.push({ data, partitionKey });
      bytes += data.length + partitionKey.length;
    }
    if (batch.length) await this.writer.putRecords(stream, batch);
  }
}

/** Puts the end-of-input control record into every shard of a source stream. */
export async function endInput(writer: SourceWriter, stream: string): Promise<void> {
  const end = encodeSourceControl({ kind: 'end' });
  for (const hashKey of await writer.shardHashKeys(stream)) await writer.putRecordAt(stream, end, hashKey);
}
