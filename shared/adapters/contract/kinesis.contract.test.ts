/**
 * Contract of the Kinesis service as the engine's writer and replay reader use it: one set of tests
 * run against the in-memory twin and against the Kinesis emulator (started here, on a free port,
 * stopped by PID). What passes here against both is what the twin may be trusted for.
 */
import { describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../../local/emulators.js';
import { localKinesisClient } from '../../../local/aws-env.js';
import { createStream } from '../../../local/provision.js';
import type { ReplayPoint, StoredRecord } from '../../runtime/ports.js';
import { sdkKinesisApi } from '../aws/kinesis.js';
import { MemoryKinesis, memoryKinesisApi, yieldTurn } from '../memory/memory-ports.js';
import { PutRecordsStreamWriter, type KinesisApi, type PutResult } from '../put-records.js';
import { KinesisApiShardReader, type ShardReaderOptions } from '../shard-reader.js';
import { CountingTelemetry } from '../telemetry.js';
import { contractTarget } from './target.js';

interface KinesisTarget {
  readonly api: KinesisApi;
  createStream(name: string, shards: number): Promise<void>;
  /** the reader's pauses on this target */
  readonly readerOptions: ShardReaderOptions;
  stop(): Promise<void>;
}

const targets: Array<{ name: string; start(): Promise<KinesisTarget> }> = [
  {
    name: 'in-memory twin',
    async start() {
      const k = new MemoryKinesis();
      return {
        api: memoryKinesisApi(k),
        createStream: async (name, shards) => k.createStream(name, shards),
        readerOptions: { throttlePause: yieldTurn, idlePause: yieldTurn },
        stop: async () => {},
      };
    },
  },
  {
    name: 'Kinesis emulator',
    async start() {
      const emulators: LocalEmulators = await startEmulators({ services: ['kinesis'] });
      const kinesis = localKinesisClient(emulators.endpoints.kinesis);
      return {
        api: sdkKinesisApi(kinesis),
        createStream: (name, shards) => createStream({ kinesis }, name, shards),
        readerOptions: {},
        stop: async () => {
          kinesis.destroy();
          await emulators.stop();
        },
      };
    },
  },
];

const enc = new TextEncoder();
const dec = new TextDecoder();
const texts = (pages: StoredRecord[][]) => pages.flat().map((r) => dec.decode(r.data));

/** Rejects the entries `reject` picks (as Kinesis does under load) and sends the others through. */
function rejecting(api: KinesisApi, reject: (data: string, attempt: number) => boolean): KinesisApi & { rejected: number } {
  const out = {
    ...api,
    rejected: 0,
    async putRecords(stream: string, entries: Parameters<KinesisApi['putRecords']>[1], attempt = 0): Promise<PutResult[]> {
      const take = entries.map((e) => !reject(dec.decode(e.data), attempt));
      const sent = entries.filter((_, i) => take[i]);
      const results = sent.length ? await api.putRecords(stream, sent, attempt) : [];
      let j = 0;
      return entries.map((_, i): PutResult => {
        if (take[i]) return results[j++]!;
        out.rejected++;
        return { errorCode: 'ProvisionedThroughputExceededException', errorMessage: 'Rate exceeded for shard' };
      });
    },
  };
  return out;
}

describe.each(targets)('Kinesis contract: $name', (target) => {
  const side = contractTarget(target.start);
  let n = 0;
  const stream = async (shards = 1) => {
    const name = `contract-${++n}`;
    await side().createStream(name, shards);
    return name;
  };
  const readAll = async (reader: KinesisApiShardReader, s: string, shardId: string, from: ReplayPoint, until?: string) => {
    const pages: StoredRecord[][] = [];
    for await (const p of reader.read(s, shardId, from, until)) pages.push(p);
    return pages;
  };


  it('creates N shards splitting the hash space evenly and contiguously, all open', async () => {
    const s = await stream(3);
    const shards = await side().api.listShards(s);
    expect(shards).toHaveLength(3);
    expect(shards[0]!.startingHashKey).toBe('0');
    expect(shards[2]!.endingHashKey).toBe(((1n << 128n) - 1n).toString());
    for (let i = 1; i < 3; i++) expect(BigInt(shards[i]!.startingHashKey)).toBe(BigInt(shards[i - 1]!.endingHashKey) + 1n);
    expect(shards.every((x) => x.endingSequenceNumber === undefined)).toBe(true);
  });

  it('the writer puts records into the shard their hash key names, and the reader reads them back in order', async () => {
    const s = await stream(2);
    const [a, b] = await side().api.listShards(s);
    const records = Array.from({ length: 1_100 }, (_, i) => ({ hashKey: (i % 2 ? b! : a!).startingHashKey, data: enc.encode(`r${i}`) }));
    await new PutRecordsStreamWriter(side().api, undefined, { pause: side().readerOptions.throttlePause ?? (async () => {}) }).putAll(s, records);
    const reader = new KinesisApiShardReader(side().api, { ...side().readerOptions, pageSize: 200 });
    const onA = texts(await readAll(reader, s, a!.shardId, { from: 'start' }));
    const onB = texts(await readAll(reader, s, b!.shardId, { from: 'start' }));
    expect(onA).toEqual(records.filter((_, i) => i % 2 === 0).map((r) => dec.decode(r.data)));
    expect(onB).toEqual(records.filter((_, i) => i % 2 === 1).map((r) => dec.decode(r.data)));
  });

  it('retries only rejected entries: every record lands exactly once, the retries counted', async () => {
    const s = await stream(1);
    const seen = new Set<string>();
    // each record is rejected the first time it is offered, every third one twice
    const api = rejecting(side().api, (d, attempt) => (attempt === 0 && !seen.has(d) ? (seen.add(d), true) : attempt === 1 && Number(d.slice(1)) % 3 === 0));
    const telemetry = new CountingTelemetry();
    const [shard] = await side().api.listShards(s);
    const records = Array.from({ length: 30 }, (_, i) => ({ hashKey: shard!.startingHashKey, data: enc.encode(`r${i}`) }));
    await new PutRecordsStreamWriter(api, telemetry, { pause: async () => {} }).putAll(s, records);
    const got = texts(await readAll(new KinesisApiShardReader(side().api, side().readerOptions), s, shard!.shardId, { from: 'start' }));
    expect([...got].sort()).toEqual(records.map((r) => dec.decode(r.data)).sort());
    expect(api.rejected).toBe(30 + 10);
    expect(telemetry.counters.get('PutRecordsRetried')).toBe(40);
  });

  it('replays at a record, just after it, and up to (not including) a bound', async () => {
    const s = await stream(1);
    const [shard] = await side().api.listShards(s);
    const results = await side().api.putRecords(
      s,
      Array.from({ length: 6 }, (_, i) => ({ data: enc.encode(`r${i}`), partitionKey: 'p' })),
    );
    const seq = results.map((r) => r.sequenceNumber!);
    const reader = new KinesisApiShardReader(side().api, { ...side().readerOptions, pageSize: 2 });
    const read = async (from: ReplayPoint, until?: number) => texts(await readAll(reader, s, shard!.shardId, from, until === undefined ? undefined : seq[until]));
    expect(await read({ from: 'at', sequenceNumber: seq[1]! })).toEqual(['r1', 'r2', 'r3', 'r4', 'r5']);
    expect(await read({ from: 'after', sequenceNumber: seq[1]! })).toEqual(['r2', 'r3', 'r4', 'r5']);
    expect(await read({ from: 'at', sequenceNumber: seq[2]! }, 4)).toEqual(['r2', 'r3']);
    expect(await read({ from: 'after', sequenceNumber: seq[2]! }, 3)).toEqual([]);
    expect(await read({ from: 'after', sequenceNumber: seq[5]! })).toEqual([]);
  });

  it('reports a replay that can never reach its bound (REPLAY_STALLED, retryable)', async () => {
    const s = await stream(1);
    const [shard] = await side().api.listShards(s);
    const [r] = await side().api.putRecords(s, [{ data: enc.encode('a'), partitionKey: 'p' }]);
    const beyond = (BigInt(r!.sequenceNumber!) + 10n ** 20n).toString();
    const reader = new KinesisApiShardReader(side().api, { ...side().readerOptions, stallPolls: 3 });
    await expect(readAll(reader, s, shard!.shardId, { from: 'start' }, beyond)).rejects.toMatchObject({ code: 'REPLAY_STALLED', retryable: true });
  });

  // Not here, because the emulator differs from Kinesis: it takes more than 500 entries per request,
  // and it cannot trim a shard (a made-up sequence number fails with ResourceNotFoundException).
  // The twin's tests cover both as Kinesis behaves (memory-ports.test.ts).
  it('refuses a write to an unknown stream', async () => {
    await expect(side().api.putRecords('no-such-stream', [{ data: enc.encode('x'), partitionKey: 'p' }])).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
  });
});
