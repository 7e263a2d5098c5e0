/**
 * The local ESM against kinesis-local over the wire: delivery order, one batch in flight per shard,
 * retries, partial batch responses, bisect, routing, zombies, resharding lineage and throttling.
 */
import {
  CreateStreamCommand,
  DescribeStreamSummaryCommand,
  ListShardsCommand,
  PutRecordsCommand,
  UpdateShardCountCommand,
  type KinesisClient,
  type Shard,
} from '@aws-sdk/client-kinesis';
import type { KinesisStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localKinesisClient } from './aws-env.js';
import { startEmulators, type LocalEmulators } from './emulators.js';
import {
  EventSourcePoller,
  type EventSourcePollerOptions,
  type ExecutionEnvironment,
  type InvocationInfo,
  type KinesisHandler,
} from './event-source-poller.js';

let emu: LocalEmulators;
let kinesis: KinesisClient;
let streamCounter = 0;
const pollers: EventSourcePoller[] = [];

beforeAll(async () => {
  emu = await startEmulators({ services: ['kinesis'] });
  kinesis = localKinesisClient(emu.endpoints.kinesis);
});

afterAll(async () => {
  await Promise.all(pollers.map((p) => p.stop()));
  kinesis?.destroy();
  await emu?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seqLess = (a: string, b: string) => BigInt(a) < BigInt(b);

async function createStream(shards: number): Promise<{ name: string; shards: Shard[] }> {
  const name = `esm-test-${process.pid}-${++streamCounter}`;
  await kinesis.send(new CreateStreamCommand({ StreamName: name, ShardCount: shards }));
  for (let i = 0; ; i++) {
    const d = await kinesis.send(new DescribeStreamSummaryCommand({ StreamName: name }));
    if (d.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') break;
    if (i > 100) throw new Error(`stream ${name} not ACTIVE`);
    await sleep(20);
  }
  return { name, shards: await listShards(name) };
}

async function listShards(name: string): Promise<Shard[]> {
  return (await kinesis.send(new ListShardsCommand({ StreamName: name }))).Shards ?? [];
}

/** Puts `items` in order into the shard owning `hashKey`. */
async function put(stream: string, hashKey: string, items: string[]): Promise<void> {
  for (let i = 0; i < items.length; i += 100) {
    const res = await kinesis.send(
      new PutRecordsCommand({
        StreamName: stream,
        Records: items.slice(i, i + 100).map((d) => ({ Data: Buffer.from(d), PartitionKey: d.slice(0, 64), ExplicitHashKey: hashKey })),
      }),
    );
    expect(res.FailedRecordCount ?? 0).toBe(0);
  }
}

const dataOf = (e: KinesisStreamEvent) => e.Records.map((r) => Buffer.from(r.kinesis.data, 'base64').toString());
const shardOf = (e: KinesisStreamEvent) => e.Records[0].eventID.split(':')[0];

function envs(n: number, handler: KinesisHandler): ExecutionEnvironment[] {
  return Array.from({ length: n }, (_, i) => ({ id: `env-${i}`, handler }));
}

function startPoller(opts: Omit<EventSourcePollerOptions, 'kinesis'> & { kinesis?: KinesisClient }) {
  const invocations: InvocationInfo[] = [];
  const errors: unknown[] = [];
  const poller = new EventSourcePoller({
    kinesis,
    pollIntervalMs: 20,
    shardDiscoveryIntervalMs: 200,
    retryBackoffMs: () => 0,
    seed: 42,
    onError: (e) => errors.push(e),
    ...opts,
    onInvocation: (i) => {
      invocations.push(i);
      opts.onInvocation?.(i);
    },
  });
  pollers.push(poller);
  poller.start();
  return { poller, invocations, errors };
}

describe('EventSourcePoller against kinesis-local', () => {
  it('delivers each shard in order, one batch in flight per shard, across environments', async () => {
    const { name, shards } = await createStream(2);
    const sent = new Map<string, string[]>();
    for (const [i, sh] of shards.entries()) {
      const items = Array.from({ length: 45 }, (_, j) => `s${i}-r${j}`);
      sent.set(sh.ShardId!, items);
      await put(name, sh.HashKeyRange!.StartingHashKey!, items);
    }
    const delivered = new Map<string, string[]>();
    const lastSeq = new Map<string, string>();
    const inFlightPerShard = new Map<string, number>();
    const busyEnv = new Set<string>();
    let maxPerShard = 0;
    let envOverlap = false;
    const shardEnvs = new Map<string, Set<string>>();
    const make = (id: string): ExecutionEnvironment => ({
      id,
      handler: async (event) => {
        if (busyEnv.has(id)) envOverlap = true;
        busyEnv.add(id);
        const shard = shardOf(event);
        inFlightPerShard.set(shard, (inFlightPerShard.get(shard) ?? 0) + 1);
        maxPerShard = Math.max(maxPerShard, inFlightPerShard.get(shard)!);
        (shardEnvs.get(shard) ?? shardEnvs.set(shard, new Set()).get(shard)!).add(id);
        await sleep(5);
        for (const r of event.Records) {
          const prev = lastSeq.get(shard);
          expect(prev === undefined || seqLess(prev, r.kinesis.sequenceNumber)).toBe(true);
          lastSeq.set(shard, r.kinesis.sequenceNumber);
          expect(r.eventSource).toBe('aws:kinesis');
          expect(r.eventName).toBe('aws:kinesis:record');
          expect(r.eventVersion).toBe('1.0');
          expect(r.kinesis.kinesisSchemaVersion).toBe('1.0');
          expect(r.eventID).toBe(`${shard}:${r.kinesis.sequenceNumber}`);
          expect(r.eventSourceARN).toBe(`arn:aws:kinesis:us-east-1:000000000000:stream/${name}`);
          expect(r.awsRegion).toBe('us-east-1');
          expect(typeof r.kinesis.approximateArrivalTimestamp).toBe('number');
          expect(r.kinesis.approximateArrivalTimestamp).toBeLessThan(Date.now() / 1000 + 1);
        }
        delivered.set(shard, [...(delivered.get(shard) ?? []), ...dataOf(event)]);
        inFlightPerShard.set(shard, inFlightPerShard.get(shard)! - 1);
        busyEnv.delete(id);
      },
    });
    const { poller, invocations } = startPoller({
      streamName: name,
      batchSize: 3, // 15 batches per shard: each shard meets several environments
      environments: ['a', 'b', 'c'].map(make),
    });
    await poller.whenIdle({ timeoutMs: 15_000 });
    await poller.stop();
    for (const [shard, items] of sent) expect(delivered.get(shard)).toEqual(items);
    expect(maxPerShard).toBe(1);
    expect(envOverlap).toBe(false);
    for (const set of shardEnvs.values()) expect(set.size).toBeGreaterThan(1);
    expect(invocations.every((i) => i.count <= 3 && i.outcome === 'success')).toBe(true);
    const st = poller.stats();
    expect(st.recordsCheckpointed).toBe(90);
    expect(Object.keys(st.perEnvironment).sort()).toEqual(['a', 'b', 'c']);
    for (const sh of shards) expect(st.shards[sh.ShardId!].checkpoint).toBe(lastSeq.get(sh.ShardId!));
  });

  it('retries a failing batch from the same first record (bisect off)', async () => {
    const { name, shards } = await createStream(1);
    await put(name, shards[0].HashKeyRange!.StartingHashKey!, Array.from({ length: 12 }, (_, i) => `r${i}`));
    let calls = 0;
    const seen: string[] = [];
    const { poller, invocations } = startPoller({
      streamName: name,
      batchSize: 5,
      bisectBatchOnFunctionError: false,
      environments: envs(2, async (e) => {
        if (++calls <= 2) throw new Error('boom');
        seen.push(...dataOf(e));
      }),
    });
    await poller.whenIdle();
    await poller.stop();
    expect(invocations.slice(0, 3).map((i) => [i.outcome, i.count, i.attempt])).toEqual([
      ['error', 5, 0],
      ['error', 5, 1],
      ['success', 5, 2],
    ]);
    expect(new Set(invocations.slice(0, 3).map((i) => i.firstSequenceNumber)).size).toBe(1);
    expect((invocations[0].error as Error).message).toBe('boom');
    expect(seen).toEqual(Array.from({ length: 12 }, (_, i) => `r${i}`));
  });

  it('resumes from the lowest failed item of a partial batch response', async () => {
    const { name, shards } = await createStream(1);
    await put(name, shards[0].HashKeyRange!.StartingHashKey!, Array.from({ length: 10 }, (_, i) => `r${i}`));
    let first = true;
    const batches: string[][] = [];
    const { poller, invocations } = startPoller({
      streamName: name,
      batchSize: 10,
      environments: envs(1, async (e) => {
        batches.push(dataOf(e));
        if (first) {
          first = false;
          // two failures: the lower one (r4) wins
          return {
            batchItemFailures: [{ itemIdentifier: e.Records[7].kinesis.sequenceNumber }, { itemIdentifier: e.Records[4].kinesis.sequenceNumber }],
          };
        }
      }),
    });
    await poller.whenIdle();
    await poller.stop();
    expect(invocations[0].outcome).toBe('partial');
    expect(invocations[0].failedSequenceNumber).toBe(invocations[1].firstSequenceNumber);
    expect(batches).toEqual([
      ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9'],
      ['r4', 'r5', 'r6', 'r7', 'r8', 'r9'],
    ]);
  });

  it('retries the whole batch on an invalid partial response, without bisecting', async () => {
    const { name, shards } = await createStream(1);
    await put(name, shards[0].HashKeyRange!.StartingHashKey!, ['a', 'b', 'c', 'd']);
    let n = 0;
    const { poller, invocations } = startPoller({
      streamName: name,
      environments: envs(1, async () => {
        n++;
        if (n === 1) return { batchItemFailures: [{ itemIdentifier: '' }] };
        if (n === 2) return { batchItemFailures: [{ itemIdentifier: '999' }] }; // not in the batch
      }),
    });
    await poller.whenIdle();
    await poller.stop();
    expect(invocations.map((i) => [i.outcome, i.count])).toEqual([
      ['invalid-response', 4],
      ['invalid-response', 4],
      ['success', 4],
    ]);
  });

  it('bisects a failing batch and isolates the poison record', async () => {
    const { name, shards } = await createStream(1);
    const items = Array.from({ length: 20 }, (_, i) => (i === 7 ? 'poison' : `r${i}`));
    await put(name, shards[0].HashKeyRange!.StartingHashKey!, items);
    const ok: string[] = [];
    const { poller, invocations } = startPoller({
      streamName: name,
      batchSize: 20,
      environments: envs(3, async (e) => {
        const d = dataOf(e);
        // fails while the poison record shares a batch; alone it passes (as a dead-letter path would)
        if (d.includes('poison') && d.length > 1) throw new Error('poison');
        ok.push(...d);
      }),
    });
    await poller.whenIdle();
    await poller.stop();
    expect(invocations.map((i) => `${i.count}:${i.outcome}`)).toEqual([
      '20:error',
      '10:error',
      '5:success',
      '5:error',
      '3:error',
      '2:success',
      '1:success',
      '2:success',
      '10:success',
    ]);
    expect(ok).toEqual(items);
  });

  it('retries a timed-out invocation elsewhere while the zombie keeps its environment busy', async () => {
    const { name, shards } = await createStream(1);
    await put(name, shards[0].HashKeyRange!.StartingHashKey!, ['x', 'y']);
    let calls = 0;
    let zombieFinished = false;
    const running = new Set<string>();
    const make = (id: string): ExecutionEnvironment => ({
      id,
      handler: async () => {
        expect(running.has(id)).toBe(false);
        running.add(id);
        try {
          if (++calls === 1) {
            // long enough that the retries finish first even on a loaded machine
            await sleep(5_000);
            zombieFinished = true;
            return { batchItemFailures: [] };
          }
        } finally {
          running.delete(id);
        }
      },
    });
    const { poller, invocations } = startPoller({
      streamName: name,
      invocationTimeoutMs: 150,
      environments: [make('e1'), make('e2')],
    });
    await poller.whenIdle();
    // A timeout is a function error: with bisect on (the default) the batch of two is split.
    expect(invocations.map((i) => `${i.count}:${i.outcome}`)).toEqual(['2:timeout', '1:success', '1:success']);
    // the zombie still holds its environment, so both retries ran on the other one
    const [zombieEnv, ...retryEnvs] = invocations.map((i) => i.environmentId);
    expect(retryEnvs).toEqual(zombieEnv === 'e1' ? ['e2', 'e2'] : ['e1', 'e1']);
    expect(invocations[0].firstSequenceNumber).toBe(invocations[1].firstSequenceNumber);
    expect(poller.stats().zombies).toBe(1);
    expect(zombieFinished).toBe(false);
    for (let i = 0; i < 200 && !zombieFinished; i++) await sleep(50);
    expect(zombieFinished).toBe(true);
    expect(poller.stats().zombies).toBe(0);
    await poller.stop();
  });

  it('reads a parent shard to its end before its children after UpdateShardCount', async () => {
    const { name, shards } = await createStream(1);
    const parentId = shards[0].ShardId!;
    await put(name, shards[0].HashKeyRange!.StartingHashKey!, Array.from({ length: 30 }, (_, i) => `p${i}`));
    await kinesis.send(new UpdateShardCountCommand({ StreamName: name, TargetShardCount: 2, ScalingType: 'UNIFORM_SCALING' }));
    let all: Shard[] = [];
    for (let i = 0; i < 100; i++) {
      all = await listShards(name);
      if (all.length === 3) break;
      await sleep(20);
    }
    const children = all.filter((s) => s.ParentShardId === parentId);
    expect(children).toHaveLength(2);
    for (const [i, c] of children.entries()) {
      await put(name, c.HashKeyRange!.StartingHashKey!, Array.from({ length: 10 }, (_, j) => `c${i}-${j}`));
    }
    const log: Array<{ shard: string; start: number; end: number; data: string[] }> = [];
    const { poller } = startPoller({
      streamName: name,
      batchSize: 5,
      environments: envs(4, async (e) => {
        const start = performance.now();
        await sleep(10);
        log.push({ shard: shardOf(e), start, end: performance.now(), data: dataOf(e) });
      }),
    });
    await poller.whenIdle({ timeoutMs: 15_000 });
    await poller.stop();
    const parentLog = log.filter((l) => l.shard === parentId);
    const childLog = log.filter((l) => l.shard !== parentId);
    expect(parentLog.flatMap((l) => l.data)).toEqual(Array.from({ length: 30 }, (_, i) => `p${i}`));
    expect(childLog.flatMap((l) => l.data).sort()).toEqual(
      [...Array.from({ length: 10 }, (_, j) => `c0-${j}`), ...Array.from({ length: 10 }, (_, j) => `c1-${j}`)].sort(),
    );
    const parentDone = Math.max(...parentLog.map((l) => l.end));
    expect(Math.min(...childLog.map((l) => l.start))).toBeGreaterThanOrEqual(parentDone);
    const st = poller.stats();
    expect(st.shards[parentId].status).toBe('finished');
    for (const c of children) expect(st.shards[c.ShardId!].parents).toEqual([parentId]);
  });

  it('backs off and retries on Kinesis throttling, losing nothing', async () => {
    const { name, shards } = await createStream(1);
    await put(name, shards[0].HashKeyRange!.StartingHashKey!, ['a', 'b', 'c']);
    // A client whose send throws ProvisionedThroughputExceededException on the first two GetRecords.
    const throttled = localKinesisClient(emu.endpoints.kinesis);
    const realSend = throttled.send.bind(throttled) as (...a: unknown[]) => Promise<unknown>;
    let getRecords = 0;
    (throttled as unknown as { send: (...a: unknown[]) => Promise<unknown> }).send = (cmd: unknown, ...rest: unknown[]) => {
      if ((cmd as object).constructor.name === 'GetRecordsCommand' && ++getRecords <= 2) {
        return Promise.reject(Object.assign(new Error('Rate exceeded for shard'), { name: 'ProvisionedThroughputExceededException' }));
      }
      return realSend(cmd, ...rest);
    };
    const got: string[] = [];
    const { poller, errors } = startPoller({
      kinesis: throttled,
      streamName: name,
      environments: envs(1, async (e) => {
        got.push(...dataOf(e));
      }),
    });
    await poller.whenIdle();
    await poller.stop();
    throttled.destroy();
    expect(got).toEqual(['a', 'b', 'c']);
    expect(poller.stats().throttles).toBe(2);
    expect(errors).toEqual([]);
  });

  it('starts at LATEST, honours the batching window and the payload limit, and follows recycled environments', async () => {
    const { name, shards } = await createStream(1);
    const hash = shards[0].HashKeyRange!.StartingHashKey!;
    await put(name, hash, ['old1', 'old2']);
    const batches: string[][] = [];
    let generation = 0;
    const handler: KinesisHandler = async (e) => {
      batches.push(dataOf(e));
    };
    let pool = envs(2, handler);
    const used = new Set<string>();
    const { poller, invocations } = startPoller({
      streamName: name,
      startingPosition: 'LATEST',
      // A window far longer than the test: a batch goes out only when it is full, so records put at any
      // pace gather into one invocation (with no window, n1 would be delivered on its own).
      maximumBatchingWindowMs: 120_000,
      batchSize: 3,
      environments: () => pool,
      onInvocation: (i) => used.add(i.environmentId),
    });
    await poller.whenIdle(); // caught up: its LATEST position is taken, so old1/old2 stay behind it
    for (const d of ['n1', 'n2', 'n3']) {
      await put(name, hash, [d]);
      await sleep(50);
    }
    await poller.whenIdle();
    expect(batches).toEqual([['n1', 'n2', 'n3']]);
    // Recycle: replace the environments; later invocations go to the new ones.
    pool = Array.from({ length: 2 }, (_, i) => ({ id: `gen${++generation}-${i}`, handler }));
    await put(name, hash, ['m1', 'm2', 'm3']);
    await poller.whenIdle();
    expect(invocations.at(-1)!.environmentId.startsWith('gen1-')).toBe(true);
    await poller.stop();
    expect(used.size).toBeGreaterThanOrEqual(2);

    // Payload limit: ~133 KB per record once base64-encoded, a 300 KB cap => at most 2 per batch.
    const { name: big, shards: bigShards } = await createStream(1);
    await put(big, bigShards[0].HashKeyRange!.StartingHashKey!, Array.from({ length: 5 }, (_, i) => `${i}`.padEnd(100_000, 'x')));
    const sizes: number[] = [];
    const p2 = startPoller({
      streamName: big,
      maxPayloadBytes: 300_000,
      environments: envs(1, async (e) => {
        sizes.push(e.Records.length);
      }),
    });
    await p2.poller.whenIdle();
    await p2.poller.stop();
    expect(sizes).toEqual([2, 2, 1]);
  });

  it('stop() ends its loops: no Kinesis calls afterwards', async () => {
    const { name } = await createStream(2);
    const counting = localKinesisClient(emu.endpoints.kinesis);
    const realSend = counting.send.bind(counting) as (...a: unknown[]) => Promise<unknown>;
    let calls = 0;
    (counting as unknown as { send: (...a: unknown[]) => Promise<unknown> }).send = (...a: unknown[]) => {
      calls++;
      return realSend(...a);
    };
    const { poller } = startPoller({ kinesis: counting, streamName: name, environments: envs(1, async () => undefined) });
    await poller.whenIdle();
    await poller.stop();
    const after = calls;
    await sleep(300);
    expect(calls).toBe(after);
    counting.destroy();
  });
});
