/**
 * Turns a source stream's records into user records: KPL-aggregated records are de-aggregated
 * (aws-kinesis-agg), then each user record is decoded by the source's format.
 */
import aggModule from 'aws-kinesis-agg';
import type { RecordFormat } from '../plan/plan.js';

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

export function decodeUserRecord(bytes: Uint8Array, format: RecordFormat): unknown {
  switch (format) {
    case 'json':
      return JSON.parse(utf8.decode(bytes));
    case 'text':
      return utf8.decode(bytes);
    case 'binary':
      return bytes;
  }
}

/** What a source node adds to decoding: parsing the decoded value, and its event time. */
export interface SourceFunctions {
  parse?: (raw: unknown) => unknown;
  timestamp?: (v: unknown) => number;
}

/** A user record's value: decoded by the source's format, then parsed. Throws on a bad record. */
export function decodeSourceValue(bytes: Uint8Array, format: RecordFormat, fns: SourceFunctions | undefined): unknown {
  const value = decodeUserRecord(bytes, format);
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
  return Math.floor(ts);
}
