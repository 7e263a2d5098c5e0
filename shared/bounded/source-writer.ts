/** The bounded reader's `SourceWriter` over the Kinesis calls (`KinesisApi`): the SDK's or the twin's. */
import { putRecordsUntilAccepted, type KinesisApi, type PutOptions } from '../adapters/put-records.js';
import type { SourceWriter } from './bounded-reader.js';

export function sourceWriterOf(api: KinesisApi, retry: Pick<PutOptions, 'pause' | 'maxThrottleRetries'> = {}): SourceWriter {
  return {
    async putRecords(stream, records) {
      await putRecordsUntilAccepted(api, stream, records, retry);
    },
    async shardHashKeys(stream) {
      return (await api.listShards(stream)).filter((s) => s.endingSequenceNumber === undefined).map((s) => s.startingHashKey);
    },
    async putRecordAt(stream, data, explicitHashKey) {
      await putRecordsUntilAccepted(api, stream, [{ data, partitionKey: 'end', explicitHashKey }], retry);
    },
  };
}
