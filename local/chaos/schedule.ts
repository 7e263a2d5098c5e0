/**
 * The fault schedule of Sluice's chaos testing: every fault kind, the named fault mixes (profiles)
 * and the seeded schedule that decides, at each opportunity, whether a fault fires.
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
import { mulberry32 } from '../../shared/runtime/random.js';

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
  /** an ack is held back (the invocation goes on) until its checkpoint was aborted for want of progress, two windows at most: it lands late */
  'slow-ack',
  /** an execution environment is recycled: its caches are gone (runner option) */
  'env-recycled',
  /**
   * a PutRecords call or a conditional DynamoDB write is applied, its response is lost, and the SDK
   * sends the same request again: PutRecords entries land twice, a conditional write's retry meets
   * its own earlier write
   */
  'lost-response',
  /**
   * a hard Lambda timeout: the invocation is cut off at one of its SDK calls (before the request is
   * sent, or after it was applied and before its response is read) and never goes on; its
   * environment starts cold; the ESM retries the batch
   */
  'hard-timeout',
  /** an SDK call hangs: its first attempt goes to a server that never answers (the request timeout must end it) */
  'sdk-hang',
  /** the keyed user function throws for one key, every time (after updating its state and emitting) */
  'key-throws-forever',
  /** a KPL aggregate record on the source whose checksum or protobuf is broken */
  'malformed-kpl-aggregate',
  /**
   * the coordinator execution fails right after Allocate opened a checkpoint, and its status event
   * is lost: only the scheduled watchdog starts a new execution
   */
  'coordinator-left-to-watchdog',
  /** a coordinator task runs in an environment whose wall clock is off by up to ±CLOCK_SKEW_MAX_MS (clock-skew.ts) */
  'clock-skew',
  /** someone outside the job splits a source shard, or merges two adjacent ones, while records arrive (source-reshard.ts) */
  'source-resharded-outside',
  /** a Kinesis, DynamoDB or S3 endpoint is unreachable for a while (connections refused and reset), then answers with its data intact (endpoint-outage.ts) */
  'endpoint-outage',
] as const;

export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * Kinds that change the input or the job itself (the chaos job's own input and function): a user's
 * job checked by `chaosCheck` cannot take them, its fault-free run would see other input.
 */
export const INPUT_FAULT_KINDS: readonly FaultKind[] = ['key-throws-forever', 'malformed-kpl-aggregate'];

export type FaultRates = Partial<Record<FaultKind, number>>;

/**
 * Kinds no seeded profile draws (each still runs alone with `--only-kind`, and has its targeted
 * test). A kind goes here while an open finding about it stands; none does now.
 */
export const KINDS_OUTSIDE_PROFILES: readonly FaultKind[] = [];

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
    'lost-response': 0.03,
    'hard-timeout': 0.02,
    'sdk-hang': 0.001,
    'key-throws-forever': 1,
    'malformed-kpl-aggregate': 0.3,
    'clock-skew': 0.2,
    'source-resharded-outside': 0.3,
    'endpoint-outage': 0.05,
  },
  /** a zombie finishing after a takeover, with writes around it */
  'zombie-takeover': {
    zombie: 0.12,
    'crash-after-emit': 0.04,
    'duplicate-delivery': 0.05,
    'putrecords-partial': 0.05,
    'env-recycled': 0.15,
    'hard-timeout': 0.04,
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
    'key-throws-forever': 1,
    'malformed-kpl-aggregate': 0.3,
    'coordinator-left-to-watchdog': 0.04,
    'clock-skew': 0.3,
    'source-resharded-outside': 0.3,
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
  'lost-response': 0.15,
  'hard-timeout': 0.1,
  'sdk-hang': 0.01,
  'key-throws-forever': 1,
  'malformed-kpl-aggregate': 0.5,
  'coordinator-left-to-watchdog': 0.1,
  'clock-skew': 0.5,
  'source-resharded-outside': 0.5,
  'endpoint-outage': 0.1,
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
  'key-throws-forever': 1,
  'malformed-kpl-aggregate': 2,
};

/** A small, fast, seedable PRNG (mulberry32). */
export function prng(seed: number): () => number {
  // the seed is spread first, so that neighbouring seeds start far apart
  return mulberry32(Math.imul(seed >>> 0, 2654435761) ^ 0x9e3779b9);
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
  /** kinds that never fire (a job whose settings rule them out) */
  readonly exclude?: readonly FaultKind[];
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
      if (opts.exclude?.includes(k)) rates[k] = 0;
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

  /**
   * From now on only `kinds` fire. A kind with one chance per commit (a coordinator that dies before
   * the sinks' commit) never gets it while the other faults abort every checkpoint — on a busy
   * machine they may abort them all; narrowing the schedule to the kinds still missing gives them one.
   */
  narrowTo(kinds: readonly FaultKind[]): void {
    for (const k of FAULT_KINDS) if (!kinds.includes(k)) (this.rates as Record<FaultKind, number>)[k] = 0;
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
