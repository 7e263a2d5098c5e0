/**
 * The wrappers that inject a FaultSchedule's faults into a LocalJobRunner through its hooks
 * (`wrapPorts`, `wrapClients`, `wrapHandler`, `wrapCoordinator`, plus its routing, recycling and
 * invocation-timeout options). Used by `sluice run --chaos`, `chaosCheck` (sluice/testing) and the
 * chaos harness of the project's own tests.
 */
import { ProvisionedThroughputExceededException as KinesisThrottle, PutRecordCommand, PutRecordsCommand } from '@aws-sdk/client-kinesis';
import { ProvisionedThroughputExceededException as DynamoThrottle } from '@aws-sdk/client-dynamodb';
import { S3ServiceException } from '@aws-sdk/client-s3';
import { BatchGetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { KinesisStreamEvent } from 'aws-lambda';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { AwsClients } from '../../shared/adapters/aws/clients.js';
import { Coordinator } from '../../shared/coordinator/coordinator.js';
import { awsCoordinator } from '../../shared/adapters/aws/coordinator-ports.js';
import type { CoordinatorTaskInput } from '../../shared/coordinator/protocol.js';
import type { PlanStage } from '../../shared/plan/plan.js';
import type { RuntimePorts } from '../../shared/runtime/ports.js';
import type { LocalJobRunner, LocalRunOptions } from '../runner.js';
import type { KinesisHandler } from '../event-source-poller.js';

import { ChaosCrash, FaultSchedule } from './schedule.js';
import { hangFirstAttempt, silentServer } from './sdk-hang.js';
import { loseCoordinatorResponses, losesResponse, lostResponse, partialBatchGet, partialPutRecords, shortQueryPage } from './sdk-answers.js';
import { crashCoordinatorWrites, inCoordinatorTask, inCoordinatorTaskNow, type CoordinatorWritePoint } from './coordinator-crashes.js';
import { coordinatorClockSkew } from './clock-skew.js';

export * from './schedule.js';
export { crashCoordinatorWrites, inCoordinatorTask, isWriteCommand, type CoordinatorWritePoint } from './coordinator-crashes.js';
export { trimmedReplayFault } from './sdk-answers.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * `target` with some methods replaced; every other member (including ones a port gains later) is the
 * target's own, bound to it.
 */
function override<T extends object>(target: T, methods: Partial<T>): T {
  return new Proxy(target, {
    get(t, prop) {
      if (Object.prototype.hasOwnProperty.call(methods, prop)) return (methods as Record<string | symbol, unknown>)[prop];
      const v = Reflect.get(t, prop, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

/** Where a zombie invocation stalls. */
export const ZOMBIE_POINTS = ['start', 'putAll', 'upsert', 'collect', 'writeDelta', 'publishSnapshot', 'applyRows', 'ack', 'commitPosition'] as const;
export type ZombiePoint = (typeof ZOMBIE_POINTS)[number];

interface EnvState {
  zombie?: { point: ZombiePoint; armed: boolean; stageId: string; aimed?: boolean };
}

/** A zombie stalled at its point (what a targeted test's `zombieHold` is told). */
export interface StalledZombie {
  readonly stageId: string;
  readonly environment: string;
  readonly point: ZombiePoint;
  /** the checkpoint of the stalled call (writeDelta, publishSnapshot, applyRows, ack) */
  readonly checkpointId?: number;
  /** rows the stalled applyRows writes */
  readonly rows?: number;
}

export interface ChaosHookOptions {
  /** the runner's invocation timeout; a zombie stalls longer than this */
  readonly invocationTimeoutMs: number;
  /** the job's checkpoint timeout (its progress window); a slow ack is held back until its checkpoint is aborted, 2 × this at most */
  readonly checkpointTimeoutMs: number;
  /** where zombies may stall; @default every point */
  readonly zombiePoints?: readonly ZombiePoint[];
  /** stages whose invocations may turn into zombies; @default every stage */
  readonly zombieStages?: readonly string[];
  /** how much longer than the invocation timeout a zombie stalls; @default 300–1000 ms */
  readonly zombieOverrunMs?: number;
  /** called before each invocation (after slowHandlerMs): a seeded hold of one shard until a condition on another */
  readonly beforeInvocation?: (stageId: string, event: KinesisStreamEvent) => Promise<void>;
  /** a slow function: every invocation of a stage first waits this long (not a fault; lets records pile up) */
  readonly slowHandlerMs?: (stageId: string, event: KinesisStreamEvent) => number;
  /** called before every coordinator task (targeted tests hold a task back with it) */
  readonly beforeCoordinatorTask?: (input: CoordinatorTaskInput) => Promise<void>;
  /** how far a `clock-skew` environment's clock is off at most, either way; @default CLOCK_SKEW_MAX_MS */
  readonly clockSkewMaxMs?: number;
  /** called after every coordinator task that succeeded (a targeted test can fail it after its work) */
  readonly afterCoordinatorTask?: (input: CoordinatorTaskInput, output: unknown) => Promise<void>;
  /**
   * extra client faults used by targeted tests (called before the schedule's own); one may throw, or
   * return another command to send instead
   */
  readonly clientFault?: (service: keyof AwsClients, command: object, ctx: { stage: PlanStage; environment: string }) => object | void | Promise<object | void>;
  /**
   * targeted tests: where an invocation armed with a hard timeout is cut off — at the first call of
   * its stage for which this answers (instead of at a call drawn by the schedule)
   */
  readonly hardTimeoutAt?: (stageId: string, command: object) => 'before' | 'after' | undefined;
  /** how often the coordinator's watchdog runs; @default 2 s where executions may fail unheard of, else never */
  readonly watchdogIntervalMs?: number;
  /** targeted tests: crash a coordinator task right before or after this write (asked before the schedule) */
  readonly coordinatorWriteCrash?: (where: CoordinatorWritePoint) => 'before' | 'after' | undefined;
  /** targeted tests: this invocation turns into a zombie at the point answered (asked instead of the schedule) */
  readonly zombieAt?: (stageId: string, event: KinesisStreamEvent) => ZombiePoint | undefined;
  /** targeted tests: an aimed zombie stalls only at a call of its point this accepts (it stays armed otherwise) */
  readonly zombieWhen?: (z: StalledZombie) => boolean;
  /**
   * targeted tests: a zombie stalls until this settles instead of for a drawn overrun (the test
   * holds it until the new owner is ahead); it must outlast the invocation timeout to be a zombie
   */
  readonly zombieHold?: (z: StalledZombie) => Promise<void>;
  /** targeted tests: called when a zombie's invocation has ended (its late writes are done) */
  readonly zombieEnded?: (z: StalledZombie, error: unknown) => void;
  /** targeted tests: the environment is recycled right before this invocation (a forced restore) */
  readonly recycleBefore?: (stageId: string, event: KinesisStreamEvent) => boolean;
}

export interface ChaosHooks {
  readonly options: Pick<
    LocalRunOptions,
    'wrapPorts' | 'wrapClients' | 'wrapHandler' | 'wrapCoordinator' | 'coordinatorClock' | 'invocationTimeoutMs' | 'recycleProbability' | 'watchdogIntervalMs' | 'statusEventLost'
  >;
  /** gives the hooks the runner (needed to fake a coordinator that dies before its commit) */
  attach(runner: LocalJobRunner): void;
  /** closes what the hooks started (the server that never answers) */
  dispose(): Promise<void>;
}

/** The invocation a hard timeout cuts off at its `at`-th SDK call (see `hard-timeout`). */
interface InvocationCut {
  readonly at: number;
  readonly when: 'before' | 'after';
  calls: number;
  /** the invocation has settled (work it left running in the background is not cut) */
  ended: boolean;
  cut(where: string): void;
}

const invocationCut = new AsyncLocalStorage<InvocationCut>();

/** A promise that never settles: the rest of a cut-off invocation never runs. */
const never = () => new Promise<never>(() => undefined);

/** The hooks that inject the schedule's faults into a LocalJobRunner. */
export function chaosHooks(schedule: FaultSchedule, opts: ChaosHookOptions): ChaosHooks {
  const envs = new Map<string, EnvState>();
  const envState = (id: string) => {
    let s = envs.get(id);
    if (!s) envs.set(id, (s = {}));
    return s;
  };
  let runner: LocalJobRunner | undefined;
  let commitless: Coordinator | undefined;
  let partialInject: { allowed: number } | undefined;
  let lostStatusEvents = 0;
  /** `n id` of every ack slow-ack holds back */
  const heldAcks = new Set<string>();

  /** the run is over: held acks stop waiting */
  let disposed = false;

  /**
   * Sends an ack once checkpoint n is no longer in flight. While n's progress window is the base one
   * (n − 1 was not aborted), nothing else bounds the wait: n cannot complete without this ack, so the
   * coordinator gives it up for want of progress, however late its looks come on a loaded machine.
   * After an abort the window has grown (doubled per abort in a row): then the ack lands after two
   * base windows, before the coordinator's look, and n completes late instead.
   */
  const lateAck = (n: number, send: () => Promise<unknown>): void => {
    void (async () => {
      const grown = n > 1 && runner !== undefined && (await runner.coordinator.get(n - 1))?.status === 'ABORTED';
      const until = grown ? Date.now() + 2 * opts.checkpointTimeoutMs + 1_000 : Infinity;
      while (!disposed && Date.now() < until && (!runner || (await runner.coordinator.get(n))?.status === 'IN_FLIGHT')) await sleep(250);
      if (!disposed) await send();
    })().catch(() => undefined); // the run may have ended meanwhile
  };

  const zombieDelay = () => opts.invocationTimeoutMs + (opts.zombieOverrunMs ?? 300 + schedule.int(700));
  const zombiePoints = opts.zombiePoints ?? ZOMBIE_POINTS;

  /** The zombie stalled in each environment (until its invocation ends). */
  const stalled = new Map<string, StalledZombie>();

  /** If this environment's current invocation is a zombie stalling at `point`, stall now. */
  const maybeStall = async (env: string, point: ZombiePoint, checkpointId?: number, rows?: number): Promise<void> => {
    const z = envs.get(env)?.zombie;
    if (!z || !z.armed || z.point !== point) return;
    const info: StalledZombie = { stageId: z.stageId, environment: env, point, ...(checkpointId !== undefined ? { checkpointId } : {}), ...(rows !== undefined ? { rows } : {}) };
    if (z.aimed && opts.zombieWhen && !opts.zombieWhen(info)) return;
    z.armed = false;
    schedule.count('zombie');
    schedule.observe(`zombie@${point}`);
    stalled.set(env, info);
    await (opts.zombieHold ? opts.zombieHold(info) : sleep(zombieDelay()));
  };

  const silent = silentServer(
    () => schedule.observe('sdk-hang-connections'),
    () => schedule.observe('sdk-hang-given-up'),
  );

  const observeFenced = (err: unknown) => {
    if ((err as { name?: string } | null)?.name === 'FencedError') schedule.observe('fenced-write-rejected');
  };

  const wrapPorts = (ports: RuntimePorts, ctx: { stage: PlanStage; environment: string }): RuntimePorts => {
    const env = ctx.environment;
    const where = (what: string) => `${env}.${what}`;
    const { control, state, writer, upsertSink, collectSink, deadLetters } = ports;
    return {
      ...ports,
      control: override(control, {
        takeOver: async (id, expected) => {
          try {
            return await control.takeOver(id, expected);
          } catch (err) {
            observeFenced(err);
            throw err;
          }
        },
        writeDelta: async (id, n, delta) => {
          await maybeStall(env, 'writeDelta', n);
          const ref = await control.writeDelta(id, n, delta);
          if (schedule.roll('crash-after-delta')) throw new ChaosCrash('crash-after-delta', where(`writeDelta(${n})`));
          return ref;
        },
        publishSnapshot: async (id, fence, pointer) => {
          await maybeStall(env, 'publishSnapshot', pointer.checkpointId);
          try {
            await control.publishSnapshot(id, fence, pointer);
          } catch (err) {
            observeFenced(err);
            throw err;
          }
        },
        commitPosition: async (id, fence, last, first) => {
          await maybeStall(env, 'commitPosition');
          try {
            return await control.commitPosition(id, fence, last, first);
          } catch (err) {
            observeFenced(err);
            throw err;
          }
        },
        ack: async (n, id) => {
          await maybeStall(env, 'ack', n);
          if (schedule.roll('crash-before-ack')) throw new ChaosCrash('crash-before-ack', where(`ack(${n})`));
          if (heldAcks.has(`${n} ${id}`) || schedule.roll('slow-ack')) {
            // the checkpoint's timeout is a progress window: an ack only a little late is waited
            // for. This one is held back until its checkpoint was given up for want of progress
            // (the invocation goes on, as if the write hung in the background), then lands late.
            // The instance's later acks of n (a restore acks its snapshot again) hang as well, or
            // one of them would complete n whenever a restore came first
            heldAcks.add(`${n} ${id}`);
            lateAck(n, () => control.ack(n, id));
            return { completedBy: false };
          }
          const r = await control.ack(n, id);
          if (schedule.roll('crash-after-ack')) throw new ChaosCrash('crash-after-ack', where(`ack(${n})`));
          return r;
        },
      }),
      state: override(state, {
        getRows: async (ids) => {
          if (ids.length && schedule.roll('crash-before-state-update')) throw new ChaosCrash('crash-before-state-update', where('getRows'));
          return state.getRows(ids);
        },
        applyRows: async (n, fence, rows) => {
          await maybeStall(env, 'applyRows', n, rows.length);
          if (rows.length && schedule.roll('crash-mid-apply')) {
            const k = schedule.int(rows.length);
            await state.applyRows(n, fence, rows.slice(0, k));
            throw new ChaosCrash('crash-mid-apply', where(`applyRows(${n}) after ${k}/${rows.length} rows`));
          }
          await state.applyRows(n, fence, rows);
        },
      }),
      writer: override(writer, {
        putAll: async (stream, records) => {
          await maybeStall(env, 'putAll');
          await writer.putAll(stream, records);
          if (schedule.roll('crash-after-emit')) throw new ChaosCrash('crash-after-emit', where('putAll'));
        },
      }),
      upsertSink: override(upsertSink, {
        write: async (table, keyAttribute, writes) => {
          await maybeStall(env, 'upsert');
          await upsertSink.write(table, keyAttribute, writes);
          if (schedule.roll('crash-after-emit', 0.5)) throw new ChaosCrash('crash-after-emit', where('upsert'));
        },
      }),
      collectSink: override(collectSink, {
        stage: async (sink, outputs) => {
          await maybeStall(env, 'collect');
          await collectSink.stage(sink, outputs);
          if (schedule.roll('crash-after-emit', 0.5)) throw new ChaosCrash('crash-after-emit', where('collect'));
        },
      }),
      deadLetters: override(deadLetters, {
        put: async (letter) => {
          await deadLetters.put(letter);
          if (schedule.roll('crash-after-emit', 0.5)) throw new ChaosCrash('crash-after-emit', where('deadLetters'));
        },
      }),
    };
  };

  const wrapClients = (clients: AwsClients, ctx: { stage: PlanStage; environment: string }): AwsClients => {
    const wrap = <C extends object>(service: keyof AwsClients, client: C, before: (cmd: object) => Promise<unknown> | undefined): C => {
      const send = (client as unknown as { send: (cmd: object, ...rest: unknown[]) => Promise<unknown> }).send.bind(client);
      const wrapped = async (original: object, ...rest: unknown[]) => {
        const cut = invocationCut.getStore();
        const when = cut && !cut.ended ? (opts.hardTimeoutAt ? opts.hardTimeoutAt(ctx.stage.id, original) : ++cut.calls === cut.at ? cut.when : undefined) : undefined;
        if (cut && when) {
          // a hard timeout at this call: the request is never sent, or applied with its response never read
          cut.ended = true;
          if (when === 'after') await send(original, ...rest).catch(() => undefined);
          cut.cut(`${original.constructor.name}:${when}`);
          return never();
        }
        const cmd = (opts.clientFault && (await opts.clientFault(service, original, ctx))) || original;
        if (schedule.roll('sdk-hang')) {
          schedule.observe(`sdk-hang:${cmd.constructor.name}`);
          hangFirstAttempt(cmd, await silent.port());
        }
        const r = await before(cmd);
        if (r !== undefined) return r;
        return send(cmd, ...rest);
      };
      return override(client, { send: wrapped } as unknown as Partial<C>);
    };
    const dynamoThrottle = (cmd: object) => {
      if (schedule.roll('throttle-dynamodb')) {
        schedule.observe(`throttled:${cmd.constructor.name}`);
        return Promise.reject(new DynamoThrottle({ message: 'chaos: The level of configured provisioned throughput for the table was exceeded', $metadata: {} }));
      }
      return undefined;
    };
    const kinesis = clients.kinesis;
    const doc = clients.doc;
    return {
      ...clients,
      kinesis: wrap('kinesis', clients.kinesis, (cmd) => {
        if (schedule.roll('throttle-kinesis')) {
          schedule.observe(`throttled:${cmd.constructor.name}`);
          return Promise.reject(new KinesisThrottle({ message: 'chaos: Rate exceeded for shard', $metadata: {} }));
        }
        if (losesResponse('kinesis', cmd) && schedule.roll('lost-response')) return lostResponse(kinesis, cmd, schedule);
        if (cmd instanceof PutRecordsCommand) return partialPutRecords(kinesis, cmd, schedule);
        return undefined;
      }),
      dynamodb: wrap('dynamodb', clients.dynamodb, dynamoThrottle),
      doc: wrap('doc', clients.doc, (cmd) => {
        const t = dynamoThrottle(cmd);
        if (t) return t;
        if (losesResponse('doc', cmd) && schedule.roll('lost-response')) return lostResponse(doc, cmd, schedule);
        if (cmd instanceof BatchGetCommand) return partialBatchGet(doc, cmd, schedule);
        if (cmd instanceof QueryCommand) return shortQueryPage(doc, cmd, schedule);
        return undefined;
      }),
      s3: wrap('s3', clients.s3, (cmd) => {
        if (schedule.roll('throttle-s3')) {
          schedule.observe(`throttled:${cmd.constructor.name}`);
          return Promise.reject(new S3ServiceException({ name: 'SlowDown', $fault: 'server', message: 'chaos: Please reduce your request rate.', $metadata: {} }));
        }
        if (losesResponse('s3', cmd) && schedule.roll('lost-response')) return lostResponse(clients.s3, cmd, schedule);
        return undefined;
      }),
      sfn: wrap('sfn', clients.sfn, (cmd) => (losesResponse('sfn', cmd) && schedule.roll('lost-response') ? lostResponse(clients.sfn, cmd, schedule) : undefined)),
    };
  };

  const wrapHandler = (handler: KinesisHandler, ctx: { stage: PlanStage; environment: string; reset: () => void }): KinesisHandler => {
    const invoke = faultedInvocation(handler, ctx);
    return async (event: KinesisStreamEvent) => {
      if (opts.recycleBefore?.(ctx.stage.id, event)) {
        schedule.observe('recycled-before-invocation');
        ctx.reset();
      }
      if (!schedule.chance('hard-timeout')) return invoke(event);
      // counted only when the invocation really reaches its cut (it may make fewer calls)
      let kill: (err: Error) => void = () => undefined;
      const killed = new Promise<never>((_, reject) => (kill = reject));
      const cut: InvocationCut = {
        at: 1 + schedule.int(12),
        when: schedule.random() < 0.5 ? 'before' : 'after',
        calls: 0,
        ended: false,
        cut(where) {
          schedule.count('hard-timeout');
          schedule.observe(`hard-timeout@${where}`);
          // Lambda ends the runtime of a timed-out invocation: the next one there starts cold. The
          // ESM hears of the timeout at once rather than at the deadline: the cut-off invocation
          // never does anything again, so waiting would change nothing but the seed's duration
          ctx.reset();
          kill(new ChaosCrash('hard-timeout', `${ctx.environment} at ${where}: Task timed out`));
        },
      };
      try {
        return await Promise.race([invocationCut.run(cut, () => invoke(event)), killed]);
      } finally {
        cut.ended = true;
      }
    };
  };

  const faultedInvocation = (handler: KinesisHandler, ctx: { stage: PlanStage; environment: string }): KinesisHandler => {
    return async (event: KinesisStreamEvent) => {
      const st = envState(ctx.environment);
      const aimed = opts.zombieAt?.(ctx.stage.id, event);
      if (aimed) st.zombie = { point: aimed, armed: true, stageId: ctx.stage.id, aimed: true };
      else if ((!opts.zombieStages || opts.zombieStages.includes(ctx.stage.id)) && schedule.chance('zombie')) {
        // counted only when it actually stalls (maybeStall)
        st.zombie = { point: zombiePoints[schedule.int(zombiePoints.length)]!, armed: true, stageId: ctx.stage.id };
      } else st.zombie = undefined;
      let failed: unknown;
      try {
        const slow = opts.slowHandlerMs?.(ctx.stage.id, event) ?? 0;
        if (slow > 0) await sleep(slow);
        await opts.beforeInvocation?.(ctx.stage.id, event);
        await maybeStall(ctx.environment, 'start');
        const out = await handler(event);
        if (schedule.roll('duplicate-delivery')) throw new ChaosCrash('duplicate-delivery', `${ctx.environment} after a successful batch`);
        return out;
      } catch (err) {
        failed = err;
        throw err;
      } finally {
        st.zombie = undefined;
        const z = stalled.get(ctx.environment);
        if (z) {
          stalled.delete(ctx.environment);
          opts.zombieEnded?.(z, failed);
        }
      }
    };
  };

  const skew = coordinatorClockSkew(schedule, opts.clockSkewMaxMs);
  const wrapCoordinator = (direct: (input: CoordinatorTaskInput) => Promise<unknown>) => {
    const run = inCoordinatorTask(direct);
    return (input: CoordinatorTaskInput): Promise<unknown> => skew.inTask(() => faultedTask(input));
    async function faultedTask(input: CoordinatorTaskInput): Promise<unknown> {
      await opts.beforeCoordinatorTask?.(input);
      if (input.action === 'commit' && runner && schedule.roll('coordinator-skips-commit')) {
        // COMPLETED is written, then the coordinator dies: nobody retries this commit
        commitless ??= awsCoordinator(runner.plan, runner.names, runner.clients, []);
        await commitless.commit(input.checkpointId);
        return { checkpointId: input.checkpointId, published: 0 };
      }
      const sourceShards = runner ? runner.plan.sources.reduce((a, src) => a + src.shards, 0) : 0;
      if (input.action === 'inject' && runner && sourceShards > 1 && schedule.roll('coordinator-partial-inject')) {
        partialInject = { allowed: 1 };
        try {
          await run(input);
        } finally {
          partialInject = undefined;
        }
        throw new ChaosCrash('coordinator-partial-inject', `inject ${input.checkpointId} reached one source shard`);
      }
      if (input.action === 'allocate' && schedule.roll('coordinator-left-to-watchdog')) {
        // Allocate opens the checkpoint, then the execution fails and nobody hears of it
        const opened = (await run(input)) as { checkpointId?: number } | undefined;
        schedule.observe(`left-to-watchdog:checkpoint-${opened?.checkpointId ?? '?'}`);
        lostStatusEvents++;
        throw new ChaosCrash('coordinator-left-to-watchdog', 'allocate, after opening the checkpoint');
      }
      if (schedule.roll('coordinator-task-failure')) {
        // Allocate has no Catch and retries only Lambda service errors: fail it the way Lambda does
        const err =
          input.action === 'allocate'
            ? Object.assign(new Error('chaos: Lambda service error'), { name: 'Lambda.ServiceException' })
            : new ChaosCrash('coordinator-task-failure', `coordinator ${input.action}`);
        if (input.action !== 'allocate' && schedule.random() < 0.5) await run(input); // fail after doing the work
        throw err;
      }
      const out = await run(input);
      await opts.afterCoordinatorTask?.(input, out);
      return out;
    }
  };

  return {
    options: {
      wrapPorts,
      wrapClients,
      wrapHandler,
      wrapCoordinator,
      coordinatorClock: skew.now,
      invocationTimeoutMs: opts.invocationTimeoutMs,
      recycleProbability: schedule.rates['env-recycled'],
      // the stack's scheduled watchdog, sped up; it runs where executions may fail unheard of
      ...(schedule.rates['coordinator-left-to-watchdog'] > 0 || opts.watchdogIntervalMs !== undefined ? { watchdogIntervalMs: opts.watchdogIntervalMs ?? 2_000 } : {}),
      statusEventLost: () => {
        if (lostStatusEvents <= 0) return false;
        lostStatusEvents--;
        return true;
      },
    },
    dispose: () => {
      disposed = true;
      return silent.close();
    },
    attach(r) {
      runner = r;
      crashCoordinatorWrites(r.clients, (where) => {
        const targeted = opts.coordinatorWriteCrash?.(where);
        if (targeted) return targeted;
        if (!schedule.roll('coordinator-crash-at-write')) return undefined;
        const when = schedule.random() < 0.5 ? 'before' : 'after';
        schedule.observe(`coordinator-crash@${where.task}#${where.write}:${when}`);
        return when;
      });
      loseCoordinatorResponses(r.clients, schedule, inCoordinatorTaskNow);
      // the coordinator writes barriers through the runner's own clients (not an environment's):
      // a partial injection lets the first barrier PutRecord of the task through and fails the rest
      const kinesis = r.clients.kinesis as unknown as { send: (cmd: object, ...rest: unknown[]) => Promise<unknown> };
      const send = kinesis.send.bind(r.clients.kinesis);
      kinesis.send = async (cmd: object, ...rest: unknown[]) => {
        if (partialInject && cmd instanceof PutRecordCommand && cmd.input.PartitionKey === 'barrier') {
          if (partialInject.allowed-- <= 0) throw new ChaosCrash('coordinator-partial-inject', `barrier PutRecord to ${cmd.input.ExplicitHashKey}`);
        }
        return send(cmd, ...rest);
      };
    },
  };
}
