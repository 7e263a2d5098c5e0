/**
 * The keyed stage over pre-encoded input, on any ports (in-memory twins or the emulated AWS stack):
 * batches and checkpoints timed, then an instance lost (a fresh StageRunner: the environment's cache
 * is gone) and the next batch timed — restore from the last snapshot, replay of the shard since its
 * replay point, then the batch itself — against reading the same range raw.
 */
import { performance } from 'node:perf_hooks';
import type { Job } from '../shared/api/job.js';
import type { Plan, PlanStage } from '../shared/plan/plan.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import type { RuntimePorts, StoredRecord } from '../shared/runtime/ports.js';
import { createStageRunner } from '../shared/runtime/stage-runner.js';
import type { LoadedRound } from './stage1-input.js';

export interface Stage1Env {
  readonly job: Job;
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly stage: PlanStage;
  readonly stream: string;
  readonly shardId: string;
  readonly ports: RuntimePorts;
  readonly rounds: readonly LoadedRound[];
}

/** Wall time spent inside each port operation (to say what a restore waits on). */
export class PortTimer {
  readonly ms = new Map<string, number>();
  readonly calls = new Map<string, number>();
  add(op: string, ms: number): void {
    this.ms.set(op, (this.ms.get(op) ?? 0) + ms);
    this.calls.set(op, (this.calls.get(op) ?? 0) + 1);
  }
  reset(): void {
    this.ms.clear();
    this.calls.clear();
  }
  toJSON(): Record<string, { ms: number; calls: number }> {
    return Object.fromEntries([...this.ms].map(([k, v]) => [k, { ms: Math.round(v * 10) / 10, calls: this.calls.get(k) ?? 0 }]));
  }
}

export function timePorts(ports: RuntimePorts, t: PortTimer): RuntimePorts {
  const wrap = <A extends unknown[], R>(op: string, fn: (...a: A) => Promise<R>) => async (...a: A): Promise<R> => {
    const t0 = performance.now();
    try {
      return await fn(...a);
    } finally {
      t.add(op, performance.now() - t0);
    }
  };
  const { control: c, state: s, writer: w, reader: r } = ports;
  return {
    ...ports,
    control: {
      readLease: wrap('control.readLease', (id: string) => c.readLease(id)),
      takeOver: wrap('control.takeOver', (id: string, f: number) => c.takeOver(id, f)),
      writeDelta: wrap('control.writeDelta', (id: string, n: number, d: Uint8Array) => c.writeDelta(id, n, d)),
      readDelta: wrap('control.readDelta', (ref: Parameters<typeof c.readDelta>[0]) => c.readDelta(ref)),
      publishSnapshot: wrap('control.publishSnapshot', (id: string, f: number, p: Parameters<typeof c.publishSnapshot>[2]) => c.publishSnapshot(id, f, p)),
      commitPosition: wrap('control.commitPosition', (id: string, f: number, p: string) => c.commitPosition(id, f, p)),
      ack: wrap('control.ack', (n: number, id: string) => c.ack(n, id)),
    },
    state: {
      getRows: wrap('state.getRows', (ids: Parameters<typeof s.getRows>[0]) => s.getRows(ids)),
      applyRows: wrap('state.applyRows', (n: number, f: number, rows: Parameters<typeof s.applyRows>[2]) => s.applyRows(n, f, rows)),
    },
    writer: { putAll: wrap('writer.putAll', (st: string, recs: Parameters<typeof w.putAll>[1]) => w.putAll(st, recs)) },
    reader: {
      read(stream, shardId, from, until) {
        const inner = r.read(stream, shardId, from, until);
        return (async function* () {
          const it = inner[Symbol.asyncIterator]();
          for (;;) {
            const t0 = performance.now();
            const n = await it.next();
            t.add('reader.read', performance.now() - t0);
            if (n.done) return;
            yield n.value;
          }
        })();
      },
    },
  };
}

export interface ScenarioOptions {
  /** rounds (epoch + barrier) processed before the loss */
  readonly rounds: number;
  /** batches processed after the last checkpoint, before the loss: what recovery must replay */
  readonly tailBatches: number;
  /** rounds not timed (JIT warm-up) */
  readonly warmup: number;
}

export interface ScenarioResult {
  readonly batchMs: number[];
  readonly eventsPerBatch: number;
  readonly checkpointMs: number[];
  readonly recovery: {
    /** the first batch on a fresh runner: restore + replay + the batch */
    readonly ms: number;
    readonly replayedRecords: number;
    readonly replayedEvents: number;
    readonly ports: Record<string, { ms: number; calls: number }>;
    /** the same range read with the ports' reader, nothing else */
    readonly rawReadMs: number;
    /** processing that range on the warm instance before the loss took */
    readonly liveMs: number;
  };
}

export async function runScenario(env: Stage1Env, o: ScenarioOptions, timer?: PortTimer): Promise<ScenarioResult> {
  const need = o.rounds + 1;
  if (env.rounds.length < need) throw new Error(`scenario needs ${need} rounds, has ${env.rounds.length}`);
  let runner = createStageRunner(env);
  const batchMs: number[] = [];
  const checkpointMs: number[] = [];
  for (let r = 0; r < o.rounds; r++) {
    const round = env.rounds[r]!;
    for (const b of round.batches) {
      const t0 = performance.now();
      await runner.run(env.shardId, b);
      if (r >= o.warmup) batchMs.push(performance.now() - t0);
    }
    const t0 = performance.now();
    await runner.run(env.shardId, round.barrier);
    if (r >= o.warmup) checkpointMs.push(performance.now() - t0);
  }
  // the tail: processed, not yet in a snapshot
  const tail = env.rounds[o.rounds]!;
  if (tail.batches.length < o.tailBatches + 1) throw new Error('scenario: the tail round needs more batches');
  let liveMs = 0;
  let tailRecords: StoredRecord[] = [];
  for (let i = 0; i < o.tailBatches; i++) {
    const b = tail.batches[i]!;
    tailRecords = tailRecords.concat(b);
    const t0 = performance.now();
    await runner.run(env.shardId, b);
    liveMs += performance.now() - t0;
  }
  // the environment is lost: a new runner has no cache
  runner = createStageRunner(env);
  timer?.reset();
  const next = tail.batches[o.tailBatches]!;
  const t0 = performance.now();
  const outcome = await runner.run(env.shardId, next);
  const ms = performance.now() - t0;
  const ports = timer?.toJSON() ?? {};
  // raw read of the replayed range: from the last snapshot's barrier to the batch
  const barrierSeq = env.rounds[o.rounds - 1]!.barrier[0]!.sequenceNumber;
  const r0 = performance.now();
  let raw = 0;
  for await (const page of env.ports.reader.read(env.stream, env.shardId, { from: 'after', sequenceNumber: barrierSeq }, next[0]!.sequenceNumber)) raw += page.length;
  const rawReadMs = performance.now() - r0;
  if (raw !== tailRecords.length) throw new Error(`scenario: raw read ${raw} records, expected ${tailRecords.length}`);
  const eventsPerBatch = tail.events / tail.batches.length;
  return {
    batchMs,
    eventsPerBatch,
    checkpointMs,
    recovery: { ms, replayedRecords: outcome.replayed, replayedEvents: outcome.replayed * (eventsPerBatch / next.length), ports, rawReadMs, liveMs },
  };
}

export interface LatencyModel {
  /** one DynamoDB request (GetItem, UpdateItem, PutItem, one BatchGetItem of ≤ 100 keys) */
  readonly dynamoMs: number;
  /** one Kinesis GetRecords page */
  readonly kinesisGetMs: number;
  /** one PutRecords request */
  readonly kinesisPutMs: number;
}

const wait = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The in-memory twins with AWS-like request latencies (an assumption, not a measurement): what the
 * engine waits on when it restores, and whether it waits on requests one after another or at once.
 * A state read costs one BatchGetItem latency per 100 keys *of that call* (the DynamoDB adapter
 * reads a call's chunks one after another); a state write 32 UpdateItems at a time.
 */
export function withLatency(ports: RuntimePorts, m: LatencyModel): RuntimePorts {
  const { control: c, state: s, writer: w, reader: r } = ports;
  const d = <A extends unknown[], R>(fn: (...a: A) => Promise<R>) => async (...a: A): Promise<R> => {
    await wait(m.dynamoMs);
    return fn(...a);
  };
  return {
    ...ports,
    control: {
      readLease: d((id: string) => c.readLease(id)),
      takeOver: d((id: string, f: number) => c.takeOver(id, f)),
      writeDelta: d((id: string, n: number, x: Uint8Array) => c.writeDelta(id, n, x)),
      readDelta: d((ref: Parameters<typeof c.readDelta>[0]) => c.readDelta(ref)),
      publishSnapshot: d((id: string, f: number, p: Parameters<typeof c.publishSnapshot>[2]) => c.publishSnapshot(id, f, p)),
      commitPosition: d((id: string, f: number, p: string) => c.commitPosition(id, f, p)),
      ack: d((n: number, id: string) => c.ack(n, id)),
    },
    state: {
      async getRows(ids) {
        await wait(Math.ceil(ids.length / 100) * m.dynamoMs);
        return s.getRows(ids);
      },
      async applyRows(n, f, rows) {
        await wait(Math.ceil(rows.length / 32) * m.dynamoMs);
        return s.applyRows(n, f, rows);
      },
    },
    writer: {
      async putAll(stream, records) {
        await wait(m.kinesisPutMs);
        return w.putAll(stream, records);
      },
    },
    reader: {
      read(stream, shardId, from, until) {
        const inner = r.read(stream, shardId, from, until);
        return (async function* () {
          for await (const page of inner) {
            await wait(m.kinesisGetMs);
            yield page;
          }
        })();
      },
    },
  };
}
