/**
 * The chaos harness's fault schedule and the wrappers that inject faults through the local runner's
 * hooks (`wrapPorts`, `wrapClients`, `wrapHandler`, `wrapCoordinator`, plus its routing, recycling
 * and invocation-timeout options).
 *
 * Every decision comes from one seeded PRNG (no Math.random), so a seed always asks for the same
 * kind of trouble. The exact interleaving still depends on timing (the emulated stack is real and
 * concurrent), so a seed names a schedule, not a trace.
 *
 * A *profile* biases a seed toward the fault combinations that find the protocol's hard bugs (see the
 * protocol model: uniform faults find fencing, barrier-count and atomic-flush bugs in 1–2 % of seeds):
 * zombie + takeover, PutRecords failures right before a barrier, crashes between the delta, the
 * pointer, the apply and the ack, coordinator failures around the commit. Seeds cycle through the
 * profiles, so a handful of seeds covers every kind.
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
import { BatchGetCommand, QueryCommand, type BatchGetCommandOutput, type DynamoDBDocumentClient, type QueryCommandOutput } from '@aws-sdk/lib-dynamodb';
import type { KinesisStreamEvent } from 'aws-lambda';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { AwsClients } from '../../shared/adapters/aws/clients.js';
import { decodePacket } from '../../shared/codec/envelope.js';
import { Coordinator } from '../../shared/coordinator/coordinator.js';
import { awsCoordinator } from '../../shared/adapters/aws/coordinator-ports.js';
import type { CoordinatorTaskInput } from '../../shared/coordinator/protocol.js';
import type { PlanStage } from '../../shared/plan/plan.js';
import type { RuntimePorts } from '../../shared/runtime/ports.js';
import type { LocalJobRunner, LocalRunOptions } from '../../local/runner.js';
import type { KinesisHandler } from '../../local/event-source-poller.js';

/** Every fault the harness can inject. */
export const FAULT_KINDS = [
  /** a state read (StateStore.getRows) throws: the batch dies before any state update */
  'crash-before-state-update',
  /** a stream write or a sink write succeeds, then the invocation dies before returning */
  'crash-after-emit',
  /** the snapshot's delta is written, the invocation dies before the lease points at it */
  'crash-after-delta',
  /** the lease points at the new snapshot; applyRows writes some rows, then the invocation dies */
  'crash-mid-apply',
  /** the snapshot is durable, the invocation dies before its ack reaches the checkpoint */
  'crash-before-ack',
  /** the ack is recorded, then the invocation dies */
  'crash-after-ack',
  /** an invocation stalls past the invocation timeout at a write point and then goes on: a zombie */
  'zombie',
  /** PutRecords accepts only some entries; the others get ProvisionedThroughputExceededException */
  'putrecords-partial',
  /** the same, on a call carrying a barrier: entries before the barrier fail (they land after it), or the barrier does */
  'putrecords-partial-barrier',
  /** a DynamoDB call is throttled before it is sent */
  'throttle-dynamodb',
  /** a read answered in part: BatchGetItem returns some keys as UnprocessedKeys, a Query page stops early (LastEvaluatedKey) */
  'unprocessed-keys',
  /** a Kinesis call is throttled before it is sent */
  'throttle-kinesis',
  /** an S3 call answers SlowDown before it is sent */
  'throttle-s3',
  /** the handler succeeded but the ESM sees a failure and delivers the same batch again */
  'duplicate-delivery',
  /** a coordinator task fails (before or after doing its work) */
  'coordinator-task-failure',
  /** the coordinator's inject reaches only the first source shard, then the task fails (abort must re-inject) */
  'coordinator-partial-inject',
  /** the coordinator marks a checkpoint COMPLETED and dies before the sinks' commit (never retried) */
  'coordinator-skips-commit',
  /** a coordinator task dies right before or right after one of its writes (any write of any task) */
  'coordinator-crash-at-write',
  /** an ack is delayed past the checkpoint timeout: the checkpoint aborts */
  'slow-ack',
  /** an execution environment is recycled: its caches are gone (runner option) */
  'env-recycled',
] as const;

export type FaultKind = (typeof FAULT_KINDS)[number];

export type FaultRates = Partial<Record<FaultKind, number>>;

/** Named fault mixes; a seed picks one (seed mod count) unless a kind is forced. */
export const PROFILES: Readonly<Record<string, FaultRates>> = {
  /** a little of everything */
  mixed: {
    'crash-before-state-update': 0.03,
    'crash-after-emit': 0.03,
    'crash-after-delta': 0.05,
    'crash-mid-apply': 0.05,
    'crash-before-ack': 0.02,
    'crash-after-ack': 0.04,
    zombie: 0.03,
    'putrecords-partial': 0.08,
    'putrecords-partial-barrier': 0.3,
    'throttle-dynamodb': 0.02,
    'unprocessed-keys': 0.2,
    'throttle-kinesis': 0.03,
    'throttle-s3': 0.05,
    'duplicate-delivery': 0.05,
    'coordinator-task-failure': 0.05,
    'coordinator-partial-inject': 0.05,
    'coordinator-skips-commit': 0.15,
    'coordinator-crash-at-write': 0.03,
    'slow-ack': 0.01,
    'env-recycled': 0.1,
  },
  /** a zombie finishing after a takeover, with writes around it */
  'zombie-takeover': {
    zombie: 0.12,
    'crash-after-emit': 0.04,
    'duplicate-delivery': 0.05,
    'putrecords-partial': 0.05,
    'env-recycled': 0.15,
  },
  /** PutRecords failing right before a barrier, and crashes right after it */
  'putrecords-barrier': {
    'putrecords-partial-barrier': 0.7,
    'putrecords-partial': 0.2,
    'crash-after-emit': 0.05,
    'crash-after-delta': 0.08,
    'throttle-kinesis': 0.05,
    'env-recycled': 0.1,
  },
  /** crashes between delta, pointer, apply and ack */
  'atomic-flush': {
    'crash-after-delta': 0.15,
    'crash-mid-apply': 0.2,
    'crash-before-ack': 0.04,
    'crash-after-ack': 0.1,
    'crash-before-state-update': 0.05,
    'throttle-dynamodb': 0.03,
    'unprocessed-keys': 0.3,
    'env-recycled': 0.1,
  },
  /** the coordinator failing around commits, aborts by timeout, redelivered batches */
  coordinator: {
    'coordinator-task-failure': 0.12,
    'coordinator-partial-inject': 0.1,
    'coordinator-skips-commit': 0.35,
    'coordinator-crash-at-write': 0.06,
    'slow-ack': 0.04,
    'duplicate-delivery': 0.1,
    'throttle-s3': 0.1,
    'throttle-dynamodb': 0.02,
    'env-recycled': 0.1,
  },
};

export const PROFILE_NAMES = Object.keys(PROFILES);

/** Rate of a kind when it is the only one (--only-kind). */
export const SOLO_RATES: Readonly<Record<FaultKind, number>> = {
  'crash-before-state-update': 0.15,
  'crash-after-emit': 0.1,
  'crash-after-delta': 0.2,
  'crash-mid-apply': 0.25,
  'crash-before-ack': 0.05,
  'crash-after-ack': 0.15,
  zombie: 0.15,
  'putrecords-partial': 0.3,
  'putrecords-partial-barrier': 0.8,
  'throttle-dynamodb': 0.05,
  'unprocessed-keys': 0.5,
  'throttle-kinesis': 0.08,
  'throttle-s3': 0.2,
  'duplicate-delivery': 0.2,
  'coordinator-task-failure': 0.2,
  'coordinator-partial-inject': 0.2,
  'coordinator-skips-commit': 0.5,
  'coordinator-crash-at-write': 0.1,
  'slow-ack': 0.05,
  'env-recycled': 0.4,
};

/** Kinds with few opportunities per seed are ensured early (see ScheduleOptions.ensure). */
const ENSURE_AFTER: Partial<Record<FaultKind, number>> = {
  'coordinator-skips-commit': 1,
  'coordinator-task-failure': 2,
  'coordinator-partial-inject': 2,
  'coordinator-crash-at-write': 4,
  'throttle-s3': 1,
  'slow-ack': 2,
  'crash-before-ack': 2,
  'crash-after-ack': 2,
  'crash-after-delta': 2,
  'crash-mid-apply': 2,
};

/** A small, fast, seedable PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = (Math.imul(seed >>> 0, 2654435761) ^ 0x9e3779b9) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface ScheduleOptions {
  readonly seed: number;
  /** a profile name, or omitted: PROFILE_NAMES[seed mod count] */
  readonly profile?: string;
  /** only this kind, at its solo rate */
  readonly onlyKind?: FaultKind;
  /** explicit rates (replace the profile's) */
  readonly rates?: FaultRates;
  /**
   * every kind with a rate fires at least once per seed: from its `ensureAfter`-th opportunity on,
   * a kind that has not fired yet fires for sure; @default true
   */
  readonly ensure?: boolean;
  /** @default 3 */
  readonly ensureAfter?: number;
}

/** The seeded schedule: decides whether a fault fires at each opportunity and counts what fired. */
export class FaultSchedule {
  readonly seed: number;
  readonly profile: string;
  readonly rates: Readonly<Record<FaultKind, number>>;
  readonly counts = new Map<FaultKind, number>();
  /** what the harness observed the engine doing about the faults (fenced writes, retries, ...) */
  readonly observed = new Map<string, number>();
  /** faults fire only while enabled (the fault phase) */
  enabled = true;
  private readonly rng: () => number;
  private readonly opportunities = new Map<FaultKind, number>();
  private readonly ensure: boolean;
  private readonly ensureAfter: number;

  constructor(opts: ScheduleOptions) {
    this.seed = opts.seed;
    this.rng = prng(opts.seed);
    this.ensure = opts.ensure ?? true;
    this.ensureAfter = opts.ensureAfter ?? 3;
    let base: FaultRates;
    if (opts.rates) {
      base = opts.rates;
      this.profile = opts.profile ?? 'custom';
    } else if (opts.onlyKind) {
      base = { [opts.onlyKind]: SOLO_RATES[opts.onlyKind] };
      this.profile = `only:${opts.onlyKind}`;
    } else {
      this.profile = opts.profile ?? PROFILE_NAMES[opts.seed % PROFILE_NAMES.length]!;
      const p = PROFILES[this.profile];
      if (!p) throw new Error(`unknown fault profile "${this.profile}" (known: ${PROFILE_NAMES.join(', ')})`);
      base = p;
    }
    const rates = {} as Record<FaultKind, number>;
    for (const k of FAULT_KINDS) {
      const r = base[k] ?? 0;
      // jitter each rate per seed (×0.5 … ×1.5) so seeds of one profile differ in mix, not only in timing
      rates[k] = opts.rates ? r : Math.min(0.95, r * (0.5 + this.rng()));
    }
    this.rates = rates;
  }

  /** A number in [0, 1) from the schedule's stream. */
  random(): number {
    return this.rng();
  }

  int(n: number): number {
    return Math.floor(this.rng() * n);
  }

  /** True (and counted) when fault `kind` fires at this opportunity. */
  roll(kind: FaultKind, weight = 1): boolean {
    if (!this.chance(kind, weight)) return false;
    this.count(kind);
    return true;
  }

  /** Like roll, without counting (for faults counted only once they take effect). */
  chance(kind: FaultKind, weight = 1): boolean {
    if (!this.enabled) return false;
    const p = this.rates[kind] * weight;
    if (p <= 0) return false;
    const seen = (this.opportunities.get(kind) ?? 0) + 1;
    this.opportunities.set(kind, seen);
    if (this.ensure && seen >= (ENSURE_AFTER[kind] ?? this.ensureAfter) && !this.counts.get(kind)) return true;
    return this.rng() < p;
  }

  count(kind: FaultKind, n = 1): void {
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + n);
  }

  observe(what: string, n = 1): void {
    this.observed.set(what, (this.observed.get(what) ?? 0) + n);
  }

  /** kinds with a rate that have not fired yet (recycling is the runner's, not counted live) */
  missing(): FaultKind[] {
    return FAULT_KINDS.filter((k) => k !== 'env-recycled' && this.rates[k] > 0 && !this.counts.get(k));
  }

  get total(): number {
    let n = 0;
    for (const v of this.counts.values()) n += v;
    return n;
  }

  /** `kind=count` pairs, most frequent first. */
  describe(): string {
    return [...this.counts]
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .map(([k, n]) => `${k}=${n}`)
      .join(' ');
  }
}

/** The error every injected crash throws (so logs show it was us). */
export class ChaosCrash extends Error {
  override readonly name = 'ChaosCrash';
  constructor(readonly kind: FaultKind | string, where: string) {
    super(`chaos: injected ${kind} at ${where}`);
  }
}

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
  /** the job's checkpoint timeout; a slow ack waits longer than this */
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
  /** targeted tests: crash a coordinator task right before or after this write (asked before the schedule) */
  readonly coordinatorWriteCrash?: (where: CoordinatorWritePoint) => 'before' | 'after' | undefined;
}

export interface ChaosHooks {
  readonly options: Pick<LocalRunOptions, 'wrapPorts' | 'wrapClients' | 'wrapHandler' | 'wrapCoordinator' | 'invocationTimeoutMs' | 'recycleProbability'>;
  /** gives the hooks the runner (needed to fake a coordinator that dies before its commit) */
  attach(runner: LocalJobRunner): void;
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
          if (schedule.roll('slow-ack')) await sleep(opts.checkpointTimeoutMs + 300);
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
        const cmd = (opts.clientFault && (await opts.clientFault(service, original, ctx))) || original;
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
        if (cmd instanceof PutRecordsCommand) return partialPutRecords(kinesis, cmd, schedule);
        return undefined;
      }),
      dynamodb: wrap('dynamodb', clients.dynamodb, dynamoThrottle),
      doc: wrap('doc', clients.doc, (cmd) => {
        const t = dynamoThrottle(cmd);
        if (t) return t;
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

  const wrapHandler = (handler: KinesisHandler, ctx: { stage: PlanStage; environment: string }): KinesisHandler => {
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
