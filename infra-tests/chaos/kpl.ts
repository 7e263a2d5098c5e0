/**
 * KPL aggregates for the chaos harness's input, made with the KPL's own aggregation library
 * (aws-kinesis-agg): good ones, and broken ones for the `malformed-kpl-aggregate` fault.
 */
import aggModule from 'aws-kinesis-agg';
import type { FaultSchedule } from '../../local/chaos/faults.js';
import type { InputRecord } from './harness.js';

const kpl = aggModule as unknown as {
  RecordAggregator: new () => { addUserRecord(r: { partitionKey: string; data: Buffer }): void; build(): { partitionKey: string; data: Buffer } };
};

/** A KPL aggregate of the records' payloads, made by the KPL's own aggregation library. */
export function kplAggregate(records: readonly InputRecord[]): Buffer {
  const agg = new kpl.RecordAggregator();
  for (const r of records) agg.addUserRecord({ partitionKey: r.produced.partitionKey, data: Buffer.from(r.payload as Uint8Array) });
  return Buffer.from(agg.build().data);
}

/**
 * A KPL aggregate of `records`, then broken: its MD5 checksum flipped, or its end cut off (a
 * truncated protobuf); `how` is drawn by the schedule unless given.
 */
export function brokenAggregate(records: readonly InputRecord[], schedule: FaultSchedule, forced?: 'checksum' | 'truncated'): { record: InputRecord; how: 'checksum' | 'truncated' } {
  const data = kplAggregate(records);
  const how = forced ?? (schedule.random() < 0.5 ? 'checksum' : 'truncated');
  // the checksum is the last 16 bytes; a cut of 17–20 bytes also takes the end of the last record
  let bytes: Buffer = data;
  if (how === 'checksum') {
    const at = data.length - 1 - schedule.int(16);
    data[at] = data[at]! ^ 0x5a;
  } else bytes = data.subarray(0, data.length - 17 - schedule.int(4));
  const first = records[0]!.produced;
  return {
    record: { payload: new Uint8Array(bytes), produced: { text: first.text, partitionKey: first.partitionKey, brokenAggregateOf: records.map((r) => r.produced.text) } },
    how,
  };
}
