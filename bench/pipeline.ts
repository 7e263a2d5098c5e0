/**
 * A whole job in this process on the in-memory twins, driven like production: each simulated
 * second producers put that second's events on the source stream; every `pollEverySeconds` (the
 * event source mapping's poll, or its batching window) every shard of every stage gets one batch
 * (more when it holds more than the batch size); every `checkpointEverySeconds` the coordinator
 * injects a checkpoint's barriers, which those polls carry through the stages like any record, and
 * commits it once every instance acknowledged it. Every port call is metered as the AWS adapters
 * would issue it (see metering.ts); invocations and their durations are counted per stage.
 */
import { createMemoryPorts } from '../shared/adapters/memory/memory-ports.js';
import type { Job } from '../shared/api/job.js';
import { encodePayload } from '../shared/codec/payload.js';
import { hashKeyOfEvenShard } from '../shared/plan/key-groups.js';
import { planJob } from '../shared/plan/planner.js';
import type { CollectSinkStore } from '../shared/runtime/ports.js';
import { InProcessJob } from './in-process-job.js';
import { makeEvents } from './jobs.js';
import { Meter, meterPorts, putPayloadUnits } from './metering.js';

export interface PipelineOptions {
  readonly job: Job;
  readonly eventsPerSecond: number;
  readonly seconds: number;
  readonly checkpointEverySeconds: number;
  /** ESM batch size (the CDK construct's default: cdk/stage-batching.ts) */
  readonly maxBatch: number;
  /** seconds between two batches of a shard: Lambda's poll (1) or the batching window in whole seconds; @default 1 */
  readonly pollEverySeconds?: number;
  readonly keys: number;
  readonly seed?: number;
  /** seconds run first and not counted (caches fill, keys get their first rows); a multiple of the checkpoint interval */
  readonly warmupSeconds?: number;
}

export interface StageStats {
  readonly stage: string;
  readonly shards: number;
  invocations: number;
  ms: number;
  cpuMs: number;
  records: number;
}

export interface PipelineResult {
  readonly events: number;
  readonly checkpoints: number;
  readonly seconds: number;
  readonly stages: StageStats[];
  readonly meter: Meter;
  /** bytes of the user's payloads as the exchange encodes them (MessagePack) */
  readonly payloadBytes: number;
  /** what the keyed stage's stream received: records and bytes (data + partition key) */
  readonly exchange: { records: number; bytes: number };
  readonly sourceBytes: number;
  readonly outputs: number;
  readonly topology: number[];
}

export async function runPipeline(o: PipelineOptions): Promise<PipelineResult> {
  const plan = planJob(o.job);
  let clock = 0;
  const mem = createMemoryPorts({ seed: o.seed ?? 1, now: () => clock });
  const meter = new Meter();
  let outputs = 0;
  const collectSink: CollectSinkStore = {
    async stage(_s, out) {
      outputs += out.length;
    },
  };
  const stats: StageStats[] = plan.stages.map((s) => ({ stage: s.id, shards: s.parallelism, invocations: 0, ms: 0, cpuMs: 0, records: 0 }));
  const run = new InProcessJob({
    job: o.job,
    plan,
    mem,
    ports: meterPorts({ ...mem.ports, collectSink }, meter, mem.state.table),
    batch: o.maxBatch,
    now: () => new Date(clock),
    onBatch: (i, records, wallMs, cpuMs) => {
      const st = stats[i]!;
      st.ms += wallMs;
      st.cpuMs += cpuMs;
      st.invocations++;
      st.records += records;
    },
  });
  const names = run.names;
  const sourceStage = plan.stages.find((s) => s.input.kind === 'source')!;
  const sourceStream = names.streamOf(sourceStage);
  const sourceShards = sourceStage.parallelism;
  const start = Date.UTC(2026, 0, 1);
  const warm = o.warmupSeconds ?? 0;
  const total = o.eventsPerSecond * (o.seconds + warm);
  const events = makeEvents(total, o.keys, o.seed ?? 7, start).map((e, i) => ({ ...e, ts: start + Math.floor((i * 1000) / o.eventsPerSecond) }));
  let payloadBytes = 0;
  let sourceBytes = 0;
  const enc = new TextEncoder();

  let checkpoints = 0;
  const poll = o.pollEverySeconds ?? 1;
  const c = run.coordinator;
  let inFlight: number | undefined;
  // the barriers go out with the next polls, as on AWS: a checkpoint adds no batch of its own
  const inject = async () => {
    const { checkpointId: n } = await c.allocate();
    meter.coordinatorCheckpoint(n, (await c.get(n))!.topology, sourceShards, plan.sources.length);
    await c.inject(n);
    await c.await(n, `token-${n}`);
    return n;
  };
  const commitIfAcked = async (n: number) => {
    if (!(await c.get(n))!.complete) return false;
    await c.commit(n);
    checkpoints++;
    return true;
  };
  const s1 = plan.stages.find((x) => x.input.kind === 'exchange')!;
  const s1Stream = names.streamOf(s1);
  const s1Counts = () => mem.kinesis.listShards(s1Stream).map((sh) => mem.kinesis.records(s1Stream, sh.shardId).length);
  let s1Before = s1Counts();
  for (let s = 0; s < o.seconds + warm; s++) {
    if (s === warm && warm > 0) {
      // the measured part starts here
      meter.reset();
      for (const st of stats) Object.assign(st, { invocations: 0, ms: 0, cpuMs: 0, records: 0 });
      payloadBytes = 0;
      sourceBytes = 0;
      checkpoints = 0;
      outputs = 0;
      s1Before = s1Counts();
    }
    clock = start + s * 1000;
    const slice = events.slice(s * o.eventsPerSecond, (s + 1) * o.eventsPerSecond);
    for (let b = 0; b < slice.length; b += 500) {
      const entries = slice.slice(b, b + 500).map((e, j) => {
        const data = enc.encode(JSON.stringify(e));
        sourceBytes += data.length + e.k.length;
        payloadBytes += encodePayload(e).length;
        meter.add('kinesis.put.source', j === 0 ? 1 : 0, 1, putPayloadUnits(data.length + e.k.length), data.length + e.k.length);
        return { data, partitionKey: e.k, explicitHashKey: hashKeyOfEvenShard((b + j) % sourceShards, sourceShards) };
      });
      mem.kinesis.putRecords(sourceStream, entries);
    }
    // one ESM batch per shard per poll (or window): each stage in turn sees what arrived
    if ((s + 1) % poll === 0) for (let i = 0; i < plan.stages.length; i++) await run.runStage(i);
    if (inFlight !== undefined && (await commitIfAcked(inFlight))) inFlight = undefined;
    // none in the last second: its barriers would cross only in the final drain, one checkpoint more than the metered seconds hold
    if ((s + 1) % o.checkpointEverySeconds === 0 && s + 1 < o.seconds + warm && inFlight === undefined) inFlight = await inject();
  }
  await run.runAll();
  if (inFlight !== undefined && !(await commitIfAcked(inFlight))) throw new Error(`pipeline: checkpoint ${inFlight} did not complete`);
  let exRecords = 0;
  let exBytes = 0;
  mem.kinesis.listShards(s1Stream).forEach((sh, i) => {
    for (const r of mem.kinesis.records(s1Stream, sh.shardId).slice(s1Before[i] ?? 0)) {
      exRecords++;
      exBytes += r.data.length + r.partitionKey.length;
    }
  });
  return {
    events: o.eventsPerSecond * o.seconds,
    checkpoints,
    seconds: o.seconds,
    stages: stats,
    meter,
    payloadBytes,
    exchange: { records: exRecords, bytes: exBytes },
    sourceBytes,
    outputs,
    topology: plan.stages.map((s) => s.parallelism),
  };
}
