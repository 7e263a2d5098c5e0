/**
 * The coordinator's loop, composed from the `Coordinator`'s tasks so that the happy path of one
 * checkpoint costs three billed state transitions: `Allocate` → `AwaitAcks` → `Commit` → `Allocate`.
 *
 * - `begin` (the `Allocate` state, a task-token task): allocates checkpoint n and injects its
 *   barrier, then answers its own token with `{ iteration, ckpt: { checkpointId } }`. When the
 *   job is quiet (no source shard holds a record after the barrier of the last committed
 *   checkpoint) it answers nothing: the token is parked in the control table (and left on each
 *   source lease item, whose position write hands it to the next batch) and the workflow waits
 *   without a transition until a stage function sees input and fails the token with
 *   `Sluice.InputArrived` (caught back to `Allocate`; see wake.ts), or the state's own timeout.
 *   After `continueAsNewAfter` checkpoints it starts a fresh execution and fails the token with
 *   `Sluice.ContinuedAsNew` (caught to `Done`), so no Choice or counter state is on the path.
 * - `commit` (the `Commit` state, a task-token task whose heartbeat timeout is the pause): commits
 *   n, heartbeating while it runs, and leaves the token unanswered after a last heartbeat, so the
 *   heartbeat timeout *is* the pause between checkpoints (caught back to `Allocate`). A commit
 *   whose function died is guarded by a marker: `begin` waits for it (CheckpointInFlight, retried
 *   by the state machine), and finishes it once the marker is older than a function can run.
 * - `watchdog`: starts an execution when none is running and the job is not stopped (scheduled,
 *   and run once on deploy).
 *
 * Every failure of a token task is reported on its token too (SendTaskFailure with the error's
 * name), so the state fails with the same error name whatever the Lambda integration does with a
 * function error.
 */
import { callsForCheckpoint } from '../codec/envelope.js';
import type { Plan } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import type { ShardDirectory, Telemetry } from '../runtime/ports.js';
import { instanceIdOf } from '../runtime/stage-instance.js';
import { SluiceError } from '../util/errors.js';
import type { CheckpointStore, ShardPeek, Workflow } from './ports.js';
import type { CoordinatorTaskInput } from './protocol.js';
import { CommitRunningError, type OverdueOutput } from './protocol.js';
import { allAcked } from './records.js';
import { LOOP_ERRORS } from './wake.js';

export type LoopTaskInput =
  | CoordinatorTaskInput
  /** the `Allocate` state: allocate and inject, or park the token while the job is quiet */
  | { readonly action: 'begin'; readonly taskToken: string; readonly iteration?: number }
  /** the `Commit` state: commit n; the token is left to the state's timeout (the pause) */
  | { readonly action: 'commit'; readonly checkpointId: number; readonly taskToken?: string }
  /** start an execution if none is running and the job is not stopped */
  | { readonly action: 'watchdog' }
  /** an Express round (ROUND): is checkpoint n acked, past its timeout, or is the round out of time? */
  | { readonly action: 'poll'; readonly checkpointId: number; readonly roundStartedAt: string }
  /** an Express round: commit n, and say whether the round has time for another checkpoint */
  | { readonly action: 'commit'; readonly checkpointId: number; readonly roundStartedAt: string }
  /** an Express round, after the pause: allocate and inject the next checkpoint, or end the round */
  | { readonly action: 'next'; readonly iteration: number; readonly roundStartedAt: string };

/** An Express execution is stopped after five minutes. */
export const EXPRESS_LIMIT_MS = 300_000;

/** The coordinator function's timeout (SluiceJob): the longest one task of a round can take. */
export const COORDINATOR_TIMEOUT_MS = 60_000;

/**
 * Checkpoints in Express rounds (`expressCheckpoints`): a round allocates no checkpoint after
 * `allocateForMs`, and stops waiting for acks after `pollForMs` (it ends with the checkpoint open;
 * the next round waits on). A commit that starts by then still has a whole function timeout before
 * EXPRESS_LIMIT_MS. Each round costs four Standard transitions, so the longer it allocates, the
 * fewer rounds: 212 s hold 19 checkpoints at a 10 s interval (150 s held 13), and the 23 s after
 * leave the last checkpoint's barrier time to cross the stages before the round ends late.
 */
export const ROUND = { allocateForMs: 212_000, pollForMs: EXPRESS_LIMIT_MS - COORDINATOR_TIMEOUT_MS - 5_000 } as const;

/** How an Express round ended (the Standard execution's `Rounded?` state branches on it). */
export type RoundEnd = 'allocated' | 'late' | 'budget' | 'idle' | 'rotate' | 'commit' | 'failed';

export interface PollOutput {
  readonly acked: boolean;
  /** n was aborted (stuck past its progress window, timeouts.ts): the round pauses and goes on */
  readonly aborted: boolean;
  /** the round is out of time: it ends with n open */
  readonly late: boolean;
}

export interface NextOutput {
  readonly iteration: number;
  /** the checkpoint allocated, or (ended) the last one the round saw */
  readonly ckpt: { readonly checkpointId: number };
  readonly end: RoundEnd;
}

export interface BeginOutput {
  readonly iteration: number;
  readonly ckpt: { readonly checkpointId: number };
}

export interface WatchdogOutput {
  readonly running: boolean;
  readonly started?: string;
  readonly reason?: string;
}

/** The ports the loop runs on (beside the Coordinator's tasks). */
export interface LoopPorts {
  readonly store: CheckpointStore;
  readonly workflow: Workflow;
  readonly shards: ShardDirectory;
  readonly peek: ShardPeek;
}

export interface CoordinatorLoopOptions {
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly ports: LoopPorts;
  /** the Coordinator's tasks (`coordinator.run`) */
  readonly run: (input: CoordinatorTaskInput) => Promise<unknown>;
  /** park the coordinator while no input arrives; @default false */
  readonly idle?: boolean;
  /** the workflow (continue-as-new, watchdog); without it, executions never continue as new */
  readonly stateMachineArn?: string;
  /** the pause between checkpoints (the Commit state's heartbeat timeout), in ms */
  readonly pauseMs: number;
  /** a commit marker older than this belongs to a function that died; @default 120 s */
  readonly commitLeaseMs?: number;
  readonly now?: () => Date;
  readonly telemetry?: Telemetry;
}

/** Settings the deployed coordinator function reads (set by the SluiceJob construct). */
export const LOOP_ENV = {
  /** '1': park the coordinator while no input arrives (the stage functions wake it) */
  idle: 'SLUICE_COORDINATOR_IDLE',
  /** the workflow's ARN: continue-as-new and the watchdog start executions of it */
  stateMachineArn: 'SLUICE_STATE_MACHINE_ARN',
} as const;

/** The pause between two checkpoints: max(intervalMs, minPauseMs) in whole seconds, at least one. */
export function pauseMsOf(checkpoint: { readonly intervalMs: number; readonly minPauseMs: number }): number {
  return Math.max(1, Math.ceil(Math.max(checkpoint.intervalMs, checkpoint.minPauseMs) / 1000)) * 1000;
}

/** The longest pause an Express round takes (its execution may run five minutes in all). */
export const MAX_ROUND_PAUSE_MS = 60_000;

type RoundSettings = { readonly intervalMs: number; readonly minPauseMs: number; readonly maxConcurrent?: number };

/**
 * Why checkpoints under these settings cannot run in Express rounds, or undefined when they can: a
 * round keeps one checkpoint in flight and pauses at most MAX_ROUND_PAUSE_MS.
 */
export function roundsRefusal(checkpoint: RoundSettings): string | undefined {
  if ((checkpoint.maxConcurrent ?? 1) > 1) return 'expressCheckpoints needs one checkpoint in flight (checkpoint.maxConcurrent 1)';
  const pauseMs = pauseMsOf(checkpoint);
  if (pauseMs > MAX_ROUND_PAUSE_MS) {
    return `expressCheckpoints needs a pause of at most ${MAX_ROUND_PAUSE_MS / 1000} s (checkpoint.intervalMs, minPauseMs), got ${pauseMs / 1000} s: at longer intervals the Standard loop costs less`;
  }
  return undefined;
}

/** Checkpoints a round allocates: one per pause and about a second of acks and commit, for ROUND.allocateForMs. */
export function checkpointsPerRound(checkpoint: RoundSettings): number {
  return Math.max(1, Math.floor(ROUND.allocateForMs / (pauseMsOf(checkpoint) + 1000)));
}

/**
 * The longest pause at which rounds cost less than the Standard loop: a round's four Standard
 * transitions, its requests and its duration (it is billed through its pauses) against three
 * transitions and three function invocations per checkpoint. Where the two cross is found by the
 * cost model (`cdk/cost-model.test.ts` checks the default is the cheaper loop at every pause).
 */
export const ROUNDS_BY_DEFAULT_MAX_PAUSE_MS = 56_000;

/**
 * SluiceJob's default (`expressCheckpoints` unset): rounds where they are allowed and cost less,
 * up to ROUNDS_BY_DEFAULT_MAX_PAUSE_MS; the Standard loop otherwise (docs/cost.md).
 */
export function roundsByDefault(checkpoint: RoundSettings): boolean {
  return roundsRefusal(checkpoint) === undefined && pauseMsOf(checkpoint) <= ROUNDS_BY_DEFAULT_MAX_PAUSE_MS;
}

export class CoordinatorLoop {
  private readonly now: () => Date;
  constructor(private readonly o: CoordinatorLoopOptions) {
    this.now = o.now ?? (() => new Date());
  }

  private get store(): CheckpointStore {
    return this.o.ports.store;
  }

  private get workflow(): Workflow {
    return this.o.ports.workflow;
  }

  async run(input: LoopTaskInput): Promise<unknown> {
    switch (input.action) {
      case 'begin':
        return this.onToken(input.taskToken, () => this.begin(input.taskToken, input.iteration ?? 0));
      case 'commit': {
        if ('roundStartedAt' in input) {
          const out = await this.commit(input.checkpointId);
          return { ...(out as object), more: this.roundAge(input.roundStartedAt) + this.o.pauseMs < ROUND.allocateForMs };
        }
        const token = 'taskToken' in input ? input.taskToken : undefined;
        if (token === undefined) return this.commit(input.checkpointId);
        return this.onToken(token, () => this.commit(input.checkpointId, token));
      }
      case 'watchdog':
        return this.watchdog();
      case 'poll':
        return this.poll(input.checkpointId, input.roundStartedAt);
      case 'next':
        return this.next(input.iteration, input.roundStartedAt);
      default:
        return this.o.run(input);
    }
  }

  /** Runs a token task; an error fails the token with the error's name (then the state fails with it). */
  private async onToken<T>(token: string, work: () => Promise<T>): Promise<T | { failed: string }> {
    try {
      return await work();
    } catch (err) {
      const e = err as { name?: string; message?: string };
      await this.workflow.fail(token, (e.name ?? 'Error').slice(0, 256), String(e.message ?? err).slice(0, 32_000)).catch(ignoreClosedToken);
      return { failed: e.name ?? 'Error' };
    }
  }

  async begin(token: string, iteration: number): Promise<BeginOutput | { idle: true } | { continuedAsNew: string }> {
    const { plan } = this.o;
    if (this.o.stateMachineArn && iteration >= plan.checkpoint.continueAsNewAfter) {
      const arn = await this.startExecution('continue');
      await this.fail(token, LOOP_ERRORS.continuedAsNew, `continued as ${arn}`);
      return { continuedAsNew: arn };
    }
    await this.awaitRunningCommit();
    const sources = this.o.idle ? await this.quietSources() : undefined;
    if (sources) {
      await this.store.parkIdle(token, this.now().toISOString());
      // a source batch's position write returns its lease item: the token there tells it to wake us (wake.ts)
      await this.store.markParked(sources, token);
      // input whose position write came before its lease's mark was in its shard before that: look once more
      if (await this.quiet()) {
        this.o.telemetry?.log('info', 'coordinator idle: no input since the last checkpoint');
        return { idle: true };
      }
      await this.store.takeIdle(token);
    }
    const checkpointId = await this.allocateAndInject();
    const out: BeginOutput = { iteration: iteration + 1, ckpt: { checkpointId } };
    await this.workflow.succeed(token, out);
    return out;
  }

  /**
   * An Express round's wait for acks (it cannot wait on a task token), off its happy path (the round
   * reads n's record itself: cdk/coordinator-rounds-acks.ts): one consistent read of n's record.
   * Once n is a progress window old, the coordinator's own rule decides (`overdue`, timeouts.ts):
   * a stuck n is aborted here, one whose acks keep coming stays open. An n that is no longer in
   * flight counts as acked when it completed (the commit is idempotent).
   */
  async poll(n: number, roundStartedAt: string): Promise<PollOutput> {
    const late = this.roundAge(roundStartedAt) >= ROUND.pollForMs;
    let ck = await this.store.getCheckpoint(n);
    if (ck?.status === 'IN_FLIGHT' && !allAcked(ck) && this.now().getTime() - Date.parse(ck.startedAt) >= this.o.plan.checkpoint.timeoutMs) {
      const o = (await this.o.run({ action: 'overdue', checkpointId: n })) as OverdueOutput;
      if (!o.extend) ck = await this.store.getCheckpoint(n);
    }
    if (ck?.status === 'COMPLETED') return { acked: true, aborted: false, late };
    if (!ck || ck.status === 'ABORTED') return { acked: false, aborted: true, late };
    return { acked: allAcked(ck), aborted: false, late };
  }

  /**
   * An Express round's next checkpoint, after its pause: `begin` without a token. Where `begin`
   * would park or continue as new, or the round is out of time, the round ends instead and the
   * Standard execution's `Allocate` takes over (it parks, continues as new, or allocates).
   */
  async next(iteration: number, roundStartedAt: string): Promise<NextOutput> {
    const last = { checkpointId: (await this.store.readState()).last };
    if (this.o.stateMachineArn && iteration >= this.o.plan.checkpoint.continueAsNewAfter) return { iteration, ckpt: last, end: 'rotate' };
    // out of time, or an operator stopped the coordinator (its Standard execution is gone): end the round
    if (this.roundAge(roundStartedAt) >= ROUND.allocateForMs || (await this.store.loopState()).stopped !== undefined) return { iteration, ckpt: last, end: 'budget' };
    await this.awaitRunningCommit();
    if (this.o.idle && (await this.quiet())) return { iteration, ckpt: last, end: 'idle' };
    const checkpointId = await this.allocateAndInject();
    return { iteration: iteration + 1, ckpt: { checkpointId }, end: 'allocated' };
  }

  /** Allocates checkpoint n and injects its barrier; a failed injection aborts n. */
  private async allocateAndInject(): Promise<number> {
    const { checkpointId } = (await this.o.run({ action: 'allocate' })) as { checkpointId: number };
    try {
      await this.o.run({ action: 'inject', checkpointId });
    } catch (err) {
      // abort delivers barrier n everywhere too; if it fails as well, an allocate after the
      // checkpoint timeout aborts n (CheckpointInFlight is retried meanwhile)
      await this.o.run({ action: 'abort', checkpointId, reason: { error: (err as Error).name, cause: (err as Error).message } });
      throw err;
    }
    return checkpointId;
  }

  private roundAge(roundStartedAt: string): number {
    const t = Date.parse(roundStartedAt);
    // an unreadable start time ends the round rather than letting it run into Express's limit
    return Number.isFinite(t) ? this.now().getTime() - t : Number.POSITIVE_INFINITY;
  }

  /**
   * Commits n under a marker. With a token, heartbeats keep the state alive while the commit runs
   * and a last one starts the pause (the state's HeartbeatSeconds), so the pause runs from the end
   * of the commit, as `minPauseMs` means.
   */
  async commit(n: number, token?: string): Promise<unknown> {
    await this.store.markCommitting(n, this.now().toISOString());
    const beat = () => (token ? this.workflow.heartbeat(token).then(() => undefined, ignoreClosedToken) : Promise.resolve());
    const timer = token ? setInterval(() => void beat().catch(() => undefined), Math.max(100, this.o.pauseMs / 2)) : undefined;
    let out: unknown;
    try {
      out = await this.o.run({ action: 'commit', checkpointId: n });
    } finally {
      clearInterval(timer);
    }
    await this.store.clearCommitting(n);
    await beat();
    return out;
  }

  /** A commit still running blocks the next checkpoint; one whose function died is finished here. */
  private async awaitRunningCommit(): Promise<void> {
    const loop = await this.store.loopState();
    const n = loop.committing;
    if (n === undefined) return;
    const age = this.now().getTime() - Date.parse(String(loop.committingAt));
    if (!(age > (this.o.commitLeaseMs ?? 120_000))) throw new CommitRunningError(n);
    this.o.telemetry?.log('warn', 'finishing a commit whose function ended before it did', { checkpointId: n });
    await this.commit(n);
  }

  /**
   * True when nothing calls for a checkpoint: none is open, the last one committed, no savepoint or
   * rescale is asked for, and every source shard holds nothing after the last committed barrier
   * but control records. Anything unknown (a shard without a replay point) counts as input.
   */
  async quiet(): Promise<boolean> {
    return (await this.quietSources()) !== undefined;
  }

  /** `quiet`, with the source instances it looked at (the ones a park marks), or undefined when not quiet. */
  private async quietSources(): Promise<string[] | undefined> {
    const state = await this.store.readState();
    const last = state.last;
    if (!last) return undefined;
    if (state.open.length || state.stopping !== undefined) return undefined;
    if ((await this.store.getSavepointRequest()) || (await this.store.getRescale())) return undefined;
    const ck = await this.store.getCheckpoint(last);
    if (ck?.status !== 'COMPLETED' || !ck.instances) return undefined;
    const instances = ck.instances as Record<string, { replayPoint?: { from: string; sequenceNumber?: string } }>;
    const looked: string[] = [];
    for (const stage of this.o.plan.stages) {
      if (stage.input.kind !== 'source') continue;
      const stream = this.o.names.streamOf(stage);
      const shards = await this.o.ports.shards.openShards(stream);
      for (const shard of shards) {
        const id = instanceIdOf(stage.id, shard.shardId);
        const rp = instances[id]?.replayPoint;
        if (rp?.from !== 'after' || !rp.sequenceNumber) return undefined;
        if (await this.inputAfter(stream, shard.shardId, rp.sequenceNumber)) return undefined;
        looked.push(id);
      }
    }
    return looked;
  }

  /** Whether the shard holds input (or the end of a bounded input) after the sequence number (a few pages at most). */
  private async inputAfter(stream: string, shardId: string, sequenceNumber: string): Promise<boolean> {
    let page = 0;
    for await (const p of this.o.ports.peek.pagesAfter(stream, shardId, sequenceNumber)) {
      if (p.records.some(callsForCheckpoint)) return true;
      if (p.caughtUp) return false;
      if (++page >= 10) break;
    }
    // still behind after the pages read (or the shard ended): assume input rather than sleep through it
    return true;
  }

  /** Starts an execution unless one is running or the job is stopped, finished or stopped by an operator. */
  async watchdog(): Promise<WatchdogOutput> {
    const arn = this.o.stateMachineArn;
    if (!arn) throw new SluiceError('the watchdog needs the state machine ARN (SLUICE_STATE_MACHINE_ARN)', 'BAD_INPUT');
    if (await this.workflow.running(arn)) return { running: true };
    const state = await this.store.readState();
    const loop = await this.store.loopState();
    const reason =
      loop.stopped !== undefined ? `stopped by an operator at ${loop.stopped}` :
      state.finishedAt !== undefined ? `finished at checkpoint ${state.finishedAt}` :
      state.stoppedAt !== undefined ? `stopped with a savepoint at checkpoint ${state.stoppedAt}` : undefined;
    if (reason) return { running: false, reason };
    const started = await this.startExecution('watchdog');
    this.o.telemetry?.log('warn', 'no coordinator execution was running: started one', { executionArn: started });
    return { running: true, started };
  }

  private async startExecution(why: 'continue' | 'watchdog'): Promise<string> {
    const name = `${why}-${this.now().getTime()}-${Math.random().toString(36).slice(2, 8)}`;
    return this.workflow.start(this.o.stateMachineArn!, name, { iteration: 0 });
  }

  private async fail(token: string, error: string, cause: string): Promise<void> {
    await this.workflow.fail(token, error, cause).catch(ignoreClosedToken);
  }
}

function ignoreClosedToken(err: unknown): void {
  const name = (err as { name?: string }).name;
  if (name !== 'TaskTimedOut' && name !== 'InvalidToken' && name !== 'TaskDoesNotExist') throw err;
}
