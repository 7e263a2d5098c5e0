/**
 * Runs a whole job in this process on the in-memory twins of the ports: the real StageRunner and
 * StageInstance, fed by a small event-source loop (batches per shard, routed over several simulated
 * environments) and checkpointed by the shipping Coordinator over the twins' ports. For unit tests
 * of jobs, for the determinism check users run on their own functions, and for benchmarks of the
 * hot path.
 */
import type { Job } from '../api/job.js';
import { CollectRegistry } from '../adapters/memory/collect-registry.js';
import { memoryCoordinator } from '../adapters/memory/checkpoint-store.js';
import { createJobStreams, createMemoryPorts, prng, type MemoryPorts } from '../adapters/memory/memory-ports.js';
import { encodeSourceControl } from '../codec/envelope.js';
import type { Plan, PlanStage } from '../plan/plan.js';
import { planJob } from '../plan/planner.js';
import { resourceNames, type ResourceNames } from '../plan/resources.js';
import type { RuntimePorts } from '../runtime/ports.js';
import { compareSeq } from '../runtime/positions.js';
import { createStageRunner, type BatchOutcome, type StageRunner, type StageRunnerOptions } from '../runtime/stage-runner.js';
import { SpillingStateStore } from '../runtime/spilling-state-store.js';
import { MemoryBlobStore } from '../adapters/memory/memory-objects.js';

/** Blobs in memory (the S3 of the twins). */
export { MemoryBlobStore };

export interface MemoryJobRunnerOptions {
  /** @default 1 */
  readonly seed?: number;
  /** records per batch; @default 100 */
  readonly batchSize?: number;
  /** simulated environments per stage; @default 1 */
  readonly environments?: number;
  /** chance an environment loses its caches before a batch; @default 0 */
  readonly recycleProbability?: number;
  /** the coordinator's clock (barriers carry it); @default a counter starting at 0 that steps 1 s per checkpoint */
  readonly now?: () => number;
  readonly runner?: StageRunnerOptions;
  /** runs after each batch with its outcome, as a stage function does (the wake-up of a parked coordinator) */
  readonly afterBatch?: (outcome: BatchOutcome) => Promise<unknown>;
}

interface Cursor {
  last: string | undefined;
}

export class MemoryJobRunner {
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly mem: MemoryPorts;
  readonly collect = new CollectRegistry();
  /** the shipping Coordinator; its ports are the twins' (`coordinator.ports`) */
  readonly coordinator: ReturnType<typeof memoryCoordinator>;
  private readonly envs = new Map<string, StageRunner[]>();
  private readonly cursors = new Map<string, Cursor>();
  private readonly rnd: () => number;
  private clock = 0;
  batches = 0;

  constructor(
    readonly job: Job,
    private readonly options: MemoryJobRunnerOptions = {},
  ) {
    this.plan = planJob(job);
    this.names = resourceNames(this.plan);
    this.mem = createMemoryPorts({ seed: options.seed ?? 1, collect: this.collect });
    createJobStreams(this.mem.kinesis, this.plan, this.names);
    this.rnd = prng(options.seed ?? 1);
    const now = options.now ?? (() => this.clock);
    const state = this.ports.state as SpillingStateStore;
    // savepoints read the state as the instances wrote it, spilled values included
    this.coordinator = memoryCoordinator(this.plan, this.names, this.mem, [this.collect], () => new Date(now()), { state });
    for (const stage of this.plan.stages) {
      this.envs.set(
        stage.id,
        Array.from({ length: options.environments ?? 1 }, () => this.newRunner(stage)),
      );
    }
  }

  private newRunner(stage: PlanStage): StageRunner {
    return createStageRunner({ job: this.job, plan: this.plan, stage, names: this.names, ports: this.ports, options: this.options.runner });
  }

  /** The twins' ports, with large state spilling to an in-memory blob store as it does to S3 on AWS. */
  private get ports(): RuntimePorts {
    return (this.portsCache ??= { ...this.mem.ports, state: new SpillingStateStore(this.mem.ports.state, this.blobs) });
  }
  private portsCache: RuntimePorts | undefined;
  readonly blobs = new MemoryBlobStore();

  /** Puts user records on a source stream (JSON for json sources unless already bytes), spread over its shards. */
  produce(sourceName: string, records: readonly unknown[], options: { partitionKey?: (record: unknown) => string } = {}): void {
    const src = this.plan.sources.find((s) => s.name === sourceName);
    if (!src) throw new Error(`job "${this.plan.job}" has no source "${sourceName}"`);
    const stream = this.names.sourceStream(src);
    for (let i = 0; i < records.length; i += 500) this.putChunk(stream, src.format, records.slice(i, i + 500), options.partitionKey);
  }

  private putChunk(stream: string, format: string, records: readonly unknown[], partitionKey?: (record: unknown) => string): void {
    const enc = new TextEncoder();
    this.mem.kinesis.putRecords(
      stream,
      records.map((r, i) => ({
        data: r instanceof Uint8Array ? r : enc.encode(typeof r === 'string' && format !== 'json' ? r : JSON.stringify(r)),
        partitionKey: partitionKey ? partitionKey(r) : `p${i}-${Math.floor(this.rnd() * 1e9)}`,
      })),
    );
  }

  /** Ends every source: a final watermark fires all windows. */
  endOfInput(): void {
    for (const stage of this.plan.stages) {
      if (stage.input.kind !== 'source') continue;
      const stream = this.names.streamOf(stage);
      for (const s of this.mem.kinesis.listShards(stream)) {
        this.mem.kinesis.putRecord(stream, { data: encodeSourceControl({ kind: 'end' }), partitionKey: 'end', explicitHashKey: s.startingHashKey });
      }
    }
  }

  /** Processes every stage until no shard has unread records. */
  async runUntilIdle(): Promise<void> {
    for (let progressed = true; progressed; ) {
      progressed = false;
      for (const stage of this.plan.stages) {
        const stream = this.names.streamOf(stage);
        for (const shard of this.mem.kinesis.listShards(stream)) {
          const key = `${stream}/${shard.shardId}`;
          let cur = this.cursors.get(key);
          if (!cur) this.cursors.set(key, (cur = { last: undefined }));
          const all = this.mem.kinesis.records(stream, shard.shardId);
          const fresh = cur.last === undefined ? all : all.filter((r) => compareSeq(r.sequenceNumber, cur!.last!) > 0);
          const batchSize = this.options.batchSize ?? 100;
          for (let i = 0; i < fresh.length; i += batchSize) {
            const batch = fresh.slice(i, i + batchSize);
            const envs = this.envs.get(stage.id)!;
            const at = Math.floor(this.rnd() * envs.length);
            if (this.rnd() < (this.options.recycleProbability ?? 0)) envs[at] = this.newRunner(stage);
            const out = await envs[at]!.run(shard.shardId, batch);
            await this.options.afterBatch?.(out);
            this.batches++;
            cur.last = batch[batch.length - 1]!.sequenceNumber;
            progressed = true;
          }
        }
      }
    }
  }

  /** Takes one checkpoint: barriers in, every instance aligned and acked, then commit. */
  async checkpoint(): Promise<number> {
    this.clock += 1000;
    const { checkpointId: n } = await this.coordinator.allocate();
    await this.coordinator.inject(n);
    await this.coordinator.await(n, `token-${n}`);
    await this.runUntilIdle();
    const ck = (await this.coordinator.get(n))!;
    if (!ck.complete) throw new Error(`checkpoint ${n}: ${ck.acks} of ${ck.expected} instances acked after the input was drained (missing: ${ck.missing?.join(', ')})`);
    await this.coordinator.commit(n);
    return n;
  }

  /** Runs the input produced so far to the end and commits a checkpoint covering it. */
  async drain(): Promise<void> {
    await this.runUntilIdle();
    await this.checkpoint();
  }

  published<T = unknown>(sink: string): T[] {
    return this.collect.published<T>(sink);
  }

  upserts(sink: string): Map<string, Record<string, unknown>> {
    const spec = this.plan.sinks.find((s) => s.name === sink);
    if (!spec) throw new Error(`job "${this.plan.job}" has no sink "${sink}"`);
    return this.mem.upsertSink.table(this.names.sinkTable(spec));
  }

  deadLetters() {
    return [...this.mem.deadLetters.letters.values()];
  }
}
