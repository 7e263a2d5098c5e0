/**
 * A stage as Lambda runs it: the engine behind functions/operator.ts (`handleKinesisBatch`, the
 * handler's whole body besides telemetry flushing) invoked with AWS's KinesisStreamEvent (base64
 * records), reading its lease, committing its position, emitting to the next stage's stream, and
 * taking the checkpoints that the input's barriers ask for. Against it, in the same run, a fair
 * hand-written loop (fair-loops.ts) over the very same event objects; the two alternate round by
 * round (a round = the events of one checkpoint interval + its barrier), so both see the same
 * machine. Every rate is events over the total time of the timed rounds, barriers included.
 *
 * The ports are the in-memory twins, with two changes so that the figures are the engine's: the
 * state store is the deployed stack (spilling store over the packed layout) on a bare in-memory
 * table (no history, no bookkeeping of the twin's), and the stream writer takes the records and
 * keeps them aside (a real PutRecords is a network call whose latency these figures leave out).
 */
import { performance } from 'node:perf_hooks';
import type { KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import { createJobStreams, createMemoryPorts, MemoryStateTable } from '../shared/adapters/memory/memory-ports.js';
import type { Job } from '../shared/api/job.js';
import { decodePacket, encodeSourceControl } from '../shared/codec/envelope.js';
import { decodePayload } from '../shared/codec/payload.js';
import type { PlanStage } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { resourceNames } from '../shared/plan/resources.js';
import { PackedStateStore } from '../shared/runtime/packed-state.js';
import type { OutgoingRecord, RuntimePorts, StateStore, StoredRecord } from '../shared/runtime/ports.js';
import { SpillingStateStore } from '../shared/runtime/spilling-state-store.js';
import { createStageRunner } from '../shared/runtime/stage-runner.js';
import { handleKinesisBatch } from '../functions/operator.js';
import { MemoryBlobStore } from '../shared/testing/memory-job-runner.js';
import type { FairLoop } from './fair-loops.js';
import type { Ev } from './jobs.js';
import { encodeRounds, loadRounds, type InputShape } from './stage1-input.js';

export interface Rate {
  readonly events: number;
  readonly wallMs: number;
  /** CPU time of this process (all threads: GC helpers count) */
  readonly cpuMs: number;
  /** events / total wall time */
  readonly eps: number;
  /** events / total CPU time */
  readonly cpuEps: number;
}

const rate = (events: number, wallMs: number, cpuMs: number): Rate => ({ events, wallMs, cpuMs, eps: events / (wallMs / 1000), cpuEps: events / (cpuMs / 1000) });

export interface PathFigures {
  readonly path: string;
  /** engine, every timed round: data batches and barrier batches */
  readonly engine: Rate;
  /** engine, data batches only (the per-event cost a checkpoint is compared with) */
  readonly engineData: Rate;
  readonly fair: Rate;
  /** engine events/s ÷ fair loop events/s, both over total wall time of the same rounds */
  readonly fairRatio: number;
  /** the same over CPU time */
  readonly fairCpuRatio: number;
  readonly checkpoints: {
    readonly count: number;
    /** rows the checkpoints wrote (dirty keys) */
    readonly dirtyKeys: number;
    readonly wallMs: number;
    readonly cpuMs: number;
    /** CPU per dirty key, in events' worth of the data batches' CPU per event */
    readonly eventsPerKey: number;
  };
  readonly shape: { readonly eventsPerCheckpoint: number; readonly eventsPerBatch: number; readonly recordsPerBatch: number; readonly keys: string; readonly timedRounds: number; readonly warmupRounds: number };
  readonly outputs: { readonly engine: number; readonly fair: number };
  readonly checksum: { readonly engine: number; readonly fair: number };
}

/**
 * AWS's event shape for one ESM batch of one shard, as the Lambda runtime hands it to a function:
 * parsed from JSON. Its strings are then flat, as a deployed handler sees them; the twin's sequence
 * numbers are built by concatenation, and whichever of the engine and its fair loop first compared
 * them would pay for flattening them (about 0.5–1 µs per record).
 */
export function kinesisEvent(stream: string, shardId: string, records: readonly StoredRecord[]): KinesisStreamEvent {
  const arn = `arn:aws:kinesis:us-east-1:123456789012:stream/${stream}`;
  const event: KinesisStreamEvent = {
    Records: records.map(
      (r): KinesisStreamRecord => ({
        eventSource: 'aws:kinesis',
        eventVersion: '1.0',
        eventID: `${shardId}:${r.sequenceNumber}`,
        eventName: 'aws:kinesis:record',
        invokeIdentityArn: 'arn:aws:iam::123456789012:role/bench',
        awsRegion: 'us-east-1',
        eventSourceARN: arn,
        kinesis: {
          kinesisSchemaVersion: '1.0',
          partitionKey: r.partitionKey,
          sequenceNumber: r.sequenceNumber,
          data: Buffer.from(r.data).toString('base64'),
          approximateArrivalTimestamp: (r.approximateArrivalTimestamp ?? 1_767_225_600_000) / 1000,
        },
      }),
    ),
  };
  return JSON.parse(JSON.stringify(event)) as KinesisStreamEvent;
}

interface EventRound {
  readonly batches: KinesisStreamEvent[];
  readonly barrier: KinesisStreamEvent;
  readonly events: number;
}

/**
 * The state store a deployed stage has — large rows spilled to a blob store (S3 on AWS), the rest
 * in the packed layout — with the packed layout on a bare in-memory table that keeps no history.
 */
export function benchStateStore(): StateStore {
  return new SpillingStateStore(new PackedStateStore(new MemoryStateTable()), new MemoryBlobStore());
}

/** The bench's ports: the twins, the state store above, a writer that keeps records aside. */
function benchPorts(p: RuntimePorts, sent: OutgoingRecord[], dirty: { rows: number }): RuntimePorts {
  const store = benchStateStore();
  return {
    ...p,
    state: store,
    // a checkpoint's dirty keys are the rows of its delta; the table takes them every
    // materializeEvery-th checkpoint (runtime/changelog.ts), so they are counted where the snapshot reports them
    telemetry: {
      count: (name, value) => {
        if (name === 'CheckpointKeys') dirty.rows += value ?? 1;
        p.telemetry.count(name, value);
      },
      timing: (name, ms) => p.telemetry.timing(name, ms),
      log: (level, message, fields) => p.telemetry.log(level, message, fields),
    },
    writer: {
      async putAll(_stream, records) {
        for (const r of records) sent.push(r);
      },
    },
  };
}

/** Data envelopes in the packets the engine sent, and each one's decoded payload. */
function drainSent(sent: OutgoingRecord[], onValue: (v: unknown) => void): number {
  let n = 0;
  for (const r of sent) {
    for (const e of decodePacket(r.data).envelopes) {
      if (e.kind !== 'data') continue;
      n++;
      onValue(decodePayload(e.payload));
    }
  }
  sent.length = 0;
  return n;
}

interface Measured {
  engine: { wall: number; cpu: number; dataWall: number; dataCpu: number; events: number; ckWall: number; ckCpu: number; checkpoints: number };
  fair: { wall: number; cpu: number };
}

/** Engine and fair loop take turns, round by round; rounds before `warmup` are not counted. */
async function alternate(rounds: readonly EventRound[], warmup: number, engine: (e: KinesisStreamEvent) => Promise<unknown>, fair: FairLoop, afterRound: () => void): Promise<Measured> {
  const m: Measured = { engine: { wall: 0, cpu: 0, dataWall: 0, dataCpu: 0, events: 0, ckWall: 0, ckCpu: 0, checkpoints: 0 }, fair: { wall: 0, cpu: 0 } };
  const cpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  for (let r = 0; r < rounds.length; r++) {
    const round = rounds[r]!;
    const timed = r >= warmup;
    for (const b of round.batches) {
      const c0 = cpu();
      const t0 = performance.now();
      await engine(b);
      const w = performance.now() - t0;
      const c = cpu() - c0;
      if (timed) {
        m.engine.dataWall += w;
        m.engine.dataCpu += c;
      }
    }
    {
      const c0 = cpu();
      const t0 = performance.now();
      await engine(round.barrier);
      const w = performance.now() - t0;
      const c = cpu() - c0;
      if (timed) {
        m.engine.ckWall += w;
        m.engine.ckCpu += c;
        m.engine.checkpoints++;
        m.engine.events += round.events;
      }
    }
    const c0 = cpu();
    const t0 = performance.now();
    for (const b of round.batches) fair.handle(b);
    fair.handle(round.barrier);
    const w = performance.now() - t0;
    const c = cpu() - c0;
    if (timed) {
      m.fair.wall += w;
      m.fair.cpu += c;
    }
    afterRound();
  }
  m.engine.wall = m.engine.dataWall + m.engine.ckWall;
  m.engine.cpu = m.engine.dataCpu + m.engine.ckCpu;
  return m;
}

export interface KeyedPathOptions {
  readonly path: 'count' | 'window';
  readonly job: Job;
  readonly fair: FairLoop;
  readonly events: readonly Ev[];
  readonly shape: InputShape;
  readonly warmupRounds: number;
  readonly keys: string;
}

/** The keyed stage (s1) of a three-stage job, fed packets as stage s0 writes them. */
export async function measureKeyedPath(o: KeyedPathOptions): Promise<PathFigures> {
  const plan = planJob(o.job);
  const topology = plan.stages.map((s) => s.parallelism);
  const encoded = encodeRounds(o.events, o.shape, plan.maxParallelism, topology);
  const sent: OutgoingRecord[] = [];
  const dirty = { rows: 0 };
  const input = loadRounds(o.job, encoded, (p) => benchPorts(p, sent, dirty));
  const runner = createStageRunner(input);
  const rounds: EventRound[] = input.rounds.map((r) => ({
    batches: r.batches.map((b) => kinesisEvent(input.stream, input.shardId, b)),
    barrier: kinesisEvent(input.stream, input.shardId, r.barrier),
    events: r.events,
  }));
  let engineOutputs = 0;
  const last = new Map<string, number>();
  let fired = 0;
  let dirtyTimed = 0;
  let roundNo = 0;
  const m = await alternate(rounds, o.warmupRounds, (e) => handleKinesisBatch(runner, e), o.fair, () => {
    engineOutputs += drainSent(sent, (v) => {
      const x = v as { k: string; n: number };
      if (o.path === 'count') last.set(x.k, Math.max(last.get(x.k) ?? 0, x.n));
      else fired++;
    });
    if (roundNo++ >= o.warmupRounds) dirtyTimed += dirty.rows;
    dirty.rows = 0;
  });
  let engineSum = 0;
  for (const n of last.values()) engineSum += n;
  const e = m.engine;
  const dataRate = rate(e.events, e.dataWall, e.dataCpu);
  const perEventCpu = e.dataCpu / e.events;
  const perRound = o.shape.eventsPerPacket * o.shape.packetsPerBatch * o.shape.batchesPerRound;
  const engine = rate(e.events, e.wall, e.cpu);
  const fair = rate(e.events, m.fair.wall, m.fair.cpu);
  return {
    path: o.path,
    engine,
    engineData: dataRate,
    fair,
    fairRatio: engine.eps / fair.eps,
    fairCpuRatio: engine.cpuEps / fair.cpuEps,
    checkpoints: { count: e.checkpoints, dirtyKeys: dirtyTimed, wallMs: e.ckWall, cpuMs: e.ckCpu, eventsPerKey: dirtyTimed ? e.ckCpu / dirtyTimed / perEventCpu : 0 },
    shape: {
      eventsPerCheckpoint: perRound,
      eventsPerBatch: o.shape.eventsPerPacket * o.shape.packetsPerBatch,
      recordsPerBatch: o.shape.packetsPerBatch,
      keys: o.keys,
      timedRounds: rounds.length - o.warmupRounds,
      warmupRounds: o.warmupRounds,
    },
    outputs: { engine: engineOutputs, fair: o.fair.outputs },
    checksum: { engine: o.path === 'count' ? engineSum : fired, fair: o.fair.checksum },
  };
}

export interface SourcePathOptions {
  readonly job: Job;
  readonly fair: FairLoop;
  readonly events: readonly Ev[];
  /** source records per ESM batch */
  readonly batch: number;
  readonly eventsPerCheckpoint: number;
  readonly warmupRounds: number;
  readonly keys: string;
}

/** The source stage (s0): JSON records in (one event per Kinesis record), packed envelopes out. */
export async function measureSourcePath(o: SourcePathOptions): Promise<PathFigures> {
  const plan = planJob(o.job);
  const names = resourceNames(plan);
  const mem = createMemoryPorts({ seed: 1, now: () => 0 });
  createJobStreams(mem.kinesis, plan, names);
  const stage: PlanStage = plan.stages.find((s) => s.input.kind === 'source')!;
  const stream = names.streamOf(stage);
  const shard = mem.kinesis.listShards(stream)[0]!;
  const topology = plan.stages.map((s) => s.parallelism);
  const enc = new TextEncoder();
  const put = (data: Uint8Array, pk: string) => mem.kinesis.putRecord(stream, { data, partitionKey: pk, explicitHashKey: shard.startingHashKey }).sequenceNumber;
  const plan0: Array<{ batches: string[][]; barrier: string; events: number }> = [];
  for (let i = 0, r = 0; i + o.eventsPerCheckpoint <= o.events.length; i += o.eventsPerCheckpoint, r++) {
    const batches: string[][] = [];
    for (let b = i; b < i + o.eventsPerCheckpoint; b += o.batch) {
      batches.push(o.events.slice(b, Math.min(b + o.batch, i + o.eventsPerCheckpoint)).map((e) => put(enc.encode(JSON.stringify(e)), e.k)));
    }
    const barrier = put(encodeSourceControl({ kind: 'barrier', checkpointId: r + 1, topology, savepoint: false, time: 0 }), 'barrier');
    plan0.push({ batches, barrier, events: o.eventsPerCheckpoint });
  }
  const bySeq = new Map(mem.kinesis.records(stream, shard.shardId).map((x) => [x.sequenceNumber, x]));
  const rounds: EventRound[] = plan0.map((r) => ({
    batches: r.batches.map((b) => kinesisEvent(stream, shard.shardId, b.map((s) => bySeq.get(s)!))),
    barrier: kinesisEvent(stream, shard.shardId, [bySeq.get(r.barrier)!]),
    events: r.events,
  }));
  const sent: OutgoingRecord[] = [];
  const dirty = { rows: 0 };
  const ports = benchPorts({ ...mem.ports, collectSink: { stage: async () => undefined } }, sent, dirty);
  const runner = createStageRunner({ job: o.job, plan, stage, names, ports });
  let engineOutputs = 0;
  let sum = 0;
  const m = await alternate(rounds, o.warmupRounds, (e) => handleKinesisBatch(runner, e), o.fair, () => {
    engineOutputs += drainSent(sent, (v) => {
      sum += (v as Ev).v;
    });
  });
  const e = m.engine;
  const engine = rate(e.events, e.wall, e.cpu);
  const fair = rate(e.events, m.fair.wall, m.fair.cpu);
  return {
    path: 'source',
    engine,
    engineData: rate(e.events, e.dataWall, e.dataCpu),
    fair,
    fairRatio: engine.eps / fair.eps,
    fairCpuRatio: engine.cpuEps / fair.cpuEps,
    checkpoints: { count: e.checkpoints, dirtyKeys: 0, wallMs: e.ckWall, cpuMs: e.ckCpu, eventsPerKey: 0 },
    shape: { eventsPerCheckpoint: o.eventsPerCheckpoint, eventsPerBatch: o.batch, recordsPerBatch: o.batch, keys: o.keys, timedRounds: rounds.length - o.warmupRounds, warmupRounds: o.warmupRounds },
    outputs: { engine: engineOutputs, fair: o.fair.outputs },
    checksum: { engine: sum, fair: o.fair.checksum },
  };
}
