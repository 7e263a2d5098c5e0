/**
 * Zombies for the StageRunner protocol tests' driver (Sim, in stage-runner-sim.test-support.ts): an
 * invocation the event source mapping gave up on (it timed out) that still runs.
 *
 * - `zombie`: environment A blocks at a port call, the mapping retries the same batch once on B,
 *   then both are released.
 * - `StalledZombie`: A blocks at a port call and stays blocked while the driver goes on: the mapping
 *   retries the batch elsewhere and processes later ones (taking the lease over, restoring), the
 *   coordinator injects, commits, aborts and collects garbage; A is woken later.
 *
 * A zombie woken after another environment took the lease over must be fenced or change nothing.
 */
import { yieldTurn } from '../adapters/memory/memory-faults.js';
import type { PlanStage } from '../plan/plan.js';
import { FencedError } from '../util/errors.js';
import type { StoredRecord } from './ports.js';
import { instanceIdOf } from './stage-instance.js';
import type { BatchOutcome } from './stage-runner.js';
import { compareSeq } from './positions.js';
import { diffLines, envelopeIds, InjectedCrash, type Env, type Sim } from './stage-runner-sim.test-support.js';

/** Blocks `env`'s next run at its `at`-th port call (undefined: never); `reached` resolves once it is blocked there. */
export function gateEnv(env: Env, at: number | undefined): { reached: Promise<void>; release: () => void } {
  let release!: () => void;
  let reached!: () => void;
  const reachedP = new Promise<void>((r) => (reached = r));
  env.gateAt = at;
  env.gate = at === undefined ? undefined : new Promise<void>((r) => (release = r));
  env.onGate = () => reached();
  return {
    reached: reachedP,
    release: () => {
      if (at !== undefined) release();
    },
  };
}

function ungate(env: Env): void {
  env.gateAt = undefined;
  env.gate = undefined;
  env.onGate = undefined;
}

/** The port call by which a run has surely read its lease (a source reads the announced barriers alongside). */
function leaseReadBy(s: Sim, stage: PlanStage): number {
  return s.o.sourceBarriers && stage.input.kind === 'source' ? 2 : 1;
}

/** What may not change while a zombie finishes: everything durable, the ack sets, the inner stream's envelopes. */
interface Baseline {
  readonly fingerprint: string;
  readonly envelopes: ReturnType<Sim['innerEnvelopes']>;
  readonly acks: Map<number, Set<string>>;
}

function baseline(s: Sim): Baseline {
  return { fingerprint: s.fingerprint(), envelopes: s.innerEnvelopes(), acks: s.ackSets() };
}

/**
 * Checks a zombie `a` that ran to `ra` after another environment took its lease over: fenced (or
 * crashed, or failed when `failureOk`), or idle — it may finish without error when its batch held
 * nothing past the snapshot it restored; either way it changed nothing but, at most, the ack of a
 * snapshot it made durable before it lost the lease.
 *
 * `ahead`: the owners since had not gone past its batch yet. It may then have written what they will
 * write again, the same (its outputs before its first fenced write: the engine dedupes by id): its
 * upserts and dead letters are left to the final checks, and its new envelopes are returned, each
 * with how often it is on the inner stream now, for `checkReemitted`.
 */
function checkZombie(s: Sim, a: Env, before: Baseline, ra: BatchOutcome | Error, opts: { failureOk: boolean; ahead: boolean }, context: () => string): Map<string, number> {
  const idle = !(ra instanceof Error) && ra.processed === 0;
  const failed = ra instanceof FencedError || ra instanceof InjectedCrash || (opts.failureOk && ra instanceof Error);
  if (!failed && !idle) {
    s.errors.push(`zombie ${a.id} was not fenced after the lease was taken over: ${ra instanceof Error ? ra.stack : JSON.stringify(ra)}\n  ops: ${a.trace.join(', ')}`);
    return new Map();
  }
  if (ra instanceof FencedError) s.stats.zombieFenced++;
  const after = s.fingerprint();
  const deltas = deltaChanges(before.fingerprint, after);
  // a snapshot's delta is written before its fenced pointer: a zombie may leave one nobody points
  // to (the coordinator collects it), but never rewrite or remove one
  const kept = (f: string) => withoutLines(f, opts.ahead ? ['deltas', 'upserts', 'deadLetters'] : ['deltas']);
  if (kept(after) !== kept(before.fingerprint) || deltas.some((d) => !d.startsWith('added'))) {
    s.errors.push(`zombie ${a.id} changed durable state:\n${deltas.length ? `deltas: ${deltas.join(', ')}\n` : ''}${diffLines(kept(before.fingerprint), kept(after))}\n  ${context()}`);
  }
  s.stats.orphanDeltas += deltas.length;
  for (const [n, ids] of s.ackSets()) {
    for (const id of ids) {
      if (before.acks.get(n)?.has(id)) continue;
      const own = s.m.control.published.some((p) => p.instanceId === id && p.pointer.checkpointId === n && p.fence < (s.m.control.lease(id).fence ?? 0));
      if (!own) s.errors.push(`zombie ${a.id} acked checkpoint ${n} for ${id} without a snapshot published under its fence`);
    }
  }
  const problems = s.onlyDuplicates(before.envelopes);
  const added = new Map<string, number>();
  if (opts.ahead && problems.every((p) => p.startsWith('new '))) {
    const counts = envelopeCounts(s);
    for (const p of problems) added.set(p.slice(4), counts.get(p.slice(4)) ?? 0);
  } else if (problems.length) s.errors.push(`zombie ${a.id} wrote new envelopes: ${problems.slice(0, 3).join('; ')}\n  ${context()}`);
  return added;
}

/** How often each envelope (`shardId|id`) is on the inner stream now. */
function envelopeCounts(s: Sim): Map<string, number> {
  const count = new Map<string, number>();
  for (const shardId of s.shardsOf(s.stage(1))) {
    for (const r of s.records(s.stage(1), shardId)) for (const [id] of envelopeIds(r.data)) count.set(`${shardId}|${id}`, (count.get(`${shardId}|${id}`) ?? 0) + 1);
  }
  return count;
}

/** Which deltas (by key) a change of the fingerprint added, removed or rewrote. */
function deltaChanges(before: string, after: string): string[] {
  const deltas = (f: string) => new Map(JSON.parse(f.split('\n').find((l) => l.startsWith('deltas '))!.slice(7)) as Array<[string, string]>);
  const [x, y] = [deltas(before), deltas(after)];
  const out: string[] = [];
  for (const [k, v] of y) if (x.get(k) !== v) out.push(`${x.has(k) ? 'rewrote' : 'added'} ${k}`);
  for (const k of x.keys()) if (!y.has(k)) out.push(`removed ${k}`);
  return out;
}

const withoutLines = (fingerprint: string, names: readonly string[]) => fingerprint.split('\n').filter((l) => !names.includes(l.split(' ')[0]!)).join('\n');

/**
 * A zombie: environment A runs a batch and blocks at its `gateA`-th port call (the invocation
 * "timed out"); the ESM retries the batch on environment B, which may block too; then both are
 * released in a random order. Returns what each run did.
 */
export async function zombie(s: Sim, stage: PlanStage, shardId: string, gateA: number, gateB: number | undefined, releaseAFirst: boolean) {
  const [a, b] = twoEnvs(s, stage);
  const batch = s.nextBatch(stage, shardId);
  if (!batch.length) return undefined;
  s.stats.zombies++;
  const ga = gateEnv(a, gateA);
  const pA = s.invoke(a, shardId, batch, true);
  const aState = await Promise.race([ga.reached.then(() => 'gated' as const), pA.then(() => 'done' as const)]);
  const gb = gateEnv(b, gateB);
  // the ESM retry: the same batch (or more)
  const retry = s.nextBatch(stage, shardId, batch.length + Math.floor(s.rand() * 3));
  const pB = s.invoke(b, shardId, retry, true);
  const bState = await Promise.race([gb.reached.then(() => 'gated' as const), pB.then(() => 'done' as const)]);
  let ra: BatchOutcome | Error;
  let rb: BatchOutcome | Error;
  if (releaseAFirst || bState === 'done') {
    const afterB = bState === 'done' ? baseline(s) : undefined;
    ga.release();
    ra = await pA;
    // a zombie resumed after the retry took the lease over must be fenced and change nothing, if
    // it had read the lease by then (a source reads the announced barriers with it, at once)
    if (afterB && aState === 'gated' && gateA >= leaseReadBy(s, stage)) {
      rb = await pB;
      if (!(rb instanceof Error) && !rb.cacheHit) {
        const outcome = rb;
        checkZombie(s, a, afterB, ra, { failureOk: false, ahead: false }, () => `(gated at ${gateA})\n  A ops: ${a.trace.join(', ')}\n  B ops: ${b.trace.join(', ')}\n  A batch ${batch.length}, B batch ${retry.length}, B outcome ${JSON.stringify(outcome)}`);
      }
    }
    gb.release();
    rb = await pB;
  } else {
    gb.release();
    rb = await pB;
    ga.release();
    ra = await pA;
  }
  ungate(a);
  ungate(b);
  if (!(rb instanceof Error)) {
    const key = `${stage.id}/${shardId}`;
    s.cursor.set(key, s.cursor.get(key)! + retry.length);
  }
  return { ra, rb };
}

export function twoEnvs(s: Sim, stage: PlanStage): [Env, Env] {
  const list = s.envs.get(stage.id)!;
  if (list.length < 2) list.push(s.makeEnv(stage, `${stage.id}/env${list.length}`));
  const i = Math.floor(s.rand() * list.length);
  const j = (i + 1 + Math.floor(s.rand() * (list.length - 1))) % list.length;
  return [list[i]!, list[j]!];
}

/**
 * An invocation blocked at a port call for long: its environment leaves the stage's list (Lambda
 * gives a busy environment no other batch), the mapping's cursor stays before its batch (it
 * retries the batch elsewhere and goes on), and the driver goes on until `wake`.
 */
export class StalledZombie {
  private constructor(
    private readonly s: Sim,
    readonly env: Env,
    readonly stage: PlanStage,
    readonly shardId: string,
    private readonly batch: readonly StoredRecord[],
    private readonly at: number,
    private readonly gate: ReturnType<typeof gateEnv>,
    private readonly run: Promise<BatchOutcome | Error>,
    /** the lease's fence when the run blocked: a higher one at wake-up is a takeover meanwhile */
    private readonly fenceAtGate: number,
    /** checkpoints ended (committed or aborted) when it blocked */
    private readonly endedAtGate: number,
  ) {}

  /**
   * Runs the shard's next batch on one of the stage's environments, blocked at its `at`-th port
   * call. Undefined when the run finished before it got there (an invocation whose answer the
   * mapping did not see: it retries the batch) or there is nothing to read.
   */
  static async start(s: Sim, stage: PlanStage, shardId: string, at: number): Promise<StalledZombie | undefined> {
    const batch = s.nextBatch(stage, shardId);
    if (!batch.length) return undefined;
    const list = s.envs.get(stage.id)!;
    if (list.length < 2) list.push(s.makeEnv(stage, `${stage.id}/env${s.stats.stalls}s`));
    const env = s.pick(list);
    list.splice(list.indexOf(env), 1);
    const gate = gateEnv(env, at);
    const run = s.runBatch(env, shardId, batch);
    const state = await Promise.race([gate.reached.then(() => 'gated' as const), run.then(() => 'done' as const)]);
    if (state === 'done') {
      ungate(env);
      list.push(env);
      s.judge(env, shardId, await run, true);
      return undefined;
    }
    s.stats.stalls++;
    return new StalledZombie(s, env, stage, shardId, batch, at, gate, run, s.m.control.lease(instanceIdOf(stage.id, shardId)).fence ?? 0, s.completed.length + s.aborted.length);
  }

  /** Releases the run and checks it: woken after a takeover, having read the lease, it must be fenced or change nothing. */
  async wake(): Promise<void> {
    const s = this.s;
    // a run that failed may have left writes going (Promise.all rejects at the first failure; the
    // rest retry on turns of the event loop): they finish first, or they would pass for the zombie's
    for (let i = 0; i < 1_000; i++) await yieldTurn();
    const lease = s.m.control.lease(instanceIdOf(this.stage.id, this.shardId));
    const overtaken = (lease.fence ?? 0) > this.fenceAtGate && this.at >= leaseReadBy(s, this.stage);
    const before = overtaken ? baseline(s) : undefined;
    const ahead = lease.lastPosition === undefined || compareSeq(lease.lastPosition, this.batch.at(-1)!.sequenceNumber) < 0;
    this.gate.release();
    const r = await this.run;
    ungate(this.env);
    s.envs.get(this.stage.id)!.push(this.env);
    if (!before) {
      s.judge(this.env, this.shardId, r, true);
      return;
    }
    s.stats.stallsOvertaken++;
    if (s.completed.length + s.aborted.length - this.endedAtGate >= 2) s.stats.stallsOverCheckpoints++;
    // failing otherwise is fine too (a delta the coordinator collected since it read the pointer)
    const context = () =>
      `(${this.shardId} stalled at ${this.at} with the lease at fence ${this.fenceAtGate}, woken at ${lease.fence}${ahead ? ' before the owners passed its batch' : ''}; batch ${this.batch[0]!.sequenceNumber}+${this.batch.length})\n  ops: ${this.env.trace.join(', ')}`;
    this.ahead = checkZombie(s, this.env, before, r, { failureOk: true, ahead }, context);
    this.context = context;
  }

  /** the envelopes it wrote ahead of the owners, with their count on the inner stream right after it */
  private ahead = new Map<string, number>();
  private context = () => '';

  /** At the end: each envelope it wrote ahead of the owners was written again by one (the same content: checkFinal). */
  checkReemitted(): void {
    if (!this.ahead.size) return;
    const count = envelopeCounts(this.s);
    const never = [...this.ahead].filter(([id, n]) => (count.get(id) ?? 0) <= n).map(([id]) => id);
    if (never.length) this.s.errors.push(`zombie ${this.env.id} wrote envelopes no owner wrote: ${never.slice(0, 3).join('; ')}\n  ${this.context()}`);
  }
}
