/**
 * Turns a source stream's records into user records: KPL-aggregated records are de-aggregated
 * (aws-kinesis-agg), then each user record is decoded by the source's format.
 */
import aggModule from 'aws-kinesis-agg';
import { MAX_EVENT_TIME } from '../api/graph.js';
import type { RecordFormat } from '../plan/plan.js';
import { checkWellFormed } from '../util/well-formed.js';

// a static import, so bundlers (esbuild in CDK) see the dependency and ship it
const agg = aggModule as unknown as {
  deaggregateSync(
    record: { data: string; sequenceNumber: string; partitionKey: string },
    computeChecksums: boolean,
    cb: (err: Error | null, userRecords?: Array<{ data: string }>) => void,
  ): void;
};

const KPL_MAGIC = [0xf3, 0x89, 0x9a, 0xc2];

export function isKplAggregated(data: Uint8Array): boolean {
  return data.length > 20 && KPL_MAGIC.every((b, i) => data[i] === b);
}

/** The user records inside one Kinesis record (one, unless it is KPL-aggregated). */
export function userRecordsOf(data: Uint8Array, sequenceNumber: string, partitionKey: string, deaggregate: boolean): Uint8Array[] {
  if (!deaggregate || !isKplAggregated(data)) return [data];
  let out: Uint8Array[] = [];
  let failure: Error | null = null;
  agg.deaggregateSync({ data: Buffer.from(data).toString('base64'), sequenceNumber, partitionKey }, true, (err, recs) => {
    if (err) failure = err;
    else out = (recs ?? []).map((r) => new Uint8Array(Buffer.from(r.data, 'base64')));
  });
  if (failure) throw failure;
  return out;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A user record's value by the source's format. `text`, when given, is `bytes` decoded as UTF-8
 * already (`batchTexts`): one decoding per batch instead of one per record.
 */
export function decodeUserRecord(bytes: Uint8Array, format: RecordFormat, text?: string): unknown {
  switch (format) {
    case 'json': {
      const t = text ?? utf8.decode(bytes);
      const value: unknown = JSON.parse(t);
      // only a \u escape makes a lone surrogate: the stages' payloads (UTF-8) would carry it as U+FFFD
      if (t.includes('\\u')) checkWellFormed(value);
      return value;
    }
    case 'text':
      return text ?? utf8.decode(bytes);
    case 'binary':
      return bytes;
  }
}

/**
 * The text of each record of a batch, decoded at once: their data, one after the other, as UTF-8
 * when all of it is ASCII (then a record's text is the substring at its byte offsets, the very
 * string decoding it alone gives), else undefined. Any other byte (a multi-byte character, a
 * byte-order mark, invalid UTF-8) leaves every record to be decoded on its own, so one that is not
 * UTF-8 still fails alone, to the dead letters. A record starting with a NUL byte is left out (its
 * text undefined): source control records (`\0SLUICE\0…`, whose varints are not ASCII) sit
 * among the data. Records whose data lie one after the other in one buffer (`kinesisBatch` decodes
 * a batch so) are read where they are, others copied together first.
 */
export function batchTexts(records: readonly { readonly data: Uint8Array }[]): Array<string | undefined> | undefined {
  const n = records.length;
  let first: Uint8Array | undefined;
  let total = 0;
  let adjacent = true;
  for (let i = 0; i < n; i++) {
    const d = records[i]!.data;
    if (d[0] === 0) continue;
    first ??= d;
    adjacent &&= d.buffer === first.buffer && d.byteOffset === first.byteOffset + total;
    total += d.length;
  }
  if (!first) return undefined;
  let all: Uint8Array;
  if (adjacent) all = new Uint8Array(first.buffer, first.byteOffset, total);
  else {
    all = new Uint8Array(total);
    for (let i = 0, at = 0; i < n; i++) {
      const d = records[i]!.data;
      if (d[0] === 0) continue;
      all.set(d, at);
      at += d.length;
    }
  }
  let text: string;
  try {
    text = utf8.decode(all);
  } catch {
    return undefined;
  }
  // any byte ≥ 0x80 of valid UTF-8 makes fewer characters than bytes
  if (text.length !== total) return undefined;
  const out = new Array<string | undefined>(n);
  for (let i = 0, at = 0; i < n; i++) {
    const d = records[i]!.data;
    if (d[0] === 0) continue;
    out[i] = text.substring(at, at + d.length);
    at += d.length;
  }
  return out;
}

/** What a source node adds to decoding: parsing the decoded value, and its event time. */
export interface SourceFunctions {
  parse?: (raw: unknown) => unknown;
  timestamp?: (v: unknown) => number;
}

/** A user record's value: decoded by the source's format, then parsed. Throws on a bad record. */
export function decodeSourceValue(bytes: Uint8Array, format: RecordFormat, fns: SourceFunctions | undefined, text?: string): unknown {
  const value = decodeUserRecord(bytes, format, text);
  return fns?.parse ? fns.parse(value) : value;
}

/**
 * A value's event time: the source's timestamp function's, in whole milliseconds as in Flink, else
 * the record's arrival time. Throws when the function gives no finite number.
 */
export function eventTimeOf(value: unknown, fns: SourceFunctions | undefined, arrival: number | undefined): number | undefined {
  if (!fns?.timestamp) return arrival;
  const ts = fns.timestamp(value);
  if (typeof ts !== 'number' || !Number.isFinite(ts)) throw new Error(`the timestamp function returned ${String(ts)}, not a finite number of ms`);
  const ms = Math.floor(ts);
  if (!(ms <= MAX_EVENT_TIME && ms >= -MAX_EVENT_TIME)) throw new Error(`the timestamp function returned ${ts}, beyond ±${MAX_EVENT_TIME} ms`);
  return ms;
}
