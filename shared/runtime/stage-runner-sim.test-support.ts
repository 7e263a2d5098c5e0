/**
 * The driver of the StageRunner protocol tests (stage-runner.test.ts, stage-runner.property.test.ts).
 *
 * A small driver plays the two things around the engine: the event source mapping (it reads each
 * shard in batches of random size, hands each batch to one of several StageRunner objects — the
 * "execution environments" — and retries a batch that threw) and the coordinator (it injects
 * barriers into every source shard, waits for the ack set, commits by publishing the collect sink,
 * aborts on timeout). Faults are injected per environment (crash before/after any port call, a
 * lost environment, a zombie that resumes after another environment took the lease over) and in
 * the services (PutRecords partial failures, throttling).
 *
 * The oracle and the invariant checks are in stage-runner-sim-checks.test-support.ts, the zombies
 * (one retry, or a stall while the mapping and the coordinator go on) in
 * stage-runner-sim-zombies.test-support.ts, the property tests' seeded scenarios in
 * stage-runner-sim-scenario.test-support.ts.
 */
import { collectSink, dynamoUpsertSink, job, valueState } from '../api/index.js';
import type { Job } from '../api/job.js';
import {
  createJobStreams,
  createMemoryPorts,
  prng,
  throttled,
  withHooks,
  type MemoryPorts,
  type PortOp,
} from '../adapters/memory/memory-ports.js';
import { memoryCoordinator } from '../adapters/memory/checkpoint-store.js';
import { MemorySourceBarrierStore } from '../adapters/memory/source-barriers.js';
import { decodePacket } from '../codec/envelope.js';
import { hashKeyOfEvenShard } from '../plan/key-groups.js';
import type { Plan, PlanStage } from '../plan/plan.js';
import { planJob } from '../plan/planner.js';
import { resourceNames, type ResourceNames } from '../plan/resources.js';
import { FencedError } from '../util/errors.js';
import type { RuntimePorts, StoredRecord } from './ports.js';
import { checkCommitted, checkFinal, checkPublished, checkStateReads, oracle, skippedBefore, watchStateReads, type StateRead } from './stage-runner-sim-checks.test-support.js';
import { StageRunner, type BatchOutcome, type StageRunnerOptions } from './stage-runner.js';

// ------------------------------------------------------------------------------------------ the job

export interface Ev {
  readonly user: string;
  readonly v: number;
  readonly ts: number;
  readonly skip?: boolean;
  /** bulk, to make large packets */
  readonly pad?: string;
}

export interface Total {
  readonly user: string;
  readonly count: number;
  readonly sum: number;
  /** ctx.random(): must replay identically */
  readonly r: number;
}

export const totals = valueState<{ count: number; sum: number }>('totals');

export function buildJob(sourceShards: number, parallelism: number, maxParallelism: number, materializeEvery?: number): Job {
  const j = job('proto', { maxParallelism, poisonPolicy: 'dead-letter', ...(materializeEvery ? { checkpoint: { materializeEvery } } : {}) });
  const events = j.source<Ev>({
    name: 'events',
    shards: sourceShards,
    parse: (raw) => {
      const e = raw as Partial<Ev> | null;
      if (!e || typeof e.user !== 'string' || typeof e.v !== 'number' || typeof e.ts !== 'number') throw new Error('not an event');
      return e as Ev;
    },
    timestamp: (e) => e.ts,
  });
  events.filter((e) => e.skip === true, { name: 'skipped' }).sinkTo(collectSink<Ev>('skipped'));
  const out = events
    .filter((e) => e.skip !== true, { name: 'kept' })
    .keyBy((e) => e.user, { parallelism })
    .process<Total>(
      {
        state: [totals],
        processElement(e, ctx, collector) {
          const s = ctx.getState(totals);
          const prev = s.value() ?? { count: 0, sum: 0 };
          const next = { count: prev.count + 1, sum: prev.sum + e.v };
          s.update(next);
          collector.collect({ user: e.user, count: next.count, sum: next.sum, r: ctx.random() });
        },
      },
      { name: 'totals' },
    );
  out.sinkTo(dynamoUpsertSink<Total>({ name: 'totals', key: (t) => t.user }));
  out.sinkTo(collectSink<Total>('updates'));
  return j;
}

// ------------------------------------------------------------------------------------------ the driver

export class InjectedCrash extends Error {
  override readonly name = 'InjectedCrash';
}

export interface Env {
  readonly id: string;
  readonly stage: PlanStage;
  runner: StageRunner;
  readonly ports: RuntimePorts;
  /** port calls in the current run */
  ops: number;
  /** probability of a crash before / after each port call */
  crashP: number;
  /** block the run at this port call (0 = the first) until released */
  gateAt: number | undefined;
  gate: Promise<void> | undefined;
  onGate: (() => void) | undefined;
  /** port calls of the current run, for diagnostics */
  trace: PortOp[];
}

export interface Produced {
  readonly shardId: string;
  readonly seq: string;
  readonly kind: 'ok' | 'skip' | 'poison';
  readonly ev?: Ev;
}

export interface SimOptions {
  readonly seed: number;
  readonly sourceShards: number;
  readonly parallelism: number;
  readonly maxParallelism: number;
  readonly envsPerStage: number;
  readonly users: number;
  readonly maxBatch: number;
  readonly pageSize: number;
  /** per entry, PutRecords to the inner stream rejects it (first 3 attempts) */
  readonly putRejectP: number;
  /** per port call, an environment crashes before or after it */
  readonly crashP: number;
  /** per service call, the service throttles (retried inside) */
  readonly throttleP: number;
  /** a crash point the run hits often: `before:op` or `after:op`, crashed with probability 0.3 */
  readonly focus?: string;
  readonly runner?: StageRunnerOptions;
  /** sources put barriers at their read position (source-barriers.ts), not where the coordinator appended them */
  readonly sourceBarriers?: boolean;
  /** the plan's checkpoint.materializeEvery; absent: its default (6 at the default 10 s interval) */
  readonly materializeEvery?: number;
}

export const defaultSim: SimOptions = {
  seed: 1,
  sourceShards: 2,
  parallelism: 2,
  maxParallelism: 16,
  envsPerStage: 2,
  users: 5,
  maxBatch: 6,
  pageSize: 1000,
  putRejectP: 0,
  crashP: 0,
  throttleP: 0,
  runner: {},
};

export type Totals = Map<string, { count: number; sum: number; values: number[] }>;

export class Sim {
  readonly job: Job;
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly m: MemoryPorts;
  readonly coord: ReturnType<typeof memoryCoordinator>;
  readonly rand: () => number;
  readonly envs = new Map<string, Env[]>();
  readonly produced: Produced[] = [];
  /** checkpoint → source shard → sequence number of the first barrier n injected there */
  readonly barrierAt = new Map<number, Map<string, string>>();
  /** ESM position per `${stageId}/${shardId}`: records delivered successfully */
  readonly cursor = new Map<string, number>();
  readonly completed: number[] = [];
  readonly aborted: number[] = [];
  readonly errors: string[] = [];
  /** what keyed instances read from the state store (checkStateReads) */
  readonly stateReads: StateRead[] = [];
  private readonly keyedOperator: string;
  readonly stats = { batches: 0, failures: 0, crashes: 0, fenced: 0, redeliveries: 0, envLosses: 0, zombies: 0, zombieFenced: 0, stalls: 0, stallsOvertaken: 0, stallsOverCheckpoints: 0, orphanDeltas: 0, stateReadsChecked: 0 };
  readonly sourceStream: string;
  readonly innerStream: string;
  private ts = 1_700_000_000_000;
  private nextUser = 0;
  private disabledFaults = false;
  private barrierStore: MemorySourceBarrierStore | undefined;

  constructor(readonly o: SimOptions) {
    this.rand = prng(o.seed);
    this.job = buildJob(o.sourceShards, o.parallelism, o.maxParallelism, o.materializeEvery);
    this.plan = planJob(this.job);
    this.names = resourceNames(this.plan, 'test');
    this.sourceStream = this.names.streamOf(this.plan.stages[0]!);
    this.innerStream = this.names.streamOf(this.plan.stages[1]!);
    this.keyedOperator = this.plan.stages[1]!.operators.find((o) => o.kind === 'process')!.id;
    this.m = createMemoryPorts({
      seed: o.seed,
      pageSize: o.pageSize,
      faults: {
        rejectPutEntry: (e) => !this.disabledFaults && e.stream === this.innerStream && e.attempt < 3 && this.rand() < o.putRejectP,
        before: (op) => {
          if (!this.disabledFaults && o.throttleP > 0 && op !== 'state.applyRow' && this.rand() < o.throttleP) throw throttled();
        },
      },
    });
    createJobStreams(this.m.kinesis, this.plan, this.names);
    if (o.sourceBarriers) this.barrierStore = new MemorySourceBarrierStore(this.m.control);
    this.coord = memoryCoordinator(this.plan, this.names, this.m, [this.m.collect], () => new Date(this.ts));
    for (const stage of this.plan.stages) {
      this.envs.set(
        stage.id,
        Array.from({ length: o.envsPerStage }, (_, i) => this.makeEnv(stage, `${stage.id}/env${i}`)),
      );
      for (const s of this.m.kinesis.listShards(this.names.streamOf(stage))) this.cursor.set(`${stage.id}/${s.shardId}`, 0);
    }
  }

  makeEnv(stage: PlanStage, id: string): Env {
    const env: Env = {
      id,
      stage,
      runner: undefined as unknown as StageRunner,
      ports: undefined as unknown as RuntimePorts,
      ops: 0,
      crashP: this.o.crashP,
      gateAt: undefined,
      gate: undefined,
      onGate: undefined,
      trace: [],
    };
    const hooks = {
      before: async (op: PortOp) => {
        const i = env.ops++;
        env.trace.push(op);
        if (env.gateAt === i && env.gate) {
          env.onGate?.();
          await env.gate;
        }
        if (this.crashes(env, `before:${op}`)) throw new InjectedCrash(`crash before ${op}`);
      },
      after: (op: PortOp) => {
        if (this.crashes(env, `after:${op}`)) throw new InjectedCrash(`crash after ${op}`);
      },
    };
    const ports = this.barrierStore ? { ...this.m.ports, sourceBarriers: this.barrierStore } : this.m.ports;
    (env as { ports: RuntimePorts }).ports = watchStateReads(withHooks(ports, hooks), this.keyedOperator, this.stateReads);
    env.runner = new StageRunner(this.job, this.plan, stage, this.names, env.ports, this.o.runner ?? {});
    return env;
  }

  private crashes(env: Env, point: string): boolean {
    if (this.disabledFaults || env.crashP === 0) return false;
    if (point === this.o.focus) return this.rand() < 0.3;
    return this.rand() < env.crashP / 2;
  }

  /** The environment loses its cache (recycled by Lambda). */
  loseEnv(env: Env): void {
    env.runner = new StageRunner(this.job, this.plan, env.stage, this.names, env.ports, this.o.runner ?? {});
    this.stats.envLosses++;
  }

  stage(i: number): PlanStage {
    return this.plan.stages[i]!;
  }

  shardsOf(stage: PlanStage): string[] {
    return this.m.kinesis.listShards(this.names.streamOf(stage)).map((s) => s.shardId);
  }

  records(stage: PlanStage, shardId: string): readonly StoredRecord[] {
    return this.m.kinesis.records(this.names.streamOf(stage), shardId);
  }

  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.rand() * xs.length)]!;
  }

  // ---- input

  /** Produces one record into a source shard (random unless given). */
  produce(spec: { kind?: Produced['kind']; user?: string; v?: number; shard?: number; raw?: string; pad?: number; ts?: number } = {}): Produced {
    const r = this.rand();
    const kind = spec.kind ?? (r < 0.06 ? 'poison' : r < 0.16 ? 'skip' : 'ok');
    const shard = spec.shard ?? Math.floor(this.rand() * this.o.sourceShards);
    this.ts += Math.floor(this.rand() * 50);
    let ev: Ev | undefined;
    let data: string;
    if (kind === 'poison') {
      data = spec.raw ?? (this.rand() < 0.5 ? 'not json {' : JSON.stringify({ v: 1 }));
    } else {
      const user = spec.user ?? `u${this.rand() < 0.3 ? this.nextUser++ % this.o.users : Math.floor(this.rand() * this.o.users)}`;
      ev = {
        user,
        v: spec.v ?? 1 + Math.floor(this.rand() * 100),
        ts: spec.ts ?? this.ts,
        ...(kind === 'skip' ? { skip: true } : {}),
        ...(spec.pad ? { pad: 'x'.repeat(spec.pad) } : {}),
      };
      data = spec.raw ?? JSON.stringify(ev);
    }
    const put = this.m.kinesis.putRecord(this.sourceStream, {
      data: new TextEncoder().encode(data),
      partitionKey: `pk${Math.floor(this.rand() * 1e9)}`,
      explicitHashKey: hashKeyOfEvenShard(shard, this.o.sourceShards),
    });
    const p: Produced = { shardId: put.shardId, seq: put.sequenceNumber, kind, ...(ev ? { ev } : {}) };
    this.produced.push(p);
    return p;
  }

  // ---- the coordinator

  inFlight: { n: number; since: number; token: string } | undefined;
  lastStarted = 0;

  async startCheckpoint(step = 0): Promise<number> {
    const { checkpointId: n } = await this.coord.allocate();
    const injected = this.coord.ports.injector.injected;
    const from = injected.length;
    await this.coord.inject(n);
    const at = new Map<string, string>();
    for (const b of injected.slice(from)) at.set(b.shardId, b.sequenceNumber);
    this.barrierAt.set(n, at);
    const token = `token-${n}`;
    this.inFlight = { n, since: step, token };
    this.lastStarted = n;
    await this.coord.await(n, token);
    return n;
  }

  /** Commits the checkpoint in flight if its ack set is complete; true when it did. */
  async tryCommit(): Promise<boolean> {
    const f = this.inFlight;
    if (!f || !this.m.notifier.wasAnswered(f.token)) return false;
    await this.coord.commit(f.n);
    this.completed.push(f.n);
    this.inFlight = undefined;
    checkStateReads(this);
    checkCommitted(this, f.n);
    return true;
  }

  async abortInFlight(reason = 'timeout'): Promise<void> {
    const f = this.inFlight!;
    await this.coord.abort(f.n, reason);
    this.aborted.push(f.n);
    this.inFlight = undefined;
  }

  // ---- the ESM

  pendingShards(): Array<{ stage: PlanStage; shardId: string }> {
    const out: Array<{ stage: PlanStage; shardId: string }> = [];
    for (const stage of this.plan.stages) {
      for (const shardId of this.shardsOf(stage)) {
        if (this.cursor.get(`${stage.id}/${shardId}`)! < this.records(stage, shardId).length) out.push({ stage, shardId });
      }
    }
    return out;
  }

  nextBatch(stage: PlanStage, shardId: string, size?: number): StoredRecord[] {
    const c = this.cursor.get(`${stage.id}/${shardId}`)!;
    const recs = this.records(stage, shardId);
    const n = size ?? 1 + Math.floor(this.rand() * this.o.maxBatch);
    return recs.slice(c, c + n);
  }

  /** True when the shard's next records (up to `within`) hold a barrier. */
  barrierAhead(stage: PlanStage, shardId: string, within: number): boolean {
    return this.nextBatch(stage, shardId, within).some((r) =>
      stage.input.kind === 'source' ? r.data[0] === 0 : decodePacket(r.data).envelopes.some((e) => e.kind === 'barrier'),
    );
  }

  /** Runs one batch on an environment; classifies the outcome. */
  async invoke(env: Env, shardId: string, batch: readonly StoredRecord[], allowFenced = false): Promise<BatchOutcome | Error> {
    const r = await this.runBatch(env, shardId, batch);
    this.judge(env, shardId, r, allowFenced);
    return r;
  }

  /** A run's failure: an injected crash is expected, a fenced one only where allowed; anything else is an error. */
  judge(env: Env, shardId: string, r: BatchOutcome | Error, allowFenced: boolean): void {
    if (!(r instanceof Error) || r instanceof InjectedCrash) return;
    if (r instanceof FencedError && allowFenced) this.stats.fenced++;
    else this.errors.push(`${env.id} ${shardId}: ${r.stack ?? String(r)}\n  ops: ${env.trace.join(', ')}`);
  }

  /** Runs one batch on an environment and counts it; a failure is returned, for the caller to judge. */
  async runBatch(env: Env, shardId: string, batch: readonly StoredRecord[]): Promise<BatchOutcome | Error> {
    env.ops = 0;
    env.trace = [];
    this.stats.batches++;
    try {
      return await env.runner.run(shardId, batch);
    } catch (err) {
      this.stats.failures++;
      if (err instanceof InjectedCrash) this.stats.crashes++;
      return err as Error;
    }
  }

  /** One ESM step on a shard: the next batch to a random environment; the cursor moves on success. */
  async esmStep(stage: PlanStage, shardId: string, opts: { env?: Env; size?: number; redeliverP?: number } = {}): Promise<boolean> {
    const batch = this.nextBatch(stage, shardId, opts.size);
    if (!batch.length) return false;
    const env = opts.env ?? this.pick(this.envs.get(stage.id)!);
    const r = await this.invoke(env, shardId, batch);
    if (r instanceof Error) return false;
    const key = `${stage.id}/${shardId}`;
    this.cursor.set(key, this.cursor.get(key)! + batch.length);
    if (opts.redeliverP && this.rand() < opts.redeliverP) {
      // the ESM did not see the answer (a timeout) and retries a batch that was processed
      this.stats.redeliveries++;
      await this.invoke(this.pick(this.envs.get(stage.id)!), shardId, batch);
    }
    return true;
  }

  /** Runs ESM steps until every shard of every stage is read to its end. */
  async drainAll(maxSteps = 20_000, redeliverP = 0): Promise<void> {
    for (let i = 0; i < maxSteps; i++) {
      const pending = this.pendingShards();
      if (!pending.length) return;
      const { stage, shardId } = this.pick(pending);
      await this.esmStep(stage, shardId, { redeliverP });
      await this.tryCommit();
      if (this.errors.length) return;
    }
    throw new Error(`shards still have unprocessed records after ${maxSteps} steps:\n${this.diagnostics()}`);
  }

  // ---- invariants

  /** Everything durable an instance may change (not Kinesis: see innerEnvelopes). */
  fingerprint(): string {
    const m = this.m;
    const leases = m.control.leaseIds().map((id) => [id, m.control.lease(id)]);
    const rows = m.state
      .rows()
      .map((r) => [r.checkpointId, r.row.operatorId, r.row.keyGroup, r.row.key, Object.entries(r.row.values).map(([k, v]) => [k, Buffer.from(v).toString('hex')])])
      .sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));
    const deltas = [...m.control.deltas()].map(([k, v]) => [k, Buffer.from(v).toString('hex')]).sort();
    const upserts = [...m.upsertSink.table(this.upsertTable())].sort(([x], [y]) => x.localeCompare(y));
    const acks = m.control.allCheckpoints().map((c) => [c.checkpointId, c.status]);
    return [
      `leases ${JSON.stringify(leases)}`,
      `rows ${JSON.stringify(rows)}`,
      `deltas ${JSON.stringify(deltas)}`,
      `upserts ${JSON.stringify(upserts)}`,
      `acks ${JSON.stringify(acks)}`,
      `deadLetters ${JSON.stringify([...m.deadLetters.letters.keys()].sort())}`,
      `published ${m.control.published.length}`,
      `collect conflicts ${m.collect.conflicts}`,
    ].join('\n');
  }

  ackSets(): Map<number, Set<string>> {
    return new Map(this.m.control.allCheckpoints().map((c) => [c.checkpointId, new Set(c.acks)]));
  }

  /** Every envelope on the inner stream, by id, with its content. */
  innerEnvelopes(): { count: number; ids: Map<string, string> } {
    const ids = new Map<string, string>();
    let count = 0;
    for (const shardId of this.shardsOf(this.stage(1))) {
      for (const r of this.records(this.stage(1), shardId)) {
        count++;
        for (const [id, content] of envelopeIds(r.data)) ids.set(`${shardId}|${id}`, content);
      }
    }
    return { count, ids };
  }

  /** Envelopes written since `before` must all be duplicates (same id, same content). */
  onlyDuplicates(before: { ids: Map<string, string> }): string[] {
    const problems: string[] = [];
    const now = this.innerEnvelopes();
    for (const [id, content] of now.ids) {
      const prev = before.ids.get(id);
      if (prev === undefined) problems.push(`new ${id}`);
      else if (prev !== content) problems.push(`changed ${id}`);
    }
    return problems;
  }

  upsertTable(): string {
    return this.names.sinkTable(this.plan.sinks.find((s) => s.kind === 'dynamodb-upsert')!);
  }

  /** Stops faults, processes everything, completes one last checkpoint that covers every record, and checks. */
  async finish(maxRounds = 6): Promise<void> {
    this.disabledFaults = true;
    for (const list of this.envs.values()) for (const e of list) e.crashP = 0;
    for (let round = 0; round < maxRounds && !this.errors.length; round++) {
      await this.drainAll();
      if (this.inFlight && !(await this.tryCommit())) {
        // everything is processed and the ack set is still short: the coordinator times out
        await this.abortInFlight('final timeout');
        continue;
      }
      const n = await this.startCheckpoint();
      await this.drainAll();
      await this.tryCommit();
      if (this.completed.includes(n)) {
        checkPublished(this, oracle(this), 'final commit', skippedBefore(this));
        checkFinal(this);
        checkStateReads(this);
        return;
      }
      this.errors.push(`checkpoint ${n} did not complete with every record processed and no faults:\n${this.diagnostics()}`);
      return;
    }
    if (!this.errors.length) this.errors.push(`no final checkpoint completed:\n${this.diagnostics()}`);
  }

  diagnostics(): string {
    const lines: string[] = [];
    for (const [stage, list] of this.envs) {
      for (const e of list) for (const i of e.runner.cached()) lines.push(`${stage} ${e.id}: ${JSON.stringify(i.describe())}`);
    }
    for (const c of this.m.control.allCheckpoints()) lines.push(`checkpoint ${c.checkpointId} ${c.status} acks ${[...c.acks].sort().join(',')}`);
    lines.push(`stats ${JSON.stringify(this.stats)}`);
    return lines.join('\n');
  }
}

export function envelopeIds(data: Uint8Array): Array<[string, string]> {
  const p = decodePacket(data);
  return p.envelopes.map((e) => {
    if (e.kind === 'data') {
      return [`${p.producer}|d|${e.epoch}|${e.seq}`, JSON.stringify([e.keyGroup, e.timestamp, Buffer.from(e.payload).toString('hex')])];
    }
    if (e.kind === 'barrier') return [`${p.producer}|b|${e.checkpointId}`, JSON.stringify(e)];
    return [`${p.producer}|${JSON.stringify(e)}`, ''];
  });
}

export function diffLines(a: string, b: string): string {
  const x = a.split('\n');
  const y = b.split('\n');
  return x
    .map((l, i) => (l === y[i] ? '' : `- ${l.slice(0, 600)}\n+ ${(y[i] ?? '').slice(0, 600)}`))
    .filter(Boolean)
    .join('\n');
}

export const sim = (o: Partial<SimOptions> = {}) => new Sim({ ...defaultSim, ...o });

export function expectNoErrors(s: Sim): void {
  if (s.errors.length) throw new Error(`${s.errors.length} invariant violation(s):\n${s.errors.slice(0, 5).join('\n\n')}\n\n${s.diagnostics()}`);
}

