/**
 * Pre-encoded input of a keyed stage (s1): the Kinesis records stage s0 would have written, made
 * once with the project's codec (PacketBuilder + MessagePack payloads), in rounds of one epoch each
 * followed by the barrier that closes it. The records are then put into an in-memory Kinesis twin,
 * which gives them real sequence numbers, so the engine can also replay them after a lost cache
 * (the keyed stage on twins the engine's tests run on: shared/testing/inner-stage-on-twins.ts).
 */
import type { MemoryPorts } from '../shared/adapters/memory/memory-ports.js';
import type { Job } from '../shared/api/job.js';
import { PacketBuilder } from '../shared/codec/envelope.js';
import { encodePayload } from '../shared/codec/payload.js';
import { keyGroupOf, keyString } from '../shared/plan/key-groups.js';
import type { Plan, PlanStage } from '../shared/plan/plan.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import type { CollectSinkStore, RuntimePorts, StoredRecord } from '../shared/runtime/ports.js';
import { instanceIdOf } from '../shared/runtime/stage-instance.js';
import { innerStageOnTwins } from '../shared/testing/inner-stage-on-twins.js';
import type { Ev } from './jobs.js';

export interface InputShape {
  /** data envelopes per packet (= what one s0 invocation sends one shard) */
  readonly eventsPerPacket: number;
  /** packets (Kinesis records) per s1 batch */
  readonly packetsPerBatch: number;
  /** batches per epoch; a barrier follows each epoch */
  readonly batchesPerRound: number;
  /** the source's watermark interval (InstanceOptions default: 200 ms of event time) */
  readonly watermarkIntervalMs?: number;
}

export interface EncodedRound {
  /** batches of packets */
  readonly batches: Uint8Array[][];
  /** a packet holding only barrier (round + 1) */
  readonly barrier: Uint8Array;
  readonly events: number;
}

export const PRODUCER = instanceIdOf('s0', 'shardId-000000000000');

/** Encodes events into rounds of packets, as one s0 instance with one downstream shard emits them; `topology` is the job's instances per stage. */
export function encodeRounds(events: readonly Ev[], shape: InputShape, maxParallelism: number, topology: readonly number[] = [1, 1]): EncodedRound[] {
  const perRound = shape.eventsPerPacket * shape.packetsPerBatch * shape.batchesPerRound;
  const wmInterval = shape.watermarkIntervalMs ?? 200;
  const rounds: EncodedRound[] = [];
  let maxTs = Number.NEGATIVE_INFINITY;
  let emitted = Number.NEGATIVE_INFINITY;
  for (let r = 0; (r + 1) * perRound <= events.length; r++) {
    const epoch = r;
    let seq = 0;
    const batches: Uint8Array[][] = [];
    let i = r * perRound;
    for (let b = 0; b < shape.batchesPerRound; b++) {
      const packets: Uint8Array[] = [];
      for (let p = 0; p < shape.packetsPerBatch; p++) {
        const pb = new PacketBuilder(PRODUCER);
        for (let e = 0; e < shape.eventsPerPacket; e++, i++) {
          const ev = events[i]!;
          const key = keyString(ev.k);
          pb.add({ kind: 'data', epoch, seq: seq++, keyGroup: keyGroupOf(key, maxParallelism), timestamp: ev.ts, payload: encodePayload(ev) });
          if (ev.ts > maxTs) {
            maxTs = ev.ts;
            const wm = maxTs - 1;
            if (wm >= emitted + wmInterval) {
              emitted = wm;
              pb.add({ kind: 'watermark', epoch, watermark: wm, idle: false });
            }
          }
        }
        packets.push(pb.finish());
      }
      batches.push(packets);
    }
    const bb = new PacketBuilder(PRODUCER);
    bb.add({ kind: 'barrier', checkpointId: r + 1, count: seq, topology, savepoint: false });
    rounds.push({ batches, barrier: bb.finish(), events: perRound });
  }
  return rounds;
}

export interface LoadedRound {
  readonly batches: StoredRecord[][];
  readonly barrier: StoredRecord[];
  readonly events: number;
}

export interface LoadedInput {
  readonly job: Job;
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly stage: PlanStage;
  readonly stream: string;
  readonly shardId: string;
  readonly mem: MemoryPorts;
  readonly ports: RuntimePorts;
  readonly rounds: LoadedRound[];
  /** outputs the collect sink was handed */
  readonly outputs: { count: number };
}

/**
 * Fresh in-memory twins holding the encoded rounds in the keyed stage's stream. The collect sink
 * only counts what it is handed (the sink's own cost is not the engine's hot path).
 */
export function loadRounds(job: Job, rounds: readonly EncodedRound[], wrap?: (p: RuntimePorts) => RuntimePorts): LoadedInput {
  // each round's batches, then its barrier, in order on the keyed stage's first shard
  const flat = rounds.flatMap((r) => [...r.batches.flat(), r.barrier]);
  const { plan, names, mem, stage, shard, stream, stored } = innerStageOnTwins(job, flat);
  let at = 0;
  const loaded = rounds.map((r) => ({
    batches: r.batches.map((b) => b.map(() => stored[at++]!)),
    barrier: [stored[at++]!],
    events: r.events,
  }));
  const outputs = { count: 0 };
  const collectSink: CollectSinkStore = {
    async stage(_sink, out) {
      outputs.count += out.length;
    },
  };
  let ports: RuntimePorts = { ...mem.ports, collectSink };
  if (wrap) ports = wrap(ports);
  return { job, plan, names, stage, stream, shardId: shard.shardId, mem, ports, rounds: loaded, outputs };
}
