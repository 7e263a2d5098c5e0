/**
 * The stage functions' activity per second at an event rate, in two parts:
 *
 * - per event: CPU, state and delta writes, pointers, acks, sinks, state misses, S3, the packed
 *   bytes between stages, and the time spent waiting on those requests;
 * - per batch: the lease position each batch commits (one UpdateItem: how an environment knows its
 *   cache is still the lease's, docs/guarantees.md), the lease read, the PutRecords of a stage that
 *   feeds another, and the time waiting on them. (Whether the coordinator is parked comes back with
 *   the position write: no request of its own.)
 *
 * A metered in-process run (bench/pipeline.ts) gives both parts (`fromMeter`); the batches come from
 * the job's event source mapping settings (`stageFlows`), not from how often that run polled: Lambda
 * polls each shard about once a second; with a batching window it invokes when the window elapses,
 * the batch size is reached or the payload reaches 6 MB. A source shard's records are events; a
 * stage fed by others gets packed records, one per upstream batch and shard (or more above a
 * packet's 512 KB), so its batches follow its upstream's.
 */
import { BATCHING, defaultBatchingWindowMs, POLL_INTERVAL_MS } from '../cdk/stage-batching.js';
import type { Plan } from '../shared/plan/plan.js';
import { MAX_PACKET_BYTES } from '../shared/runtime/outbox.js';
import { PUT_PAYLOAD_UNIT } from './metering.js';
import type { PipelineResult } from './pipeline.js';
import { ASSUMPTIONS } from './prices.js';

/** Lambda's invocation payload limit: the mapping invokes at this size whatever the batch size */
export const MAX_INVOCATION_BYTES = 6 * 1024 * 1024;

/** A job's batch settings (SluiceJob `stageSettings`, the same for every stage here). */
export interface Batching {
  readonly batchSize: number;
  /** the batching window; 0: none (Lambda's poll, about once a second) */
  readonly windowMs: number;
  readonly memoryMb: number;
}

/** The batch settings SluiceJob deploys for a plan (cdk/stage-batching.ts). */
export function defaultBatching(plan: Plan): Batching {
  return { batchSize: BATCHING.batchSize, windowMs: defaultBatchingWindowMs(plan.checkpoint), memoryMb: BATCHING.memorySize };
}

/** What the stage functions of a job do per event (of the job's input) and per batch (of any stage). */
export interface StageRates {
  /** stages of the metered job: the per-event part is scaled by the priced job's stages over these */
  readonly stages: number;
  readonly perEvent: {
    /** CPU seconds at a full vCPU */
    readonly cpuS: number;
    /** seconds waiting on the requests made per checkpoint (state, deltas, pointers, acks, sinks, S3) */
    readonly ioS: number;
    readonly wru: number;
    /** of `wru`, the deltas kept inline in the control table (the commit's GC deletes each once, billed by its size) */
    readonly inlineDeltaWru: number;
    readonly rru: number;
    readonly s3Puts: number;
    /** bytes an event takes in a packed record between two stages */
    readonly packedBytes: number;
  };
  readonly perBatch: {
    /** the lease position */
    readonly wru: number;
    /** the lease read */
    readonly rru: number;
    /** seconds waiting on the lease read and the position */
    readonly ioS: number;
    /** seconds waiting on the PutRecords of a batch of a stage that feeds another */
    readonly putIoS: number;
  };
}

/** Per event and per batch, from a metered run of `plan` (the run's own polling does not matter beyond its batch count). */
export function fromMeter(r: PipelineResult, plan: Plan): StageRates {
  const m = r.meter;
  const u = (k: string) => m.get(k).units;
  const q = (k: string) => m.get(k).requests;
  const batches = r.stages.reduce((a, s) => a + s.invocations, 0);
  const feeding = new Set(plan.stages.flatMap((s) => (s.input.kind === 'exchange' ? s.input.fromStages : [])));
  const feedingBatches = r.stages.filter((s) => feeding.has(s.stage)).reduce((a, s) => a + s.invocations, 0);
  const hops = plan.stages.filter((s) => s.input.kind === 'exchange').length;
  const D = ASSUMPTIONS.dynamoMs / 1000;
  const perEventIo =
    D * (q('dynamodb.read.state') + q('dynamodb.read.delta') + q('dynamodb.write.pointer') + q('dynamodb.write.ack') + q('dynamodb.write.delta') + q('dynamodb.write.takeover') + q('dynamodb.write.sink')) +
    D * Math.ceil(q('dynamodb.write.state') / ASSUMPTIONS.stateWriteConcurrency) +
    (ASSUMPTIONS.s3Ms / 1000) * (m.sum('s3.put').requests + m.sum('s3.get').requests);
  const perEventWru = ['state', 'delta', 'pointer', 'ack', 'takeover', 'sink'].reduce((a, k) => a + u(`dynamodb.write.${k}`), 0);
  return {
    stages: plan.stages.length,
    perEvent: {
      cpuS: r.stages.reduce((a, s) => a + s.cpuMs, 0) / 1000 / r.events,
      ioS: perEventIo / r.events,
      wru: perEventWru / r.events,
      inlineDeltaWru: u('dynamodb.write.delta') / r.events,
      rru: (u('dynamodb.read.state') + u('dynamodb.read.delta')) / r.events,
      s3Puts: m.sum('s3.put').requests / r.events,
      packedBytes: hops ? m.get('kinesis.put.data').bytes / r.events / hops : 0,
    },
    perBatch: {
      wru: u('dynamodb.write.position') / batches,
      rru: u('dynamodb.read.lease') / batches,
      ioS: (D * (q('dynamodb.read.lease') + q('dynamodb.write.position'))) / batches,
      putIoS: feedingBatches ? ((ASSUMPTIONS.kinesisPutMs / 1000) * q('kinesis.put.data')) / feedingBatches : 0,
    },
  };
}

/**
 * What `npm run bench -- --only cost` metered for its keyed count job (two stages, 2 + 1 shards) at
 * 1,000 events/s, 10 s checkpoints, 10,000 keys, in steady state (its `rates:` line). Per million
 * events: state items 2,130 WRU (128 items every sixth checkpoint), deltas 200, pointers and acks
 * 600; state misses 417 RRU; CPU 12–19 s over both stages (15 taken), 8 s waiting on those
 * requests. Per batch: one position, one lease read, 10 ms waiting on them, 24 ms on a PutRecords.
 */
export const MEASURED: StageRates = {
  stages: 2,
  perEvent: { cpuS: 15e-6, ioS: 8.1e-6, wru: 2930e-6, inlineDeltaWru: 200e-6, rru: 417e-6, s3Puts: 100e-6, packedBytes: 34 },
  perBatch: { wru: 1, rru: 1, ioS: 0.01, putIoS: 0.024 },
};

/** One stage's input as its event source mapping batches it. */
export interface StageFlow {
  readonly stage: string;
  readonly shards: number;
  /** records reaching one shard per second: events, packed records, barriers */
  readonly recordsPerShardS: number;
  readonly batchesPerShardS: number;
  readonly source: boolean;
  /** the stage feeds another (a PutRecords per batch) */
  readonly feeds: boolean;
}

/**
 * How often one shard's mapping invokes: once per window (or poll) while records arrive, more often
 * when a window holds more than the batch size or 6 MB of payload, never more than a record each.
 */
export function batchesPerShard(recordsS: number, payloadBytesS: number, b: Batching): number {
  if (recordsS <= 0) return 0;
  const period = Math.max(b.windowMs, POLL_INTERVAL_MS) / 1000;
  return Math.min(recordsS, Math.max(1 / period, recordsS / b.batchSize, payloadBytesS / MAX_INVOCATION_BYTES));
}

/**
 * The batches of every stage at `eps` events a second into the sources (spread evenly over their
 * shards; every event reaches every stage, as the per-event rates assume), with a barrier per
 * checkpoint on every shard from every upstream shard.
 */
export function stageFlows(plan: Plan, eps: number, b: Batching, o: { eventBytes: number; packedBytes: number; checkpointsPerS: number }): StageFlow[] {
  const sourceShards = plan.stages.filter((s) => s.input.kind === 'source').reduce((a, s) => a + s.parallelism, 0);
  const feeding = new Set(plan.stages.flatMap((s) => (s.input.kind === 'exchange' ? s.input.fromStages : [])));
  const flows = new Map<string, StageFlow>();
  for (const s of plan.stages) {
    let records: number;
    let bytes: number;
    if (s.input.kind === 'source') {
      records = eps / sourceShards + o.checkpointsPerS;
      bytes = (eps / sourceShards) * o.eventBytes;
    } else {
      records = 0;
      for (const id of s.input.fromStages) {
        const up = flows.get(id)!;
        const batchesS = up.batchesPerShardS * up.shards;
        // the events of one upstream batch for one shard of this stage, packed into records of at most 512 KB
        const perDest = batchesS > 0 ? eps / batchesS / s.parallelism : 0;
        const packets = perDest >= 1 ? Math.ceil((perDest * o.packedBytes) / MAX_PACKET_BYTES) : perDest;
        records += batchesS * packets + up.shards * o.checkpointsPerS;
      }
      bytes = (eps / s.parallelism) * o.packedBytes;
    }
    // Lambda hands Kinesis data to the function in base64
    const batchesS = batchesPerShard(records, (bytes * 4) / 3, b);
    flows.set(s.id, { stage: s.id, shards: s.parallelism, recordsPerShardS: records, batchesPerShardS: batchesS, source: s.input.kind === 'source', feeds: feeding.has(s.id) });
  }
  return [...flows.values()];
}

/** PUT payload units a second between stages: each upstream batch's packed records, 25 KB units each. */
function interStagePutUnits(plan: Plan, flows: readonly StageFlow[], eps: number, packedBytes: number): number {
  const byId = new Map(flows.map((f) => [f.stage, f]));
  let units = 0;
  for (const s of plan.stages) {
    if (s.input.kind !== 'exchange') continue;
    for (const id of s.input.fromStages) {
      const up = byId.get(id)!;
      const batchesS = up.batchesPerShardS * up.shards;
      if (batchesS <= 0) continue;
      const perDest = eps / batchesS / s.parallelism;
      const recordBytes = Math.min(perDest * packedBytes, MAX_PACKET_BYTES);
      const records = perDest >= 1 ? Math.ceil((perDest * packedBytes) / MAX_PACKET_BYTES) : perDest;
      units += batchesS * s.parallelism * records * Math.max(1, Math.ceil(recordBytes / PUT_PAYLOAD_UNIT));
    }
  }
  return units;
}

/** The stage functions' activity per second, while events flow. */
export interface Activity {
  readonly batching: Batching;
  readonly flows: readonly StageFlow[];
  readonly stageInvocations: number;
  /** GB-s of CPU and of the requests made per event (per checkpoint) */
  readonly eventGbSeconds: number;
  /** GB-s waiting on each batch's own requests: lease, position, PutRecords */
  readonly batchGbSeconds: number;
  readonly interStagePutUnits: number;
  /** lease positions, one per batch */
  readonly positionWru: number;
  /** state, deltas, pointers, acks, takeovers, sinks */
  readonly eventWru: number;
  /** of those, the inline deltas: as many WRU again when the commit's GC deletes them */
  readonly inlineDeltaWru: number;
  /** lease reads, one per batch */
  readonly leaseRru: number;
  /** state misses, deltas */
  readonly eventRru: number;
  readonly s3Puts: number;
}

export interface ActivityOptions {
  readonly rates?: StageRates;
  readonly batching?: Batching;
  readonly eventBytes?: number;
  readonly checkpointsPerS: number;
}

export function activityOf(plan: Plan, eps: number, o: ActivityOptions): Activity {
  const rates = o.rates ?? MEASURED;
  const b = o.batching ?? defaultBatching(plan);
  const flows = stageFlows(plan, eps, b, { eventBytes: o.eventBytes ?? 200, packedBytes: rates.perEvent.packedBytes, checkpointsPerS: o.checkpointsPerS });
  const sum = (f: (x: StageFlow) => boolean) => flows.filter(f).reduce((a, x) => a + x.batchesPerShardS * x.shards, 0);
  const batches = sum(() => true);
  const feedingBatches = sum((x) => x.feeds);
  const events = eps * (plan.stages.length / rates.stages);
  const gb = b.memoryMb / 1024;
  // below a full vCPU (1,769 MB) CPU time stretches as memory shrinks, so its GB-s do not change
  const cpuGbS = events * rates.perEvent.cpuS * (Math.max(ASSUMPTIONS.fullVcpuMb, b.memoryMb) / 1024);
  return {
    batching: b,
    flows,
    stageInvocations: batches,
    eventGbSeconds: cpuGbS + events * rates.perEvent.ioS * gb,
    batchGbSeconds: (batches * rates.perBatch.ioS + feedingBatches * rates.perBatch.putIoS) * gb,
    interStagePutUnits: interStagePutUnits(plan, flows, eps, rates.perEvent.packedBytes),
    positionWru: batches * rates.perBatch.wru,
    eventWru: events * rates.perEvent.wru,
    inlineDeltaWru: events * rates.perEvent.inlineDeltaWru,
    leaseRru: batches * rates.perBatch.rru,
    eventRru: events * rates.perEvent.rru,
    s3Puts: events * rates.perEvent.s3Puts,
  };
}
