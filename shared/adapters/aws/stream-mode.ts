/**
 * The capacity mode of a Kinesis stream. An on-demand stream reshards itself (AWS splits and merges
 * its shards as traffic changes) and refuses UpdateShardCount, so the job adopts its new shards
 * like the children of any reshard and never rescales it in place.
 */
import { DescribeStreamSummaryCommand, type DescribeStreamSummaryCommandOutput } from '@aws-sdk/client-kinesis';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';
import type { StreamSummary } from '../../coordinator/ports.js';

export type { StreamCapacityMode, StreamSummary } from '../../coordinator/ports.js';

/** A DescribeStreamSummary answer as the job reads it; a stream without mode details (older API answers) is provisioned. */
export function streamSummaryOf(out: Pick<DescribeStreamSummaryCommandOutput, 'StreamDescriptionSummary'>): StreamSummary {
  const d = out.StreamDescriptionSummary;
  return {
    status: d?.StreamStatus ?? 'UNKNOWN',
    open: d?.OpenShardCount ?? 0,
    mode: d?.StreamModeDetails?.StreamMode === 'ON_DEMAND' ? 'ON_DEMAND' : 'PROVISIONED',
  };
}

export async function describeStreamSummary(clients: AwsClients, stream: string): Promise<StreamSummary> {
  return streamSummaryOf(await withThrottleRetry(() => clients.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: stream }))));
}
