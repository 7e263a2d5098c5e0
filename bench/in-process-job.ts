/**
 * A planned job run in this process on the in-memory twins, the way the deployed stack runs it:
 * each stage's shards read in ESM-sized batches by the stage's StageRunner, checkpoints allocated,
 * injected, awaited and committed by the shipping coordinator. The pipeline and Nexmark benches
 * drive their input through it; each batch's wall and CPU time is handed to `onBatch`.
 */
import { performance } from 'node:perf_hooks';
import type { CommitTarget } from '../shared/coordinator/protocol.js';
import { memoryCoordinator } from '../shared/adapters/memory/checkpoint-store.js';
import { createJobStreams, type MemoryPorts } from '../shared/adapters/memory/memory-ports.js';
import type { Job } from '../shared/api/job.js';
import type { Plan } from '../shared/plan/plan.js';
import { resourceNames, type ResourceNames } from '../shared/plan/resources.js';
import type { RuntimePorts } from '../shared/runtime/ports.js';
import { createStageRunner } from '../shared/runtime/stage-runner.js';

export interface InProcessJobOptions {
  readonly job: Job;
  readonly plan: Plan;
  readonly mem: MemoryPorts;
  /** the stages' ports (the twins', possibly metered or with another state store) */
  readonly ports: RuntimePorts;
  /** records per ESM batch */
  readonly batch: number;
  readonly commitTargets?: readonly CommitTarget[];
  readonly now: () => Date;
  /** called before each batch with the stage's index */
  readonly onBatchStart?: (stage: number) => void;
  /** called after each batch with the stage's index, the batch's size and its wall and CPU time */
  readonly onBatch?: (stage: number, records: number, wallMs: number, cpuMs: number) => void;
}

export class InProcessJob {
  readonly names: ResourceNames;
  readonly coordinator: ReturnType<typeof memoryCoordinator>;
  private readonly runners;
  /** records each stage has consumed per shard (the twins' streams only grow) */
  private readonly consumed = new Map<string, number>();

  constructor(private readonly o: InProcessJobOptions) {
    this.names = resourceNames(o.plan);
    createJobStreams(o.mem.kinesis, o.plan, this.names);
    this.coordinator = memoryCoordinator(o.plan, this.names, o.mem, o.commitTargets ?? [], o.now);
    this.runners = o.plan.stages.map((stage) => createStageRunner({ job: o.job, plan: o.plan, stage, names: this.names, ports: o.ports }));
  }

  /** One ESM poll of every shard of stage `i`: all it has not read yet, in batches; true when it read any. */
  async runStage(i: number): Promise<boolean> {
    const stream = this.names.streamOf(this.o.plan.stages[i]!);
    let progressed = false;
    for (const shard of this.o.mem.kinesis.listShards(stream)) {
      const key = `${stream}/${shard.shardId}`;
      const all = this.o.mem.kinesis.records(stream, shard.shardId);
      for (let b = this.consumed.get(key) ?? 0; b < all.length; b += this.o.batch) {
        const batch = all.slice(b, b + this.o.batch);
        this.o.onBatchStart?.(i);
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await this.runners[i]!.run(shard.shardId, batch);
        const wallMs = performance.now() - t0;
        const c = process.cpuUsage(c0);
        this.o.onBatch?.(i, batch.length, wallMs, (c.user + c.system) / 1000);
        this.consumed.set(key, b + batch.length);
        progressed = true;
      }
    }
    return progressed;
  }

  /** Every stage in turn until none has anything left to read. */
  async runAll(): Promise<void> {
    for (let progressed = true; progressed; ) {
      progressed = false;
      for (let i = 0; i < this.o.plan.stages.length; i++) if (await this.runStage(i)) progressed = true;
    }
  }

  /** A whole checkpoint: allocate, inject, await, run the stages until its barriers crossed, commit. */
  async checkpoint(onAllocated?: (n: number, topology: readonly number[]) => void): Promise<number> {
    const c = this.coordinator;
    const { checkpointId: n } = await c.allocate();
    if (onAllocated) onAllocated(n, (await c.get(n))!.topology);
    await c.inject(n);
    await c.await(n, `token-${n}`);
    await this.runAll();
    const ck = (await c.get(n))!;
    if (!ck.complete) throw new Error(`in-process job ${this.o.job.name}: checkpoint ${n} has ${ck.acks} of ${ck.expected} acks`);
    await c.commit(n);
    return n;
  }
}
