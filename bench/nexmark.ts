/**
 * Nexmark queries (examples/nexmark/sql) as whole jobs in this process: the SQL compiled by the
 * project's compiler, every stage run by its StageRunner on the in-memory twins, checkpoints taken
 * by the Coordinator on the in-memory twins at a fixed interval of input events, the input ended and drained;
 * the state store is the deployed stack without history (handler.ts, `benchStateStore`).
 * The figure is events per second per core: events fed ÷ the CPU time of every stage's batches
 * (all threads of the process, so GC helpers count), the same accounting as Nexmark's
 * "Throughput/Cores" (events ÷ (cores × time)).
 *
 * Left out: the producers (records are put on the source streams before the clock runs), the
 * coordinator's own work, the twins' Kinesis (a Map of arrays; PutRecords and GetRecords on AWS are
 * network calls: a batch's records are handed to the stage, and the CPU of the twin's own
 * `putRecords` — copying, MD5 of partition keys, sequence numbers — is timed and taken off the
 * batch's) — but not the engine's packing, writers and unpacking, which run inside the stages.
 */
import { readFileSync } from 'node:fs';
import { CollectRegistry } from '../shared/adapters/memory/collect-registry.js';
import { createMemoryPorts } from '../shared/adapters/memory/memory-ports.js';
import { encodeSourceControl } from '../shared/codec/envelope.js';
import { planJob } from '../shared/plan/planner.js';
import { compileSql } from '../shared/sql/index.js';
import { generateNexmark, type NexmarkEvent } from '../examples/nexmark/generator.js';
import { benchStateStore } from './handler.js';
import { InProcessJob } from './in-process-job.js';

export const NEXMARK_QUERIES = ['q0', 'q1', 'q2', 'q5', 'q7', 'q8'] as const;
export type NexmarkQuery = (typeof NEXMARK_QUERIES)[number];

/**
 * Flink 1.13's published Nexmark results, Throughput/Cores (events/s per core): the nexmark/nexmark
 * project's README, "Nexmark Benchmark Result" (3 workers × 8 cores, parallelism 8, 100 M events
 * from the in-job datagen source, 92 % bids, RocksDB with incremental checkpoints every 3 min,
 * mini-batch on). Its events count every kind generated, its CPU every worker's.
 */
export const FLINK_PER_CORE: Record<NexmarkQuery, number> = { q0: 155_020, q1: 157_940, q2: 175_210, q5: 22_140, q7: 12_330, q8: 146_140 };

export interface NexmarkFigures {
  readonly query: NexmarkQuery;
  /** events fed to the job's sources (the kinds the query reads) */
  readonly events: number;
  /** events generated (all kinds; what Flink's figure counts) */
  readonly generated: number;
  readonly stages: number;
  readonly checkpoints: number;
  readonly cpuMs: number;
  /** `cpuMs` by stage, in the plan's order */
  readonly stageCpuMs: readonly number[];
  /** records each stage read (control records included), in the plan's order */
  readonly stageRecords: readonly number[];
  readonly wallMs: number;
  /** events fed ÷ CPU seconds of all stages */
  readonly epsPerCore: number;
  /** `epsPerCore` of a first run of the same job in the process (its code not optimized yet), when one came before */
  readonly firstRunEpsPerCore?: number;
  /** CPU of the twins' Kinesis `putRecords` during the stages' batches, left out of `cpuMs` */
  readonly twinKinesisCpuMs: number;
  /** events fed ÷ wall seconds of all stages (one after another, one core) */
  readonly eps: number;
  readonly outputs: number;
  readonly flinkPerCore: number;
}

export interface NexmarkOptions {
  readonly events: number;
  /** input events between checkpoints */
  readonly checkpointEvery: number;
  /** records per ESM batch (the CDK construct's default is 500) */
  readonly batch: number;
  /** event time rate of the generator */
  readonly ratePerSecond: number;
  readonly seed?: number;
}

export async function runNexmark(query: NexmarkQuery, o: NexmarkOptions, all?: readonly NexmarkEvent[]): Promise<NexmarkFigures> {
  const compiled = compileSql(readFileSync(new URL(`../examples/nexmark/sql/${query}.sql`, import.meta.url), 'utf8'), { name: query, origin: `${query}.sql` });
  const job = compiled.job;
  const plan = planJob(job);
  const collect = new CollectRegistry();
  let clock = Date.UTC(2026, 0, 1);
  const mem = createMemoryPorts({ seed: o.seed ?? 1, collect, now: () => clock });
  let cpuMs = 0;
  const stageCpuMs = plan.stages.map(() => 0);
  const stageRecords = plan.stages.map(() => 0);
  let wallMs = 0;
  // the twin's own PutRecords work during a batch, timed to be taken off the batch's CPU
  let inBatch = false;
  let twinMs = 0;
  let twinKinesisCpuMs = 0;
  const twinPut = mem.kinesis.putRecords.bind(mem.kinesis);
  mem.kinesis.putRecords = (stream, entries, attempt) => {
    if (!inBatch) return twinPut(stream, entries, attempt);
    const c0 = process.cpuUsage();
    try {
      return twinPut(stream, entries, attempt);
    } finally {
      const c = process.cpuUsage(c0);
      twinMs += (c.user + c.system) / 1000;
    }
  };
  const run = new InProcessJob({
    job,
    plan,
    mem,
    ports: { ...mem.ports, state: benchStateStore() },
    batch: o.batch,
    commitTargets: [collect],
    now: () => new Date(clock),
    onBatchStart: () => {
      inBatch = true;
      twinMs = 0;
    },
    onBatch: (i, n, wall, cpu) => {
      stageRecords[i] = stageRecords[i]! + n;
      inBatch = false;
      wallMs += wall;
      cpuMs += cpu - twinMs;
      stageCpuMs[i] = stageCpuMs[i]! + cpu - twinMs;
      twinKinesisCpuMs += twinMs;
    },
  });
  const names = run.names;
  let checkpoints = 0;
  const checkpoint = async () => {
    clock += 1000;
    await run.checkpoint();
    checkpoints++;
  };

  const generated = all ?? generateNexmark({ seed: o.seed ?? 1, events: o.events, ratePerSecond: o.ratePerSecond });
  const wanted = new Set(compiled.sources);
  const enc = new TextEncoder();
  let fed = 0;
  let sinceCheckpoint = 0;
  let rnd = 0;
  const chunk = 500;
  for (let i = 0; i < generated.length; i += chunk) {
    const byKind = new Map<string, Uint8Array[]>();
    for (const e of generated.slice(i, i + chunk)) {
      if (!wanted.has(e.kind)) continue;
      let l = byKind.get(e.kind);
      if (!l) byKind.set(e.kind, (l = []));
      l.push(enc.encode(JSON.stringify(e.value)));
    }
    for (const [kind, recs] of byKind) {
      const src = plan.sources.find((s) => s.name === kind)!;
      mem.kinesis.putRecords(names.sourceStream(src), recs.map((data) => ({ data, partitionKey: `p${(rnd = (rnd * 1103515245 + 12345) >>> 0)}` })));
      fed += recs.length;
      sinceCheckpoint += recs.length;
    }
    await run.runAll();
    if (sinceCheckpoint >= o.checkpointEvery) {
      await checkpoint();
      sinceCheckpoint = 0;
    }
  }
  for (const stage of plan.stages) {
    if (stage.input.kind !== 'source') continue;
    const stream = names.streamOf(stage);
    for (const s of mem.kinesis.listShards(stream)) mem.kinesis.putRecord(stream, { data: encodeSourceControl({ kind: 'end' }), partitionKey: 'end', explicitHashKey: s.startingHashKey });
  }
  await run.runAll();
  await checkpoint();
  const sink = compiled.sinks[0]!;
  const outputs = sink.updating ? mem.upsertSink.table(names.sinkTable(plan.sinks.find((s) => s.name === sink.name)!)).size : collect.published(sink.name).length;
  return {
    query,
    events: fed,
    generated: generated.length,
    stages: plan.stages.length,
    checkpoints,
    cpuMs,
    stageCpuMs,
    stageRecords,
    wallMs,
    epsPerCore: fed / (cpuMs / 1000),
    twinKinesisCpuMs,
    eps: fed / (wallMs / 1000),
    outputs,
    flinkPerCore: FLINK_PER_CORE[query],
  };
}
