/**
 * A stage as Lambda runs it: the engine behind functions/operator.ts (`handleKinesisBatch`, the
 * handler's whole body besides telemetry flushing) invoked with AWS's KinesisStreamEvent (base64
 * records), reading its lease, committing its position, emitting to the next stage's stream, and
 * taking the checkpoints that the input's barriers ask for. Against it, in the same run, a fair
 * hand-written loop (fair-loops.ts) over the same events; the two alternate round by round (a
 * round = the events of one checkpoint interval + its barrier), so both see the same machine
 * (`measurePath`). Every rate is events over the total time of the timed rounds, barriers included.
 *
 * The ports are the in-memory twins, with two changes so that the figures are the engine's: the
 * state store is the deployed stack (spilling store over the packed layout) on a bare in-memory
 * table (no history, no bookkeeping of the twin's), and the stream writer takes the records and
 * keeps them aside (a real PutRecords is a network call whose latency these figures leave out).
 */
import { performance } from 'node:perf_hooks';
import type { KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import { createJobStreams, createMemoryPorts, MemoryStateTable } from '../shared/adapters/memory/memory-ports.js';
import { decodePacket, encodeSourceControl } from '../shared/codec/envelope.js';
import { decodePayload } from '../shared/codec/payload.js';
import type { PlanStage } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { resourceNames } from '../shared/plan/resources.js';
import { PackedStateStore } from '../shared/runtime/packed-state.js';
import type { OutgoingRecord, RuntimePorts, StateStore, StoredRecord } from '../shared/runtime/ports.js';
import { SpillingStateStore } from '../shared/runtime/spilling-state-store.js';
import { createStageRunner, type StageRunner } from '../shared/runtime/stage-runner.js';
import { handleKinesisBatch } from '../functions/operator.js';
import { MemoryBlobStore } from '../shared/testing/memory-job-runner.js';
import { FairCount, FairSource, FairWindow } from './fair-loops.js';
import { keyedCountEmitJob, makeEvents, windowEmitJob, type Ev } from './jobs.js';
import { encodeRounds, loadRounds, type InputShape } from './stage1-input.js';
import { fmt } from './svg.js';

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

/** One timed turn of a side: wall and CPU time of its data batches and of its barrier batch. */
export interface TurnTimes {
  readonly dataWall: number;
  readonly dataCpu: number;
  readonly ckWall: number;
  readonly ckCpu: number;
  /** rows the turn's checkpoint wrote (the engine's; 0 for a fair loop) */
  readonly dirtyRows: number;
  /** events of the turn's round (0 for a side that does nothing) */
  readonly events: number;
}

/** What a side has done when its rounds are over: outputs and the figure both sides must agree on. */
export interface SideEnd {
  readonly outputs: number;
  readonly checksum: number;
}

/** The engine or its fair loop over a path's rounds, one round per turn. */
export interface Side {
  readonly rounds: number;
  turn(r: number): Promise<TurnTimes>;
  end(): SideEnd;
}

/** What a path measures, as plain data: the job, the fair loop and the input follow from `path` and the seeds below. */
export interface PathSpec {
  readonly path: 'count' | 'window' | 'source';
  /** the keyed paths' input: envelopes per packet, packets per ESM batch, batches per checkpoint */
  readonly shape: InputShape;
  /** source records per ESM batch and per checkpoint (the source path) */
  readonly sourceBatch: number;
  readonly sourcePerCheckpoint: number;
  readonly rounds: number;
  readonly warmupRounds: number;
  /** distinct keys, uniform */
  readonly keys: number;
}

/**
 * The full-size parts' input (`npm run bench` without --quick), for tools that run a part's stage
 * alone: 20 k events per checkpoint — 4 ESM batches of 10 packets × 500 events for a keyed stage,
 * 40 batches of 500 JSON records for the source stage — over 10 k keys.
 */
export const FULL_SIZE = {
  shape: { eventsPerPacket: 500, packetsPerBatch: 10, batchesPerRound: 4 },
  sourceBatch: 500,
  sourcePerCheckpoint: 20_000,
  keys: 10_000,
} as const satisfies Omit<PathSpec, 'path' | 'rounds' | 'warmupRounds'>;

// the seeds of the paths' inputs (fixed, so that every run and both sides see the same events)
const SEED = { count: 7, window: 3, source: 5 } as const;

const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** The path's events, each side's copy built the same way. */
function pathInput(spec: PathSpec): { rounds: EventRound[]; sent: OutgoingRecord[]; dirty: { rows: number }; runner: () => StageRunner } {
  if (!Object.hasOwn(SEED, spec.path)) throw new Error(`bench: no path "${spec.path}" (count, window or source)`);
  if (!(spec.warmupRounds >= 0 && spec.warmupRounds < spec.rounds)) throw new Error(`bench: ${spec.warmupRounds} rounds left out of ${spec.rounds}: at least one must be timed`);
  const sent: OutgoingRecord[] = [];
  const dirty = { rows: 0 };
  if (spec.path === 'source') {
    const job = keyedCountEmitJob();
    const events = makeEvents(spec.sourcePerCheckpoint * spec.rounds, spec.keys, SEED.source);
    const plan = planJob(job);
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
    const per = spec.sourcePerCheckpoint;
    for (let i = 0, r = 0; i + per <= events.length; i += per, r++) {
      const batches: string[][] = [];
      for (let b = i; b < i + per; b += spec.sourceBatch) {
        batches.push(events.slice(b, Math.min(b + spec.sourceBatch, i + per)).map((e) => put(enc.encode(JSON.stringify(e)), e.k)));
      }
      const barrier = put(encodeSourceControl({ kind: 'barrier', checkpointId: r + 1, topology, savepoint: false, time: 0 }), 'barrier');
      plan0.push({ batches, barrier, events: per });
    }
    const bySeq = new Map(mem.kinesis.records(stream, shard.shardId).map((x) => [x.sequenceNumber, x]));
    const rounds: EventRound[] = plan0.map((r) => ({
      batches: r.batches.map((b) => kinesisEvent(stream, shard.shardId, b.map((s) => bySeq.get(s)!))),
      barrier: kinesisEvent(stream, shard.shardId, [bySeq.get(r.barrier)!]),
      events: r.events,
    }));
    const ports = benchPorts({ ...mem.ports, collectSink: { stage: async () => undefined } }, sent, dirty);
    return { rounds, sent, dirty, runner: () => createStageRunner({ job, plan, stage, names, ports }) };
  }
  const job = spec.path === 'count' ? keyedCountEmitJob() : windowEmitJob();
  const s = spec.shape;
  const events = makeEvents(s.eventsPerPacket * s.packetsPerBatch * s.batchesPerRound * spec.rounds, spec.keys, SEED[spec.path]);
  const plan = planJob(job);
  const encoded = encodeRounds(events, s, plan.maxParallelism, plan.stages.map((x) => x.parallelism));
  const input = loadRounds(job, encoded, (p) => benchPorts(p, sent, dirty));
  const rounds: EventRound[] = input.rounds.map((r) => ({
    batches: r.batches.map((b) => kinesisEvent(input.stream, input.shardId, b)),
    barrier: kinesisEvent(input.stream, input.shardId, r.barrier),
    events: r.events,
  }));
  return { rounds, sent, dirty, runner: () => createStageRunner(input) };
}

/**
 * Round r's events, then dropped: a deployed handler holds one batch at a time, and input kept in
 * the heap would make every collection of the side that holds it slower.
 */
function take(rounds: Array<EventRound | undefined>, r: number): EventRound {
  const round = rounds[r];
  if (!round) throw new Error(`round ${r}: out of range or taken`);
  rounds[r] = undefined;
  return round;
}

/** The engine's side: its stage through `handleKinesisBatch`, every batch timed on its own. */
export function engineSide(spec: PathSpec): Side {
  const { rounds, sent, dirty, runner } = pathInput(spec);
  const r0 = runner();
  const left: Array<EventRound | undefined> = rounds;
  let outputs = 0;
  const last = new Map<string, number>();
  let fired = 0;
  let sum = 0;
  const onValue =
    spec.path === 'count'
      ? (v: unknown) => {
          const x = v as { k: string; n: number };
          last.set(x.k, Math.max(last.get(x.k) ?? 0, x.n));
        }
      : spec.path === 'window'
        ? () => void fired++
        : (v: unknown) => void (sum += (v as Ev).v);
  return {
    rounds: rounds.length,
    async turn(r) {
      const round = take(left, r);
      let dataWall = 0;
      let dataCpu = 0;
      for (const b of round.batches) {
        const c0 = cpuNow();
        const t0 = performance.now();
        await handleKinesisBatch(r0, b);
        dataWall += performance.now() - t0;
        dataCpu += cpuNow() - c0;
      }
      const c0 = cpuNow();
      const t0 = performance.now();
      await handleKinesisBatch(r0, round.barrier);
      const ckWall = performance.now() - t0;
      const ckCpu = cpuNow() - c0;
      // untimed: the outputs checked against the fair loop's
      outputs += drainSent(sent, onValue);
      const dirtyRows = dirty.rows;
      dirty.rows = 0;
      return { dataWall, dataCpu, ckWall, ckCpu, dirtyRows, events: round.events };
    },
    end() {
      let checksum = spec.path === 'window' ? fired : sum;
      if (spec.path === 'count') for (const n of last.values()) checksum += n;
      return { outputs, checksum };
    },
  };
}

/** A side that does nothing, for runs of the engine alone (a profile, two checkouts compared). */
export const idleSide = (rounds: number): Side => ({
  rounds,
  turn: async () => ({ dataWall: 0, dataCpu: 0, ckWall: 0, ckCpu: 0, dirtyRows: 0, events: 0 }),
  end: () => ({ outputs: 0, checksum: 0 }),
});

/** The fair loop's side (fair-loops.ts), a round timed whole. */
export function fairSide(spec: PathSpec): Side {
  const { rounds } = pathInput(spec);
  const fair = spec.path === 'count' ? new FairCount(128) : spec.path === 'window' ? new FairWindow(128) : new FairSource(128);
  const left: Array<EventRound | undefined> = rounds;
  return {
    rounds: rounds.length,
    async turn(r) {
      const round = take(left, r);
      const c0 = cpuNow();
      const t0 = performance.now();
      for (const b of round.batches) fair.handle(b);
      fair.handle(round.barrier);
      const wall = performance.now() - t0;
      const cpu = cpuNow() - c0;
      fair.sent.length = 0;
      return { dataWall: wall, dataCpu: cpu, ckWall: 0, ckCpu: 0, dirtyRows: 0, events: round.events };
    },
    end() {
      return { outputs: fair.outputs, checksum: fair.checksum };
    },
  };
}

/**
 * A path measured: the engine and its fair loop take turns, round by round (a round = the events of
 * one checkpoint interval + its barrier), so both see the same moments of the machine; rounds
 * before `warmupRounds` are not counted. `both`: other sides (the engine alone: `idleSide`).
 */
export async function measurePath(spec: PathSpec, both: { engine: Side; fair: Side } = { engine: engineSide(spec), fair: fairSide(spec) }): Promise<PathFigures> {
  const e = { dataWall: 0, dataCpu: 0, ckWall: 0, ckCpu: 0, events: 0, checkpoints: 0, dirty: 0 };
  const f = { wall: 0, cpu: 0 };
  const rounds = both.engine.rounds;
  if (both.fair.rounds !== rounds) throw new Error(`sides disagree on rounds: ${rounds} and ${both.fair.rounds}`);
  for (let r = 0; r < rounds; r++) {
    const et = await both.engine.turn(r);
    const ft = await both.fair.turn(r);
    if (r < spec.warmupRounds) continue;
    e.dataWall += et.dataWall;
    e.dataCpu += et.dataCpu;
    e.ckWall += et.ckWall;
    e.ckCpu += et.ckCpu;
    e.dirty += et.dirtyRows;
    e.checkpoints++;
    e.events += et.events;
    f.wall += ft.dataWall + ft.ckWall;
    f.cpu += ft.dataCpu + ft.ckCpu;
  }
  const [ee, fe] = [both.engine.end(), both.fair.end()];
  const engine = rate(e.events, e.dataWall + e.ckWall, e.dataCpu + e.ckCpu);
  const data = rate(e.events, e.dataWall, e.dataCpu);
  const fair = rate(e.events, f.wall, f.cpu);
  const perEventCpu = e.dataCpu / e.events;
  const perRound = e.events / e.checkpoints;
  return {
    path: spec.path,
    engine,
    engineData: data,
    fair,
    fairRatio: engine.eps / fair.eps,
    fairCpuRatio: engine.cpuEps / fair.cpuEps,
    checkpoints: { count: e.checkpoints, dirtyKeys: e.dirty, wallMs: e.ckWall, cpuMs: e.ckCpu, eventsPerKey: e.dirty ? e.ckCpu / e.dirty / perEventCpu : 0 },
    shape:
      spec.path === 'source'
        ? { eventsPerCheckpoint: perRound, eventsPerBatch: spec.sourceBatch, recordsPerBatch: spec.sourceBatch, keys: keysLabel(spec.keys), timedRounds: rounds - spec.warmupRounds, warmupRounds: spec.warmupRounds }
        : {
            eventsPerCheckpoint: perRound,
            eventsPerBatch: spec.shape.eventsPerPacket * spec.shape.packetsPerBatch,
            recordsPerBatch: spec.shape.packetsPerBatch,
            keys: keysLabel(spec.keys),
            timedRounds: rounds - spec.warmupRounds,
            warmupRounds: spec.warmupRounds,
          },
    outputs: { engine: ee.outputs, fair: fe.outputs },
    checksum: { engine: ee.checksum, fair: fe.checksum },
  };
}

const keysLabel = (keys: number) => `${fmt(keys)} keys, uniform`;
