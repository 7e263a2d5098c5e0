/**
 * Test set-up: a Coordinator on the in-memory twins, with a clock the test drives and telemetry it
 * reads. The job: a source of `sourceShards` shards keyed into `parallelism` instances, a collect
 * sink. Instances are played through the control store's own calls, as a stage instance makes them.
 */
import { collectSink, job } from '../api/index.js';
import { memoryCoordinator } from '../adapters/memory/checkpoint-store.js';
import { createJobStreams, createMemoryPorts, type MemoryPorts } from '../adapters/memory/memory-ports.js';
import { CountingTelemetry } from '../adapters/telemetry.js';
import { decodeSourceControl, type SourceControl } from '../codec/envelope.js';
import { encodeDelta } from '../codec/snapshot.js';
import { planJob } from '../plan/planner.js';
import { resourceNames } from '../plan/resources.js';
import type { CommitTarget } from './protocol.js';

export const T0 = 1_700_000_000_000;
/** the job's checkpoint.timeoutMs */
export const TIMEOUT = 1_000;

export interface TwinsOptions {
  readonly sourceShards?: number;
  readonly parallelism?: number;
  readonly maxConcurrent?: number;
  readonly commitTargets?: readonly CommitTarget[];
}

export function coordinatorOnTwins(options: TwinsOptions = {}) {
  const j = job('twins', { maxParallelism: 8, checkpoint: { timeoutMs: TIMEOUT, ...(options.maxConcurrent ? { maxConcurrent: options.maxConcurrent } : {}) } });
  j.source<{ k: string }>({ name: 'in', shards: options.sourceShards ?? 2 })
    .keyBy((x) => x.k, { parallelism: options.parallelism ?? 3 })
    .process({ processElement() {} })
    .sinkTo(collectSink('out'));
  const plan = planJob(j);
  const names = resourceNames(plan, 'test');
  const m = createMemoryPorts();
  createJobStreams(m.kinesis, plan, names);
  const clock = { now: T0 };
  const logs: Array<{ level: string; message: string; [field: string]: unknown }> = [];
  const telemetry = new CountingTelemetry((line) => logs.push(JSON.parse(line) as (typeof logs)[number]), 'debug');
  const coord = memoryCoordinator(plan, names, m, options.commitTargets ?? [], () => new Date(clock.now), { telemetry });
  const src = names.streamOf(plan.stages[0]!);
  const inner = names.streamOf(plan.stages[1]!);
  const openShards = (stream: string) => m.kinesis.listShards(stream).filter((s) => s.endingSequenceNumber === undefined);
  /** the control messages each open shard of a stream holds, in order */
  const controls = (stream = src): Array<Array<SourceControl | undefined>> => openShards(stream).map((s) => m.kinesis.records(stream, s.shardId).map((r) => decodeSourceControl(r.data)));
  /** barrier checkpoint ids each open source shard holds, in order */
  const barriers = () => controls().map((c) => c.map((x) => (x?.kind === 'barrier' ? x.checkpointId : undefined)));
  const ackAll = async (n: number) => {
    for (const id of (await coord.get(n))!.missing!) await m.control.ack(n, id);
  };
  return { coord, m, store: coord.ports.store, clock, telemetry, logs, plan, names, src, inner, openShards, controls, barriers, ackAll };
}

export type Twins = ReturnType<typeof coordinatorOnTwins>;

const fences = new WeakMap<MemoryPorts, Map<string, number>>();

/** Instance `id` writes a delta of checkpoint n, publishes its snapshot of n with `meta`, and acks n. */
export async function snapshotAndAck(m: MemoryPorts, n: number, id: string, meta: Record<string, unknown> = {}): Promise<void> {
  let f = fences.get(m);
  if (!f) fences.set(m, (f = new Map()));
  const fence = f.get(id) ?? (await m.control.takeOver(id, 0)).fence;
  f.set(id, fence);
  const bytes = encodeDelta([], { timers: [], channels: [], watermark: null, processingTime: n, source: null, ended: [] });
  const delta = await m.control.writeDelta(id, n, bytes);
  await m.control.publishSnapshot(id, fence, { checkpointId: n, replayPoint: { from: 'after', sequenceNumber: String(n) }, delta, meta });
  await m.control.ack(n, id);
}
