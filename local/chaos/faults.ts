/**
 * The wrappers that inject a FaultSchedule's faults into a LocalJobRunner through its hooks
 * (`wrapPorts`, `wrapClients`, `wrapHandler`, `wrapCoordinator`, plus its routing, recycling and
 * invocation-timeout options). Used by `sluice run --chaos`, `chaosCheck` (sluice/testing) and the
 * chaos harness of the project's own tests.
 */
import {
  GetShardIteratorCommand,
  ProvisionedThroughputExceededException as KinesisThrottle,
  PutRecordCommand,
  PutRecordsCommand,
  type KinesisClient,
  type PutRecordsCommandInput,
  type PutRecordsCommandOutput,
  type PutRecordsResultEntry,
} from '@aws-sdk/client-kinesis';
import { ProvisionedThroughputExceededException as DynamoThrottle } from '@aws-sdk/client-dynamodb';
import { S3ServiceException } from '@aws-sdk/client-s3';
import {
  BatchGetCommand,
  DeleteCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
  type BatchGetCommandOutput,
  type DynamoDBDocumentClient,
  type QueryCommandOutput,
} from '@aws-sdk/lib-dynamodb';
import type { KinesisStreamEvent } from 'aws-lambda';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { AwsClients } from '../../shared/adapters/aws/clients.js';
import { decodePacket } from '../../shared/codec/envelope.js';
import { Coordinator } from '../../shared/coordinator/coordinator.js';
import { awsCoordinator } from '../../shared/adapters/aws/coordinator-ports.js';
import type { CoordinatorTaskInput } from '../../shared/coordinator/protocol.js';
import type { PlanStage } from '../../shared/plan/plan.js';
import type { RuntimePorts } from '../../shared/runtime/ports.js';
import type { LocalJobRunner, LocalRunOptions } from '../runner.js';
import type { KinesisHandler } from '../event-source-poller.js';

import { ChaosCrash, FaultSchedule, type FaultKind } from './schedule.js';

export * from './schedule.js';

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
  zombie?: { point: ZombiePoint; armed: boolean };
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
  readonly hardTimeoutAt?: (stageId: string, command: string) => 'before' | 'after' | undefined;
  /** how often the coordinator's watchdog runs; @default 2 s where executions may fail unheard of, else never */
  readonly watchdogIntervalMs?: number;
  /** targeted tests: crash a coordinator task right before or after this write (asked before the schedule) */
  readonly coordinatorWriteCrash?: (where: CoordinatorWritePoint) => 'before' | 'after' | undefined;
}

export interface ChaosHooks {
  readonly options: Pick<
    LocalRunOptions,
    'wrapPorts' | 'wrapClients' | 'wrapHandler' | 'wrapCoordinator' | 'invocationTimeoutMs' | 'recycleProbability' | 'watchdogIntervalMs' | 'statusEventLost'
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

/**
 * A TCP server on 127.0.0.1 that accepts connections, reads requests and never answers: a request
 * sent to it hangs until the client gives up on it.
 */
function silentServer(onConnection: () => void, onGivenUp: () => void): { port: () => Promise<number>; close: () => Promise<void> } {
  let server: Server | undefined;
  let listening: Promise<number> | undefined;
  let closing = false;
  const sockets = new Set<Socket>();
  return {
    port() {
      listening ??= new Promise<number>((resolve, reject) => {
        server = createServer((socket) => {
          sockets.add(socket);
          onConnection();
          socket.on('data', () => undefined);
          socket.on('error', () => undefined);
          socket.on('close', () => {
            sockets.delete(socket);
            // the client gave up on its request (not us closing at the end)
            if (!closing) onGivenUp();
          });
        });
        server.on('error', reject);
        server.listen(0, '127.0.0.1', () => resolve((server!.address() as AddressInfo).port));
        server.unref();
      });
      return listening;
    },
    async close() {
      closing = true;
      for (const socket of sockets) socket.destroy();
      if (server?.listening) await new Promise<void>((resolve) => server!.close(() => resolve()));
    },
  };
}

/**
 * Sends the first attempt of `cmd` to the silent server (the SDK's retries go to the real endpoint):
 * a middleware inside the retry loop rewrites the attempt's host.
 */
function hangFirstAttempt(cmd: object, port: number): void {
  const stack = (cmd as { middlewareStack?: { add: (mw: unknown, opts: object) => void } }).middlewareStack;
  if (!stack) return;
  let attempts = 0;
  stack.add(
    (next: (args: { request: unknown }) => Promise<unknown>) => async (args: { request: unknown }) => {
      const req = args.request as { hostname?: string; port?: number; protocol?: string } | undefined;
      if (attempts++ === 0 && req && typeof req === 'object' && 'hostname' in req) {
        req.hostname = '127.0.0.1';
        req.port = port;
        req.protocol = 'http:';
      }
      return next(args);
    },
    { step: 'finalizeRequest', priority: 'low', name: 'chaosHangFirstAttempt' },
  );
}

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

  /**
   * Sends an ack once checkpoint n is no longer in flight, or after two windows: long enough for the
   * coordinator's looks (one per window) to see a window without progress and abort n; when the
   * window has grown (after aborts in a row) the ack lands first and n completes late instead.
   */
  const lateAck = (n: number, send: () => Promise<unknown>): void => {
    const until = Date.now() + 2 * opts.checkpointTimeoutMs + 1_000;
    void (async () => {
      while (Date.now() < until && (!runner || (await runner.coordinator.get(n))?.status === 'IN_FLIGHT')) await sleep(250);
      await send();
    })().catch(() => undefined); // the run may have ended meanwhile
  };

  const zombieDelay = () => opts.invocationTimeoutMs + (opts.zombieOverrunMs ?? 300 + schedule.int(700));
  const zombiePoints = opts.zombiePoints ?? ZOMBIE_POINTS;

  /** If this environment's current invocation is a zombie stalling at `point`, stall now. */
  const maybeStall = async (env: string, point: ZombiePoint): Promise<void> => {
    const z = envs.get(env)?.zombie;
    if (!z || !z.armed || z.point !== point) return;
    z.armed = false;
    schedule.count('zombie');
    schedule.observe(`zombie@${point}`);
    await sleep(zombieDelay());
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
          await maybeStall(env, 'writeDelta');
          const ref = await control.writeDelta(id, n, delta);
          if (schedule.roll('crash-after-delta')) throw new ChaosCrash('crash-after-delta', where(`writeDelta(${n})`));
          return ref;
        },
        publishSnapshot: async (id, fence, pointer) => {
          await maybeStall(env, 'publishSnapshot');
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
            await control.commitPosition(id, fence, last, first);
          } catch (err) {
            observeFenced(err);
            throw err;
          }
        },
        ack: async (n, id) => {
          await maybeStall(env, 'ack');
          if (schedule.roll('crash-before-ack')) throw new ChaosCrash('crash-before-ack', where(`ack(${n})`));
          if (schedule.roll('slow-ack')) {
            // the checkpoint's timeout is a progress window: an ack only a little late is waited
            // for. This one is held back until its checkpoint was given up for want of progress
            // (the invocation goes on, as if the write hung in the background), then lands late
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
          await maybeStall(env, 'applyRows');
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
        const when = cut && !cut.ended ? (opts.hardTimeoutAt ? opts.hardTimeoutAt(ctx.stage.id, original.constructor.name) : ++cut.calls === cut.at ? cut.when : undefined) : undefined;
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
        if (cmd instanceof PutRecordsCommand && schedule.roll('lost-response')) return lostResponse(kinesis, cmd, schedule);
        if (cmd instanceof PutRecordsCommand) return partialPutRecords(kinesis, cmd, schedule);
        return undefined;
      }),
      dynamodb: wrap('dynamodb', clients.dynamodb, dynamoThrottle),
      doc: wrap('doc', clients.doc, (cmd) => {
        const t = dynamoThrottle(cmd);
        if (t) return t;
        if (isConditionalWrite(cmd) && schedule.roll('lost-response')) return lostResponse(doc, cmd, schedule);
        if (cmd instanceof BatchGetCommand) return partialBatchGet(doc, cmd, schedule);
        if (cmd instanceof QueryCommand) return shortQueryPage(doc, cmd, schedule);
        return undefined;
      }),
      s3: wrap('s3', clients.s3, (cmd) => {
        if (schedule.roll('throttle-s3')) {
          schedule.observe(`throttled:${cmd.constructor.name}`);
          return Promise.reject(new S3ServiceException({ name: 'SlowDown', $fault: 'server', message: 'chaos: Please reduce your request rate.', $metadata: {} }));
        }
        return undefined;
      }),
      sfn: wrap('sfn', clients.sfn, () => undefined),
    };
  };

  const wrapHandler = (handler: KinesisHandler, ctx: { stage: PlanStage; environment: string; reset: () => void }): KinesisHandler => {
    const invoke = faultedInvocation(handler, ctx);
    return async (event: KinesisStreamEvent) => {
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
      if ((!opts.zombieStages || opts.zombieStages.includes(ctx.stage.id)) && schedule.chance('zombie')) {
        // counted only when it actually stalls (maybeStall)
        st.zombie = { point: zombiePoints[schedule.int(zombiePoints.length)]!, armed: true };
      } else st.zombie = undefined;
      try {
        const slow = opts.slowHandlerMs?.(ctx.stage.id, event) ?? 0;
        if (slow > 0) await sleep(slow);
        await opts.beforeInvocation?.(ctx.stage.id, event);
        await maybeStall(ctx.environment, 'start');
        const out = await handler(event);
        if (schedule.roll('duplicate-delivery')) throw new ChaosCrash('duplicate-delivery', `${ctx.environment} after a successful batch`);
        return out;
      } finally {
        st.zombie = undefined;
      }
    };
  };

  const wrapCoordinator = (direct: (input: CoordinatorTaskInput) => Promise<unknown>) => {
    const run = inCoordinatorTask(direct);
    return async (input: CoordinatorTaskInput): Promise<unknown> => {
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
    };
  };

  return {
    options: {
      wrapPorts,
      wrapClients,
      wrapHandler,
      wrapCoordinator,
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
    dispose: () => silent.close(),
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

// ------------------------------------------------------------------------------------------ coordinator crash points

/** The coordinator task running in this async context (its writes are crash points). */
const coordinatorTask = new AsyncLocalStorage<{ readonly task: string; writes: number }>();

/** Runs every coordinator task in its own context, so that its writes (and only its) can crash. */
export function inCoordinatorTask<I extends { action: string }, O>(run: (input: I) => Promise<O>): (input: I) => Promise<O> {
  return (input) => coordinatorTask.run({ task: input.action, writes: 0 }, () => run(input));
}

/** Commands that change something: the crash points of the coordinator's tasks. */
const WRITE_COMMANDS = new Set([
  'PutCommand',
  'UpdateCommand',
  'DeleteCommand',
  'BatchWriteCommand',
  'PutItemCommand',
  'UpdateItemCommand',
  'DeleteItemCommand',
  'PutRecordCommand',
  'PutRecordsCommand',
  'UpdateShardCountCommand',
  'PutObjectCommand',
  'DeleteObjectCommand',
  'DeleteObjectsCommand',
]);

export function isWriteCommand(cmd: object): boolean {
  return WRITE_COMMANDS.has(cmd.constructor.name);
}

/** Where a coordinator task is about to write: its action and the write's number in it (1-based). */
export interface CoordinatorWritePoint {
  readonly task: string;
  readonly write: number;
  readonly command: string;
}

/**
 * Patches the clients a Coordinator uses (in place): every write sent inside a coordinator task
 * (see inCoordinatorTask) asks `decide` whether the task dies right before it, right after it, or
 * not at all. A crash after the write is a lost response too: the write took effect, the task saw an
 * error (as a Lambda timeout or an SDK retry that exhausted itself would).
 */
export function crashCoordinatorWrites(clients: AwsClients, decide: (where: CoordinatorWritePoint) => 'before' | 'after' | undefined): void {
  for (const service of ['doc', 'kinesis', 's3'] as const) {
    const client = clients[service] as unknown as { send: (cmd: object, ...rest: unknown[]) => Promise<unknown> };
    const send = client.send.bind(client);
    client.send = async (cmd: object, ...rest: unknown[]) => {
      const ctx = coordinatorTask.getStore();
      if (!ctx || !isWriteCommand(cmd)) return send(cmd, ...rest);
      const where = { task: ctx.task, write: ++ctx.writes, command: cmd.constructor.name };
      const when = decide(where);
      const crash = () => new ChaosCrash('coordinator-crash-at-write', `coordinator ${where.task}, ${when} write #${where.write} (${where.command})`);
      if (when === 'before') throw crash();
      const out = await send(cmd, ...rest);
      if (when === 'after') throw crash();
      return out;
    };
  }
}

/**
 * BatchGetItem (document client) answering only part of the keys: the rest come back as
 * UnprocessedKeys, as DynamoDB does under load. A reader that ignores them loses state.
 */
async function partialBatchGet(doc: DynamoDBDocumentClient, cmd: BatchGetCommand, schedule: FaultSchedule): Promise<BatchGetCommandOutput | undefined> {
  const items = cmd.input.RequestItems ?? {};
  const tables = Object.keys(items);
  if (tables.length !== 1) return undefined;
  const table = tables[0]!;
  const spec = items[table]!;
  const keys = spec.Keys ?? [];
  if (keys.length < 1 || !schedule.roll('unprocessed-keys')) return undefined;
  const cut = schedule.int(keys.length); // 0 … n-1 keys answered now
  const answered = keys.slice(0, cut);
  const rest = keys.slice(cut);
  let responses: Record<string, Record<string, unknown>[]> = { [table]: [] };
  let metadata: BatchGetCommandOutput['$metadata'] = { httpStatusCode: 200 };
  if (answered.length) {
    const out = await doc.send(new BatchGetCommand({ ...cmd.input, RequestItems: { [table]: { ...spec, Keys: answered } } }));
    metadata = out.$metadata;
    responses = (out.Responses as Record<string, Record<string, unknown>[]> | undefined) ?? responses;
    const again = out.UnprocessedKeys?.[table]?.Keys ?? [];
    rest.unshift(...again);
  }
  return { $metadata: metadata, Responses: responses, UnprocessedKeys: { [table]: { ...spec, Keys: rest } } };
}

/**
 * A Query page cut short: DynamoDB ends a page at 1 MB (or under load) and says where to go on with
 * LastEvaluatedKey. A reader that stops at the first page loses the items of the others.
 */
async function shortQueryPage(doc: DynamoDBDocumentClient, cmd: QueryCommand, schedule: FaultSchedule): Promise<QueryCommandOutput | undefined> {
  if (cmd.input.Limit !== undefined || !schedule.roll('unprocessed-keys')) return undefined;
  const out = await doc.send(new QueryCommand({ ...cmd.input, Limit: 1 }));
  return out;
}

/** A DynamoDB write with a condition (document client): its retry can meet its own earlier write. */
function isConditionalWrite(cmd: object): boolean {
  if (cmd instanceof TransactWriteCommand) return true;
  return (cmd instanceof PutCommand || cmd instanceof UpdateCommand || cmd instanceof DeleteCommand) && cmd.input.ConditionExpression !== undefined;
}

/**
 * A lost response: the request is applied, its response never arrives (a connection reset, a
 * timeout), and the SDK sends the same request again — what the caller gets is the retry's answer.
 * An error of the first attempt is the caller's (nothing was lost).
 */
async function lostResponse(client: { send: (cmd: never) => Promise<unknown> }, cmd: object, schedule: FaultSchedule): Promise<unknown> {
  const send = client.send.bind(client) as (cmd: object) => Promise<unknown>;
  await send(cmd);
  schedule.observe(`lost-response:${cmd.constructor.name}`);
  return send(cmd);
}

/** True when a Kinesis record is a packet holding a barrier. */
function carriesBarrier(data: Uint8Array | undefined): boolean {
  if (!data) return false;
  try {
    return decodePacket(data).envelopes.some((e) => e.kind === 'barrier');
  } catch {
    return false;
  }
}

/**
 * PutRecords with a partial failure: only some entries are really sent; the others are answered
 * with ProvisionedThroughputExceededException, in the response shape the SDK returns (one result per
 * entry, in request order, FailedRecordCount set).
 */
async function partialPutRecords(kinesis: KinesisClient, cmd: PutRecordsCommand, schedule: FaultSchedule): Promise<PutRecordsCommandOutput | undefined> {
  const input: PutRecordsCommandInput = cmd.input;
  const entries = input.Records ?? [];
  if (!entries.length) return undefined;
  const fail = new Set<number>();
  const barrierAt = entries.findIndex((e) => carriesBarrier(e.Data));
  // a partial failure needs something to succeed: a barrier alone in its call is left alone
  if (barrierAt >= 0 && entries.length > 1 && schedule.roll('putrecords-partial-barrier')) {
    // entries bound for the barrier's shard that precede it fail and land after it; if there are
    // none, the barrier itself fails and lands after whatever else the call carries
    const hashKey = entries[barrierAt]!.ExplicitHashKey;
    for (let i = 0; i < barrierAt; i++) if (entries[i]!.ExplicitHashKey === hashKey) fail.add(i);
    if (!fail.size) fail.add(barrierAt);
    schedule.observe(fail.has(barrierAt) ? 'barrier-entry-failed' : 'entries-before-barrier-failed');
  } else if (entries.length > 1 && schedule.roll('putrecords-partial')) {
    for (let i = 0; i < entries.length; i++) if (schedule.random() < 0.5) fail.add(i);
    if (!fail.size) fail.add(schedule.int(entries.length));
    if (fail.size === entries.length) fail.delete(schedule.int(entries.length));
  } else return undefined;

  const sendIdx = entries.map((_, i) => i).filter((i) => !fail.has(i));
  const results: PutRecordsResultEntry[] = entries.map(() => ({
    ErrorCode: 'ProvisionedThroughputExceededException',
    ErrorMessage: 'Rate exceeded for shard shardId-000000000000 in stream under account 000000000000.',
  }));
  let failed = fail.size;
  let metadata: PutRecordsCommandOutput['$metadata'] = { httpStatusCode: 200 };
  if (sendIdx.length) {
    const out = await kinesis.send(new PutRecordsCommand({ ...input, Records: sendIdx.map((i) => entries[i]!) }));
    metadata = out.$metadata;
    sendIdx.forEach((i, j) => {
      const r = out.Records?.[j];
      if (r && !r.ErrorCode) results[i] = { SequenceNumber: r.SequenceNumber, ShardId: r.ShardId };
      else failed++;
    });
  }
  return { $metadata: metadata, FailedRecordCount: failed, Records: results, EncryptionType: 'NONE' };
}

/**
 * Client fault for targeted tests: while `active()`, the engine's replay reads (through the stage's
 * own clients; the ESM poller uses other clients) find the record they start from trimmed away, as a
 * replay point older than the stream's retention would. Kinesis does not refuse such a position: an
 * iterator at or after a trimmed sequence number starts at the oldest record still retained. So every
 * iterator asked for at or after a sequence number is served just after it.
 */
export function trimmedReplayFault(active: () => boolean, onFault?: () => void) {
  return (service: keyof AwsClients, command: object): object | void => {
    if (service !== 'kinesis' || !active() || !(command instanceof GetShardIteratorCommand)) return;
    const { ShardIteratorType: type, StartingSequenceNumber: seq } = command.input;
    if ((type !== 'AT_SEQUENCE_NUMBER' && type !== 'AFTER_SEQUENCE_NUMBER') || !seq) return;
    onFault?.();
    return new GetShardIteratorCommand({ ...command.input, ShardIteratorType: 'AFTER_SEQUENCE_NUMBER' });
  };
}
