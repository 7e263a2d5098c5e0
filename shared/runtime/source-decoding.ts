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
