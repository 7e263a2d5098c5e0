/**
 * The capacity mode read from DescribeStreamSummary (the emulated Kinesis speaks the real wire
 * format), and an in-place rescale refused for an on-demand stream: Kinesis would refuse its
 * UpdateShardCount at the draining phase, and every allocate after that would fail.
 */
import { CreateStreamCommand, waitUntilStreamExists } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../../local/emulators.js';
import { InPlaceRescale } from '../../coordinator/rescale.js';
import { collectSink, job } from '../../api/index.js';
import { planJob } from '../../plan/planner.js';
import { resourceNames } from '../../plan/resources.js';
import { createAwsClients, type AwsClients } from './clients.js';
import { describeStreamSummary, streamSummaryOf } from './stream-mode.js';
import { KinesisStreamScaler } from './coordinator-ports.js';
import { DynamoCheckpointStore } from './dynamo-checkpoint-store.js';

describe('stream capacity mode', () => {
  let emulators: LocalEmulators;
  let clients: AwsClients;
  const plan = (() => {
    const j = job('modes', { maxParallelism: 16 });
    j.source<{ user: string }>({ name: 'events', shards: 2 }).keyBy((e) => e.user, { parallelism: 2 }).process({ processElement: (e, _ctx, out) => out.collect(e) }, { name: 'pass' }).sinkTo(collectSink('out'));
    return planJob(j);
  })();
  const names = resourceNames(plan, 'modes');

  beforeAll(async () => {
    emulators = await startEmulators({ services: ['kinesis'] });
    clients = createAwsClients({ region: emulators.region, credentials: emulators.credentials, endpoints: emulators.endpoints, maxAttempts: 3 });
    await clients.kinesis.send(new CreateStreamCommand({ StreamName: names.streamOf(plan.stages[0]!), StreamModeDetails: { StreamMode: 'ON_DEMAND' } }));
    await clients.kinesis.send(new CreateStreamCommand({ StreamName: names.streamOf(plan.stages[1]!), ShardCount: 2, StreamModeDetails: { StreamMode: 'PROVISIONED' } }));
    for (const s of plan.stages) await waitUntilStreamExists({ client: clients.kinesis, maxWaitTime: 60 }, { StreamName: names.streamOf(s) });
  }, 120_000);

  afterAll(async () => emulators?.stop());

  it('reads ON_DEMAND and PROVISIONED from DescribeStreamSummary', async () => {
    expect((await describeStreamSummary(clients, names.streamOf(plan.stages[0]!))).mode).toBe('ON_DEMAND');
    expect(await describeStreamSummary(clients, names.streamOf(plan.stages[1]!))).toEqual({ status: 'ACTIVE', open: 2, mode: 'PROVISIONED' });
    // an answer without StreamModeDetails comes from a stream created before the modes existed
    expect(streamSummaryOf({ StreamDescriptionSummary: { StreamName: 'x', StreamARN: 'a', StreamStatus: 'ACTIVE', RetentionPeriodHours: 24, StreamCreationTimestamp: new Date(), EnhancedMonitoring: [], OpenShardCount: 3 } }).mode).toBe('PROVISIONED');
  });

  it('refuses to rescale an on-demand stream in place, naming the stream and the reason', async () => {
    const rescale = new InPlaceRescale(plan, names, new DynamoCheckpointStore(clients, names.controlTable), new KinesisStreamScaler(clients), () => new Date());
    await expect(rescale.request('s0', 3)).rejects.toThrow(/stream modes-src-events of stage s0 is in on-demand mode.*cannot be rescaled in place/);
  });
});
