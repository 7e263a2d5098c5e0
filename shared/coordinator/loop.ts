/**
 * The coordinator's loop, composed from the `Coordinator`'s tasks so that the happy path of one
 * checkpoint costs three billed state transitions: `Allocate` → `AwaitAcks` → `Commit` → `Allocate`.
 *
 * - `begin` (the `Allocate` state, a task-token task): allocates checkpoint n and injects its
 *   barrier, then answers its own token with `{ iteration, ckpt: { checkpointId } }`. When the
 *   job is quiet (no source shard holds a record after the barrier of the last committed
 *   checkpoint) it answers nothing: the token is parked in the control table and the workflow
 *   waits without a transition until a stage function sees input and fails the token with
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
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-kinesis';
import { ListExecutionsCommand, SendTaskFailureCommand, SendTaskHeartbeatCommand, SendTaskSuccessCommand, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { AwsClients } from '../adapters/aws/clients.js';
import { withThrottleRetry } from '../adapters/aws/clients.js';
import { pad } from '../adapters/aws/dynamo-control-store.js';
import { listAllShards } from '../adapters/aws/kinesis.js';
import { decodeSourceControl } from '../codec/envelope.js';
import type { Plan } from '../plan/plan.js';
import type { ResourceNames } from '../plan/resources.js';
import type { Telemetry } from '../runtime/ports.js';
import { instanceIdOf } from '../runtime/stage-instance.js';
import { SluiceError } from '../util/errors.js';
import type { CoordinatorTaskInput } from './protocol.js';
import { CHECKPOINT_IN_FLIGHT } from './protocol.js';
import { IDLE_KEY, LOOP_ERRORS } from './wake.js';

export type LoopTaskInput =
  | CoordinatorTaskInput
  /** the `Allocate` state: allocate and inject, or park the token while the job is quiet */
  | { readonly action: 'begin'; readonly taskToken: string; readonly iteration?: number }
  /** the `Commit` state: commit n; the token is left to the state's timeout (the pause) */
  | { readonly action: 'commit'; readonly checkpointId: number; readonly taskToken?: string }
  /** start an execution if none is running and the job is not stopped */
  | { readonly action: 'watchdog' };

export interface BeginOutput {
  readonly iteration: number;
  readonly ckpt: { readonly checkpointId: number };
}

export interface WatchdogOutput {
  readonly running: boolean;
  readonly started?: string;
  readonly reason?: string;
}

export interface CoordinatorLoopOptions {
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly clients: AwsClients;
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

/** The loop's own item in the control table: a commit in progress, and an operator's stop. */
export const LOOP_KEY = { pk: 'coordinator', sk: 'loop' } as const;

class CommitRunningError extends SluiceError {
  override readonly name = CHECKPOINT_IN_FLIGHT;
  constructor(n: number) {
    super(`the commit of checkpoint ${n} is still running`, 'CHECKPOINT_IN_FLIGHT', true);
  }
}

export class CoordinatorLoop {
  private readonly now: () => Date;
  constructor(private readonly o: CoordinatorLoopOptions) {
    this.now = o.now ?? (() => new Date());
  }

  private get table(): string {
    return this.o.names.controlTable;
  }

  async run(input: LoopTaskInput): Promise<unknown> {
    switch (input.action) {
      case 'begin':
        return this.onToken(input.taskToken, () => this.begin(input.taskToken, input.iteration ?? 0));
      case 'commit': {
        const token = 'taskToken' in input ? input.taskToken : undefined;
        if (token === undefined) return this.commit(input.checkpointId);
        return this.onToken(token, () => this.commit(input.checkpointId, token));
      }
      case 'watchdog':
        return this.watchdog();
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
      await this.o.clients.sfn
        .send(new SendTaskFailureCommand({ taskToken: token, error: (e.name ?? 'Error').slice(0, 256), cause: String(e.message ?? err).slice(0, 32_000) }))
        .catch(ignoreClosedToken);
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
    if (this.o.idle && (await this.quiet())) {
      await this.o.clients.doc.send(new PutCommand({ TableName: this.table, Item: { ...IDLE_KEY, token, since: this.now().toISOString() } }));
      // input that arrived while the token was being parked found no token: look once more
      if (await this.quiet()) {
        this.o.telemetry?.log('info', 'coordinator idle: no input since the last checkpoint');
        return { idle: true };
      }
      await this.o.clients.doc
        .send(new DeleteCommand({ TableName: this.table, Key: IDLE_KEY, ConditionExpression: '#t = :t', ExpressionAttributeNames: { '#t': 'token' }, ExpressionAttributeValues: { ':t': token } }))
        .catch(ignoreConditionFailed);
    }
    const { checkpointId } = (await this.o.run({ action: 'allocate' })) as { checkpointId: number };
    try {
      await this.o.run({ action: 'inject', checkpointId });
    } catch (err) {
      // abort delivers barrier n everywhere too; if it fails as well, an allocate after the
      // checkpoint timeout aborts n (CheckpointInFlight is retried meanwhile)
      await this.o.run({ action: 'abort', checkpointId, reason: { error: (err as Error).name, cause: (err as Error).message } });
      throw err;
    }
    const out: BeginOutput = { iteration: iteration + 1, ckpt: { checkpointId } };
    await this.o.clients.sfn.send(new SendTaskSuccessCommand({ taskToken: token, output: JSON.stringify(out) }));
    return out;
  }

  /**
   * Commits n under a marker. With a token, heartbeats keep the state alive while the commit runs
   * and a last one starts the pause (the state's HeartbeatSeconds), so the pause runs from the end
   * of the commit, as `minPauseMs` means.
   */
  async commit(n: number, token?: string): Promise<unknown> {
    await this.o.clients.doc.send(
      new UpdateCommand({
        TableName: this.table,
        Key: LOOP_KEY,
        UpdateExpression: 'SET committing = :n, committingAt = :at',
        ExpressionAttributeValues: { ':n': n, ':at': this.now().toISOString() },
      }),
    );
    const beat = () => (token ? this.o.clients.sfn.send(new SendTaskHeartbeatCommand({ taskToken: token })).then(() => undefined, ignoreClosedToken) : Promise.resolve());
    const timer = token ? setInterval(() => void beat().catch(() => undefined), Math.max(100, this.o.pauseMs / 2)) : undefined;
    let out: unknown;
    try {
      out = await this.o.run({ action: 'commit', checkpointId: n });
    } finally {
      clearInterval(timer);
    }
    await this.o.clients.doc
      .send(new UpdateCommand({ TableName: this.table, Key: LOOP_KEY, UpdateExpression: 'REMOVE committing, committingAt', ConditionExpression: 'committing = :n', ExpressionAttributeValues: { ':n': n } }))
      .catch(ignoreConditionFailed);
    await beat();
    return out;
  }

  /** A commit still running blocks the next checkpoint; one whose function died is finished here. */
  private async awaitRunningCommit(): Promise<void> {
    const r = await this.o.clients.doc.send(new GetCommand({ TableName: this.table, Key: LOOP_KEY, ConsistentRead: true }));
    const n = r.Item?.committing as number | undefined;
    if (n === undefined) return;
    const age = this.now().getTime() - Date.parse(String(r.Item?.committingAt));
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
    const { doc } = this.o.clients;
    const get = async (sk: string, pk = 'coordinator') =>
      (await doc.send(new GetCommand({ TableName: this.table, Key: { pk, sk }, ConsistentRead: true }))).Item;
    const state = await get('state');
    const last = state?.last as number | undefined;
    if (!last) return false;
    if ((state?.open as Set<number> | undefined)?.size || state?.inFlight !== undefined || state?.stopping !== undefined) return false;
    if ((await get('savepoint-request')) || (await get('rescale'))) return false;
    const ck = await get(pad(last), 'checkpoint');
    if (ck?.status !== 'COMPLETED' || typeof ck.instances !== 'string') return false;
    const instances = JSON.parse(ck.instances) as Record<string, { replayPoint?: { from: string; sequenceNumber?: string } }>;
    for (const stage of this.o.plan.stages) {
      if (stage.input.kind !== 'source') continue;
      const stream = this.o.names.streamOf(stage);
      const shards = (await listAllShards(this.o.clients, stream)).filter((s) => s.endingSequenceNumber === undefined);
      for (const shard of shards) {
        const rp = instances[instanceIdOf(stage.id, shard.shardId)]?.replayPoint;
        if (rp?.from !== 'after' || !rp.sequenceNumber) return false;
        if (await this.inputAfter(stream, shard.shardId, rp.sequenceNumber)) return false;
      }
    }
    return true;
  }

  /** Whether the shard holds a data record after the sequence number (a few pages at most). */
  private async inputAfter(stream: string, shardId: string, sequenceNumber: string): Promise<boolean> {
    const { kinesis } = this.o.clients;
    const it = await withThrottleRetry(() =>
      kinesis.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: shardId, ShardIteratorType: 'AFTER_SEQUENCE_NUMBER', StartingSequenceNumber: sequenceNumber })),
    );
    let iterator = it.ShardIterator;
    for (let page = 0; iterator && page < 10; page++) {
      const r = await withThrottleRetry(() => kinesis.send(new GetRecordsCommand({ ShardIterator: iterator!, Limit: 100 })));
      if ((r.Records ?? []).some((rec) => rec.Data && decodeSourceControl(rec.Data) === undefined)) return true;
      if (!r.MillisBehindLatest) return false;
      iterator = r.NextShardIterator;
    }
    // still behind after the pages read: assume input rather than sleep through it
    return true;
  }

  /** Starts an execution unless one is running or the job is stopped, finished or stopped by an operator. */
  async watchdog(): Promise<WatchdogOutput> {
    const arn = this.o.stateMachineArn;
    if (!arn) throw new SluiceError('the watchdog needs the state machine ARN (SLUICE_STATE_MACHINE_ARN)', 'BAD_INPUT');
    const running = await this.o.clients.sfn.send(new ListExecutionsCommand({ stateMachineArn: arn, statusFilter: 'RUNNING', maxResults: 1 }));
    if (running.executions?.length) return { running: true };
    const { doc } = this.o.clients;
    const state = (await doc.send(new GetCommand({ TableName: this.table, Key: { pk: 'coordinator', sk: 'state' }, ConsistentRead: true }))).Item;
    const loop = (await doc.send(new GetCommand({ TableName: this.table, Key: LOOP_KEY, ConsistentRead: true }))).Item;
    const reason =
      loop?.stopped !== undefined ? `stopped by an operator at ${String(loop.stopped)}` :
      state?.finishedAt !== undefined ? `finished at checkpoint ${String(state.finishedAt)}` :
      state?.stoppedAt !== undefined ? `stopped with a savepoint at checkpoint ${String(state.stoppedAt)}` : undefined;
    if (reason) return { running: false, reason };
    const started = await this.startExecution('watchdog');
    this.o.telemetry?.log('warn', 'no coordinator execution was running: started one', { executionArn: started });
    return { running: true, started };
  }

  private async startExecution(why: 'continue' | 'watchdog'): Promise<string> {
    const name = `${why}-${this.now().getTime()}-${Math.random().toString(36).slice(2, 8)}`;
    const r = await this.o.clients.sfn.send(new StartExecutionCommand({ stateMachineArn: this.o.stateMachineArn!, name, input: JSON.stringify({ iteration: 0 }) }));
    return r.executionArn!;
  }

  private async fail(token: string, error: string, cause: string): Promise<void> {
    await this.o.clients.sfn.send(new SendTaskFailureCommand({ taskToken: token, error, cause })).catch(ignoreClosedToken);
  }
}

/** Records an operator's stop (the watchdog leaves the job alone) or lifts it. */
export async function setOperatorStop(clients: AwsClients, names: ResourceNames, stopped: boolean, at = new Date()): Promise<void> {
  await clients.doc.send(
    new UpdateCommand({
      TableName: names.controlTable,
      Key: LOOP_KEY,
      UpdateExpression: stopped ? 'SET stopped = :at' : 'REMOVE stopped',
      ...(stopped ? { ExpressionAttributeValues: { ':at': at.toISOString() } } : {}),
    }),
  );
}

function ignoreClosedToken(err: unknown): void {
  const name = (err as { name?: string }).name;
  if (name !== 'TaskTimedOut' && name !== 'InvalidToken' && name !== 'TaskDoesNotExist') throw err;
}

function ignoreConditionFailed(err: unknown): void {
  if (!(err instanceof ConditionalCheckFailedException)) throw err;
}
