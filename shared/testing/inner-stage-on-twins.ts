/**
 * A job's exchange-fed (keyed) stage on fresh twins, fed records of one shard: what the keyed
 * stage's unit and property tests and the keyed-stage benchmarks (bench/stage1-input.ts) run on.
 */
import type { Job } from '../api/index.js';
import { createJobStreams, createMemoryPorts } from '../adapters/memory/memory-ports.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import type { StoredRecord } from '../runtime/ports.js';

/** `j`'s first exchange-fed stage on fresh twins, with `records` put in order on its stream's first shard; `stored` as the shard holds them. */
export function innerStageOnTwins(j: Job, records: readonly Uint8Array[]) {
  const plan = planJob(j);
  const names = resourceNames(plan);
  const mem = createMemoryPorts({ seed: 1, now: () => 0 });
  createJobStreams(mem.kinesis, plan, names);
  const stage = plan.stages.find((s) => s.input.kind === 'exchange')!;
  const stream = names.streamOf(stage);
  const shard = mem.kinesis.listShards(stream)[0]!;
  const seqs = records.map((data) => mem.kinesis.putRecord(stream, { data, partitionKey: 'p', explicitHashKey: shard.startingHashKey }).sequenceNumber);
  const bySeq = new Map<string, StoredRecord>(mem.kinesis.records(stream, shard.shardId).map((r) => [r.sequenceNumber, r]));
  const stored = seqs.map((s) => bySeq.get(s)!);
  return { plan, names, mem, stage, shard, stream, stored };
}
