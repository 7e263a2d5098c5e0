/**
 * Benchmarks on the emulated AWS stack (kinesis-mock, dynalite, fauxqs; see docs/performance.md for
 * what they can and cannot tell about AWS):
 *
 * - the emulators' raw rate: PutRecords then GetRecords of the same records, no engine;
 * - the keyed stage alone on the emulators: batch and checkpoint durations against DynamoDB
 *   (dynalite), and recovery (restore + replay) against a raw read of the same range;
 * - the whole job under LocalJobRunner: throughput and producer-to-sink latency.
 */
import { performance } from 'node:perf_hooks';
import { CreateStreamCommand, DescribeStreamSummaryCommand, GetRecordsCommand, GetShardIteratorCommand, ListShardsCommand } from '@aws-sdk/client-kinesis';
import { createAwsClients, sleep, type AwsClients } from '../shared/adapters/aws/clients.js';
import { sdkKinesisApi } from '../shared/adapters/aws/kinesis.js';
import { createAwsPorts } from '../shared/adapters/aws/ports.js';
import { putRecordsUntilAccepted, type PutEntry } from '../shared/adapters/put-records.js';
import { CountingTelemetry } from '../shared/adapters/telemetry.js';
import type { Job } from '../shared/api/job.js';
import { planJob } from '../shared/plan/planner.js';
import { resourceNames } from '../shared/plan/resources.js';
import type { CollectSinkStore, StoredRecord } from '../shared/runtime/ports.js';
import { startEmulators, type LocalEmulators } from '../local/emulators.js';
import { provisionJob } from '../local/provision.js';
import { LocalJobRunner } from '../local/runner.js';
import { e2eJob, type TimedEv } from './jobs.js';
import { Meter, meterPorts } from './metering.js';
import { PortTimer, runScenario, timePorts, type ScenarioOptions, type ScenarioResult } from './stage1-scenario.js';
import type { EncodedRound, LoadedRound } from './stage1-input.js';

export function emulatorClients(e: LocalEmulators): AwsClients {
  return createAwsClients({ region: e.region, credentials: e.credentials, endpoints: e.endpoints, maxAttempts: 3 });
}

// ------------------------------------------------------------------------------------------ raw rate

export interface RawRate {
  readonly records: number;
  readonly recordBytes: number;
  readonly putMs: number;
  readonly getMs: number;
  readonly putPerSec: number;
  readonly getPerSec: number;
  /** records/s when every record is put once and read once: the ceiling of a pipeline on this emulator */
  readonly putGetPerSec: number;
}

async function createStream(clients: AwsClients, name: string, shards: number): Promise<void> {
  await clients.kinesis.send(new CreateStreamCommand({ StreamName: name, ShardCount: shards }));
  for (let i = 0; i < 200; i++) {
    const d = await clients.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: name }));
    if (d.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') return;
    await sleep(50);
  }
  throw new Error(`stream ${name} did not become ACTIVE`);
}

/** PutRecords (500 per call, one call at a time, as the runner's producer does), then GetRecords of every shard. */
export async function rawKinesisRate(clients: AwsClients, records: number, shards = 2): Promise<RawRate> {
  const stream = `bench-raw-${Date.now()}`;
  await createStream(clients, stream, shards);
  const enc = new TextEncoder();
  const sample = enc.encode(JSON.stringify({ id: 123456, k: 'user-1234', v: 3, ts: Date.now() }));
  const t0 = performance.now();
  const entries = Array.from({ length: records }, (_, i): PutEntry => ({ data: sample, partitionKey: `pk-${i % 97}` }));
  await putRecordsUntilAccepted(sdkKinesisApi(clients.kinesis), stream, entries);
  const putMs = performance.now() - t0;
  const t1 = performance.now();
  let got = 0;
  const list = await clients.kinesis.send(new ListShardsCommand({ StreamName: stream }));
  for (const s of list.Shards ?? []) {
    let it = (await clients.kinesis.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: s.ShardId!, ShardIteratorType: 'TRIM_HORIZON' }))).ShardIterator;
    while (it) {
      const r = await clients.kinesis.send(new GetRecordsCommand({ ShardIterator: it, Limit: 10_000 }));
      got += r.Records?.length ?? 0;
      if (!r.Records?.length) break;
      it = r.NextShardIterator;
    }
  }
  const getMs = performance.now() - t1;
  if (got !== records) throw new Error(`raw rate: read ${got} of ${records} records`);
  return {
    records,
    recordBytes: sample.length,
    putMs,
    getMs,
    putPerSec: records / (putMs / 1000),
    getPerSec: records / (getMs / 1000),
    putGetPerSec: records / ((putMs + getMs) / 1000),
  };
}

// ------------------------------------------------------------------------------------------ keyed stage on the emulators

export interface EmulatedStage1 extends ScenarioResult {
  readonly putMs: number;
  /** DynamoDB write units besides the state table: as the bench's model counts them, and as dynalite reports them; the state table's as dynalite reports them */
  readonly writeUnits: { model: number; dynalite: number; state: number };
  readonly requests: Record<string, number>;
}

/** Puts the encoded rounds into the keyed stage's stream on the emulators and runs the scenario there. */
export async function emulatedStage1(emulators: LocalEmulators, job: Job, rounds: readonly EncodedRound[], o: ScenarioOptions): Promise<EmulatedStage1> {
  const clients = emulatorClients(emulators);
  const plan = planJob(job);
  const names = resourceNames(plan, `bench${Date.now().toString(36)}`);
  await provisionJob(plan, names, clients);
  const stage = plan.stages.find((s) => s.input.kind === 'exchange')!;
  const stream = names.streamOf(stage);
  const shard = (await clients.kinesis.send(new ListShardsCommand({ StreamName: stream }))).Shards![0]!;
  const hashKey = shard.HashKeyRange!.StartingHashKey!;
  const t0 = performance.now();
  const flat: Uint8Array[] = [];
  for (const r of rounds) {
    for (const b of r.batches) flat.push(...b);
    flat.push(r.barrier);
  }
  const entries = flat.map((d): PutEntry => ({ data: d, partitionKey: 'p', explicitHashKey: hashKey }));
  await putRecordsUntilAccepted(sdkKinesisApi(clients.kinesis), stream, entries, { maxRecordsPerRequest: 50 });
  const putMs = performance.now() - t0;
  // read them back for their sequence numbers (one shard, put in order)
  const stored: StoredRecord[] = [];
  let it = (await clients.kinesis.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: shard.ShardId!, ShardIteratorType: 'TRIM_HORIZON' }))).ShardIterator;
  while (it && stored.length < flat.length) {
    const r = await clients.kinesis.send(new GetRecordsCommand({ ShardIterator: it, Limit: 10_000 }));
    for (const rec of r.Records ?? []) stored.push({ sequenceNumber: rec.SequenceNumber!, data: rec.Data!, partitionKey: rec.PartitionKey! });
    it = r.NextShardIterator;
  }
  let k = 0;
  const loaded: LoadedRound[] = rounds.map((r) => ({
    batches: r.batches.map((b) => b.map(() => stored[k++]!)),
    barrier: [stored[k++]!],
    events: r.events,
  }));
  const noCollect: CollectSinkStore = { stage: async () => undefined };
  const timer = new PortTimer();
  const meter = new Meter();
  const requests: Record<string, number> = {};
  const wcu = { units: 0, state: 0 };
  instrument(clients, requests, wcu, names.stateTable);
  const ports = timePorts(meterPorts(createAwsPorts(plan, names, clients, new CountingTelemetry(), { collectSink: noCollect }), meter), timer);
  const res = await runScenario({ job, plan, names, stage, stream, shardId: shard.ShardId!, ports, rounds: loaded }, o, timer);
  clients.kinesis.destroy();
  clients.dynamodb.destroy();
  clients.s3.destroy();
  return { ...res, putMs, writeUnits: { model: meter.sum('dynamodb.write').units, dynalite: wcu.units - wcu.state, state: wcu.state }, requests };
}

// ------------------------------------------------------------------------------------------ end to end

export interface EndToEnd {
  readonly throughput: { events: number; ms: number; eventsPerSec: number; committedMs: number };
  readonly latency: { events: number; rate: number; p50: number; p90: number; p99: number; max: number; commitP50: number; commitP99: number };
  readonly cacheHitRate: number;
  readonly checkpoints: number;
  readonly meanCheckpointMs: number;
  readonly invocations: number;
  /** AWS API requests the whole run made, by command (producer, ESM polling, engine, coordinator) */
  readonly requests: Record<string, number>;
  /** DynamoDB write units the emulator itself reported (ReturnConsumedCapacity), for a cross-check */
  readonly dynaliteWriteUnits: number;
}

const pct = (xs: number[], p: number) => {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

const DYNAMO_WRITES = new Set(['PutItemCommand', 'UpdateItemCommand', 'DeleteItemCommand', 'PutCommand', 'UpdateCommand', 'DeleteCommand']);

/** Counts every request per command name; asks DynamoDB writes for their consumed capacity. */
function instrument(clients: AwsClients, requests: Record<string, number>, wcu: { units: number; state?: number }, stateTable?: string): void {
  const add = (service: string, stack: { add: (mw: never, opts: never) => void }) => {
    const mw = (next: (a: { input: Record<string, unknown> }) => Promise<{ output: Record<string, unknown> }>, context: { commandName?: string }) =>
      async (args: { input: Record<string, unknown> }) => {
        const name = context.commandName ?? 'unknown';
        const key = `${service}.${name.replace(/Command$/, '')}`;
        requests[key] = (requests[key] ?? 0) + 1;
        const isWrite = service === 'dynamodb' && DYNAMO_WRITES.has(name);
        if (isWrite) args.input.ReturnConsumedCapacity = 'TOTAL';
        try {
          const r = await next(args);
          const units = isWrite ? ((r.output.ConsumedCapacity as { CapacityUnits?: number } | undefined)?.CapacityUnits ?? 0) : 0;
          wcu.units += units;
          if (isWrite && stateTable !== undefined && args.input.TableName === stateTable) wcu.state = (wcu.state ?? 0) + units;
          return r;
        } catch (err) {
          if (isWrite && (err as { name?: string }).name === 'ConditionalCheckFailedException') {
            wcu.units += 1;
            if (stateTable !== undefined && args.input.TableName === stateTable) wcu.state = (wcu.state ?? 0) + 1;
          }
          throw err;
        }
      };
    stack.add(mw as never, { step: 'initialize', name: `benchMeter-${service}` } as never);
  };
  add('kinesis', clients.kinesis.middlewareStack as never);
  add('dynamodb', clients.dynamodb.middlewareStack as never);
  add('s3', clients.s3.middlewareStack as never);
  add('sfn', clients.sfn.middlewareStack as never);
}

export interface EndToEndOptions {
  readonly throughputEvents: number;
  readonly latencySeconds: number;
  /** events per second in the latency phase; @default 30 % of the measured throughput, at most 300 */
  readonly latencyRate?: number;
  readonly timeoutMs: number;
  /** distinct keys (users) of the events: each is a state row a checkpoint may write; @default 200 */
  readonly keys?: number;
  /** @default 1000 */
  readonly checkpointIntervalMs?: number;
}

export async function endToEnd(emulators: LocalEmulators, o: EndToEndOptions): Promise<EndToEnd> {
  const job = e2eJob();
  // one environment per stage, never recycled: the warm steady state (LocalJobRunner's defaults —
  // three environments picked at random, 5 % recycled — exercise cache loss, which costs restores)
  const runner = await LocalJobRunner.start(job, {
    emulators,
    environments: 1,
    recycleProbability: 0,
    batchSize: 500,
    checkpointIntervalMs: o.checkpointIntervalMs ?? 1000,
    seed: 3,
    prefix: `e2e${Date.now().toString(36)}`,
  });
  const requests: Record<string, number> = {};
  const wcu = { units: 0 };
  instrument(runner.clients, requests, wcu);
  try {
    const seen = new Map<number, number>(); // event id → first time an output for it reached the sink
    const committed = new Map<number, number>();
    const reg = runner.collected;
    const stage = reg.stage.bind(reg);
    reg.stage = async (sink, outputs) => {
      const now = Date.now();
      for (const out of outputs) {
        const v = out.value as { id: number; ts: number };
        if (!seen.has(v.id)) seen.set(v.id, now - v.ts);
      }
      return stage(sink, outputs);
    };
    const publish = reg.publish.bind(reg);
    reg.publish = (n: number) => {
      const before = reg.published('out').length;
      const r = publish(n);
      const list = reg.published<{ id: number; ts: number }>('out');
      const now = Date.now();
      for (let i = before; i < list.length; i++) if (!committed.has(list[i]!.id)) committed.set(list[i]!.id, now - list[i]!.ts);
      return r;
    };
    const waitFor = async (ids: number[], map: Map<number, number>) => {
      const deadline = Date.now() + o.timeoutMs;
      while (!ids.every((id) => map.has(id))) {
        if (Date.now() > deadline) throw new Error(`end to end: ${ids.filter((id) => !map.has(id)).length} of ${ids.length} events never reached the sink`);
        await sleep(20);
      }
    };
    const enc = new TextEncoder();
    const produce = async (from: number, count: number) => {
      const ts = Date.now();
      const evs: TimedEv[] = Array.from({ length: count }, (_, i) => ({ id: from + i, k: `user-${(from + i) % (o.keys ?? 200)}`, v: 1, ts }));
      await runner.produce('events', evs.map((e) => enc.encode(JSON.stringify(e))));
    };
    // warm up: start the pollers' iterators and the environments' caches
    await produce(0, 100);
    await waitFor(Array.from({ length: 100 }, (_, i) => i), seen);
    // throughput: everything at once
    const n = o.throughputEvents;
    const t0 = Date.now();
    await produce(1_000_000, n);
    const ids = Array.from({ length: n }, (_, i) => 1_000_000 + i);
    await waitFor(ids, seen);
    const ms = Date.now() - t0;
    await waitFor(ids, committed);
    const committedMs = Date.now() - t0;
    // latency: a steady rate well below saturation
    const eps = n / (ms / 1000);
    const rate = o.latencyRate ?? Math.max(20, Math.min(300, Math.round(eps * 0.3)));
    const latIds: number[] = [];
    const tick = 100;
    const per = Math.max(1, Math.round((rate * tick) / 1000));
    const l0 = Date.now();
    for (let next = 2_000_000; Date.now() - l0 < o.latencySeconds * 1000; next += per) {
      const s = Date.now();
      await produce(next, per);
      for (let i = 0; i < per; i++) latIds.push(next + i);
      await sleep(Math.max(0, tick - (Date.now() - s)));
    }
    await waitFor(latIds, seen);
    await waitFor(latIds, committed);
    const lat = latIds.map((id) => seen.get(id)!);
    const com = latIds.map((id) => committed.get(id)!);
    const stats = await runner.stats();
    return {
      throughput: { events: n, ms, eventsPerSec: n / (ms / 1000), committedMs },
      latency: { events: latIds.length, rate, p50: pct(lat, 50), p90: pct(lat, 90), p99: pct(lat, 99), max: pct(lat, 100), commitP50: pct(com, 50), commitP99: pct(com, 99) },
      cacheHitRate: stats.cacheHitRate,
      checkpoints: stats.completed,
      meanCheckpointMs: stats.meanCheckpointMs,
      invocations: stats.invocations,
      requests,
      dynaliteWriteUnits: wcu.units,
    };
  } finally {
    await runner.stop();
  }
}

export { startEmulators };
