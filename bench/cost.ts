/**
 * The cost model: what a deployed job costs per month, service by service, from its plan and an
 * event rate — every item the deployment bills, at list prices (prices.ts plus the CloudWatch, KMS
 * and storage prices below). `sluice cost`, `npm run bench -- --only cost` and the bench's cost
 * table all print it.
 *
 * Two figures are reported apart, as the targets define them: the streams' shard-hours (the source
 * streams' stream-hours in on-demand mode; the streams between stages are always provisioned) and
 * the producers' own PUT payload units (or on-demand ingest) into the source streams.
 *
 * The stage functions' activity (stage-activity.ts) is split into what each event costs and what
 * each batch costs, either metered in process for the job (bench/pipeline.ts, `fromMeter`) or as the
 * bench measured it for its keyed job (`MEASURED`); the batches come from the job's batch settings
 * (its event source mappings' batch size and window, SluiceJob's defaults unless given). Everything
 * tied to checkpoints, the coordinator, logs, metrics, alarms, the dashboard, keys and storage is
 * counted here from the plan.
 */
import type { Plan } from '../shared/plan/plan.js';
import { GC_PERIOD_MS } from '../shared/coordinator/gc.js';
import { checkpointsPerRound, pauseMsOf, roundsByDefault, roundsRefusal } from '../shared/coordinator/loop.js';
import { materializeEvery } from '../shared/runtime/changelog.js';
import { DETAILED_METRICS, STEADY_METRICS, WATCHED_METRICS, watchedMetrics } from '../shared/runtime/metric-names.js';
import { ASSUMPTIONS, HOURS_PER_MONTH, PRICES, SECONDS_PER_MONTH } from './prices.js';
import { POLL_INTERVAL_MS } from '../cdk/stage-batching.js';
import { ACK_POLL_SECONDS, barrierWaitMs, directAckReads } from '../cdk/ack-wait.js';
import { activityOf, defaultBatching, type Batching, type StageRates } from './stage-activity.js';

/** List prices this model needs beyond prices.ts (us-east-1, 2025 pages, not re-checked). */
export const MORE_PRICES = {
  logs: { ingestedGb: 0.5, storedGbMonth: 0.03 },
  cloudwatch: { customMetricMonth: 0.3, dashboardMonth: 3, alarmMonth: 0.1, metricsInsightsAlarmPerMetricMonth: 0.1 },
  kms: { keyMonth: 1, request: 0.03 / 10_000 },
  dynamodb: { storedGbMonth: 0.25, pitrGbMonth: 0.2 },
  s3: { storedGbMonth: 0.023, list: 0.005 / 1000 },
  kinesisOnDemand: { streamHour: 0.04, ingestedGb: 0.08, retrievedGb: 0.04 },
} as const;

export interface CostOptions {
  readonly plan: Plan;
  readonly eventsPerSecond: number;
  /** what the stage functions do per event and per batch; @default MEASURED (the bench's keyed job) */
  readonly rates?: StageRates;
  /** the stages' batch size, batching window and memory; @default what SluiceJob deploys for the plan (defaultBatching) */
  readonly batching?: Batching;
  /** bytes per event the producers put; @default 200 */
  readonly eventBytes?: number;
  /** capacity mode of the source streams (SluiceJob onDemandSources); the streams between stages are always provisioned */
  readonly kinesisMode?: 'provisioned' | 'on-demand';
  /** a customer-managed key (encryptionKey); @default none (AWS-managed keys) */
  readonly customerKey?: boolean;
  /** the coordinator parks while no input arrives (idleCoordinator); @default true */
  readonly idleCoordinator?: boolean;
  /** the job's CloudWatch dashboard (SluiceJob `dashboard`); @default false, as the construct */
  readonly dashboard?: boolean;
  /** distinct keys held in state (storage, reloads); @default 10,000 */
  readonly keys?: number;
  /** watchdog period in minutes; @default 5 */
  readonly watchdogMinutes?: number;
  readonly transitionsPerCheckpoint?: number;
  /** checkpoints in Express rounds (SluiceJob `expressCheckpoints`); @default as SluiceJob: `roundsByDefault` */
  readonly expressCheckpoints?: boolean;
  /** the steady metrics only SluiceJob `detailedMetrics` publishes; @default false */
  readonly detailedMetrics?: boolean;
  /** the functions' log level (SluiceJob `logLevel`): Lambda's platform lines are sent at DEBUG and INFO only; @default 'WARN' */
  readonly logLevel?: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
}

export interface MonthlyLine {
  readonly service: string;
  readonly item: string;
  readonly quantity: number;
  readonly unit: string;
  readonly usd: number;
}

export interface MonthlyCost {
  readonly eventsPerSecond: number;
  readonly checkpointIntervalS: number;
  readonly lines: MonthlyLine[];
  /** everything but the shards and the producers' PUTs */
  readonly usd: number;
  /** reported apart: every stream's shard-hours (the source streams' stream-hours in on-demand mode) */
  readonly shardsUsd: number;
  /** reported apart: the producers' PUT payload units (or on-demand ingest) into the source streams */
  readonly producerPutsUsd: number;
  readonly checkpointsPerMonth: number;
  /** billed Standard transitions per checkpoint (with Express rounds: the Standard execution's per round, spread over the round's checkpoints) */
  readonly transitionsPerCheckpoint: number;
  readonly expressCheckpoints: boolean;
  /** the batch settings priced, and the batches a second they make of the input while it flows */
  readonly batching: Batching;
  readonly batchesPerSecond: number;
}

/**
 * Metric names the functions publish in steady state, per stage and for the coordinator
 * (shared/runtime/metric-names.ts); the rare ones (dead letters, cache misses, …) have data in
 * few hours and are not counted.
 */
const steadyMetrics = (detailed: boolean, watched: readonly string[]) => ({
  stage: STEADY_METRICS.stage.length + (detailed ? DETAILED_METRICS.stage.length : 0),
  coordinator: STEADY_METRICS.coordinator.length + (detailed ? DETAILED_METRICS.coordinator.length + WATCHED_METRICS.coordinator.length : watched.length),
});
/** bytes Lambda writes per invocation (START, END, REPORT), sent at log levels DEBUG and INFO only (cdk/sluice-function.ts) */
const PLATFORM_LOG_BYTES = 360;
/**
 * bytes of one EMF document: the metrics an environment counted in a minute (functions/telemetry.ts),
 * written once a minute per busy environment, or once per invocation where invocations are further apart
 */
const EMF_LOG_BYTES = 900;
const EMF_PERIOD_S = 60;
/**
 * Express rounds (cdk/coordinator-state-machine.ts): the Standard states per round (Allocate, Round,
 * Rounded?, Pause); the memory an Express execution is billed at (its 64 MB minimum).
 */
export const ROUND_STANDARD_TRANSITIONS = 4;
const EXPRESS_BILLED_GB = 64 / 1024;
/**
 * An Express round's reads of a checkpoint's acks: it first reads them after the least time the
 * barrier takes to the last stage (`barrierWaitMs`, a free Wait), then one a second while they
 * arrive, and one finds them all. The barrier's way is taken at most one window (or poll, about a
 * second) per stage on the job's longest path of stages (an assumption on the slow side: a barrier
 * waits a whole window only if it arrives just as one opens); the reads cover what of it is left
 * after the first wait.
 */
export function ackReadsPerCheckpoint(plan: Plan, b: Batching): number {
  const hopS = Math.max(b.windowMs, POLL_INTERVAL_MS) / 1000;
  const depth = new Map<string, number>();
  for (const s of plan.stages) depth.set(s.id, 1 + (s.input.kind === 'exchange' ? Math.max(...s.input.fromStages.map((id) => depth.get(id) ?? 0)) : 0));
  const waitedS = barrierWaitMs(plan, () => b.windowMs) / 1000;
  return 1 + Math.ceil(Math.max(0, Math.max(...depth.values()) * hopS - waitedS) / ACK_POLL_SECONDS);
}
/**
 * coordinator DynamoDB units per checkpoint (allocate, begin's quiet check, inject — its members read,
 * the topology it fixes and its mark —, await, commit, close), measured by reading loop.ts/coordinator.ts
 */
const COORDINATOR_WRU = 11;
/** write units of deleting one checkpoint record (coordinator.ts gc: those past CHECKPOINT_HISTORY) */
const CHECKPOINT_RECORD_DELETE_WRU = 1;
const COORDINATOR_RRU = 15;
const COORDINATOR_TASK_S = ASSUMPTIONS.coordinatorTaskMs / 1000;
/**
 * How often a stage's execution environment is replaced and its new one reads back the state of
 * its keys (Lambda does not document environment lifetimes; hours are typical: one an hour is on
 * the safe side). The metered run counts steady state only (every key cached after its warm-up).
 */
const ENVIRONMENT_LIFETIME_HOURS = 1;
/** bytes of state per key, items packed by key group (the storage figure uses the same) */
const STATE_BYTES_PER_KEY = 150;

export function monthlyCost(o: CostOptions): MonthlyCost {
  const plan = o.plan;
  const eps = o.eventsPerSecond;
  const active = eps > 0;
  const idle = o.idleCoordinator ?? true;
  const S = SECONDS_PER_MONTH;
  const lines: MonthlyLine[] = [];
  const line = (service: string, item: string, quantity: number, unit: string, price: number) => lines.push({ service, item, quantity, unit, usd: quantity * price });
  const pauseS = pauseMsOf(plan.checkpoint) / 1000;
  // rounds the construct would refuse to deploy are not priced either
  const refusal = o.expressCheckpoints ? roundsRefusal(plan.checkpoint) : undefined;
  if (refusal) throw new Error(refusal);
  const express = o.expressCheckpoints ?? roundsByDefault(plan.checkpoint);
  const perRound = express ? checkpointsPerRound(plan.checkpoint) : 1;
  const transitions = express ? ROUND_STANDARD_TRANSITIONS / perRound : (o.transitionsPerCheckpoint ?? 3);
  // an idle coordinator takes no checkpoint; an active one one per pause (plus the commit, ~1 s)
  const checkpoints = active || !idle ? S / (pauseS + 1) : 0;
  const rounds = express ? checkpoints / perRound : 0;
  const batching = o.batching ?? defaultBatching(plan);
  const a = active ? activityOf(plan, eps, { rates: o.rates, batching, eventBytes: o.eventBytes, checkpointsPerS: checkpoints / S }) : undefined;
  // a commit collects garbage about once a minute (shared/coordinator/gc.ts collectsGarbage)
  const gcEvery = Math.max(1, Math.ceil(GC_PERIOD_MS / (pauseS * 1000)));
  const gcRuns = checkpoints / gcEvery;
  const parkedRechecks = active || !idle ? 0 : HOURS_PER_MONTH; // Allocate's hourly re-check (IDLE_RECHECK_SECONDS)
  const sourceStages = plan.stages.filter((s) => s.input.kind === 'source');
  const innerStages = plan.stages.filter((s) => s.input.kind !== 'source');
  const shards = plan.stages.reduce((x, s) => x + s.parallelism, 0);
  const sourceShards = sourceStages.reduce((x, s) => x + s.parallelism, 0);
  const innerShards = innerStages.reduce((x, s) => x + s.parallelism, 0);
  const instances = shards;
  const watchdogRuns = (S / 60) / (o.watchdogMinutes ?? 5);
  const bytes = o.eventBytes ?? 200;
  const keys = o.keys ?? 10_000;

  // Kinesis: every stream's shard-hours (or the source streams' on-demand stream-hours) and the
  // producers' PUTs into the source streams are reported apart, as the targets define them
  let shardsUsd = innerShards * HOURS_PER_MONTH * PRICES.kinesis.shardHour;
  let producerPutsUsd: number;
  if ((o.kinesisMode ?? 'provisioned') === 'on-demand') {
    shardsUsd += sourceStages.length * HOURS_PER_MONTH * MORE_PRICES.kinesisOnDemand.streamHour;
    producerPutsUsd = ((eps * bytes * S) / 1e9) * MORE_PRICES.kinesisOnDemand.ingestedGb;
    line('Kinesis', 'on-demand retrieval of the source streams by the source stages (GB)', (eps * bytes * S) / 1e9, 'GB', MORE_PRICES.kinesisOnDemand.retrievedGb);
    line('Kinesis', 'on-demand ingest of the barriers (one per source shard per checkpoint, 1 KB minimum each)', (checkpoints * sourceShards * 1024) / 1e9, 'GB', MORE_PRICES.kinesisOnDemand.ingestedGb);
  } else {
    shardsUsd += sourceShards * HOURS_PER_MONTH * PRICES.kinesis.shardHour;
    producerPutsUsd = eps * S * Math.max(1, Math.ceil(bytes / (25 * 1024))) * PRICES.kinesis.putPayloadUnit;
    line('Kinesis', 'PUT payload units: barriers (one per source shard per checkpoint)', checkpoints * sourceShards, 'units', PRICES.kinesis.putPayloadUnit);
  }
  line('Kinesis', 'PUT payload units: stage → stage (packed)', (a?.interStagePutUnits ?? 0) * S, 'units', PRICES.kinesis.putPayloadUnit);

  // Lambda
  line('Lambda', `stage invocations (ESM batches: ${batchingWords(batching)})`, (a?.stageInvocations ?? 0) * S, 'requests', PRICES.lambda.request);
  line('Lambda', `stage GB-s (${batching.memoryMb} MB): CPU and each checkpoint's requests`, (a?.eventGbSeconds ?? 0) * S, 'GB-s', PRICES.lambda.gbSecondArm);
  line('Lambda', `stage GB-s (${batching.memoryMb} MB): waiting on each batch's lease, position and PutRecords`, (a?.batchGbSeconds ?? 0) * S, 'GB-s', PRICES.lambda.gbSecondArm);
  const ackReads = ackReadsPerCheckpoint(plan, batching);
  // a round reads the acks itself (a GetItem: the RRU below); an unacked checkpoint's every (K+1)th read is the function's poll
  const ackPolls = express ? Math.floor(ackReads / (directAckReads(plan.checkpoint.timeoutMs) + 1)) : 0;
  const perCheckpointTasks = express ? 2 + ackPolls : 3;
  const coordInvocations = checkpoints * perCheckpointTasks + parkedRechecks;
  const expressTasks = `allocate, commit${ackPolls ? `, ${ackPolls} ack polls` : ''} per checkpoint; its ${ackReads} ack reads are DynamoDB reads`;
  line('Lambda', express ? `coordinator invocations (${expressTasks})` : 'coordinator invocations (begin, await, commit per checkpoint)', coordInvocations, 'requests', PRICES.lambda.request);
  line('Lambda', `coordinator GB-s (${ASSUMPTIONS.coordinatorMemoryMb} MB)`, coordInvocations * COORDINATOR_TASK_S * (ASSUMPTIONS.coordinatorMemoryMb / 1024), 'GB-s', PRICES.lambda.gbSecondArm);
  line('Lambda', 'watchdog invocations', watchdogRuns, 'requests', PRICES.lambda.request);
  line('Lambda', 'watchdog GB-s', watchdogRuns * COORDINATOR_TASK_S * (ASSUMPTIONS.coordinatorMemoryMb / 1024), 'GB-s', PRICES.lambda.gbSecondArm);

  // DynamoDB
  line('DynamoDB', 'writes: lease positions (one per batch)', (a?.positionWru ?? 0) * S, 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'writes: stage functions (state, deltas, pointers, acks, sinks)', (a?.eventWru ?? 0) * S, 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'reads: leases (one per batch)', (a?.leaseRru ?? 0) * S, 'RRU', PRICES.dynamodb.readRequestUnit);
  line('DynamoDB', 'reads: stage functions (state misses, deltas)', (a?.eventRru ?? 0) * S, 'RRU', PRICES.dynamodb.readRequestUnit);
  const keyedStages = plan.stages.filter((s) => s.input.kind === 'exchange').length;
  const reloads = active ? HOURS_PER_MONTH / ENVIRONMENT_LIFETIME_HOURS : 0;
  line('DynamoDB', `reads: state read back by a replaced environment (once per ${ENVIRONMENT_LIFETIME_HOURS} h per keyed stage)`, reloads * keyedStages * Math.ceil((keys * STATE_BYTES_PER_KEY) / 4096), 'RRU', PRICES.dynamodb.readRequestUnit);
  // a source batch learns from its position write's response whether the coordinator is parked (no read);
  // each park leaves the token on every source lease: once per hourly re-check while idle, never at a steady rate
  line('DynamoDB', 'writes: the parked token on each source lease (per park; up to 2 WRU: a task token takes up to 1 KB)', idle ? parkedRechecks * sourceShards * 2 : 0, 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'coordinator writes', checkpoints * COORDINATOR_WRU, 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'coordinator reads (+ watchdog)', checkpoints * (COORDINATOR_RRU + (express ? ackReads : 0)) + parkedRechecks * 6 + watchdogRuns * 2, 'RRU', PRICES.dynamodb.readRequestUnit);
  line('DynamoDB', 'commit GC (about once a minute): a lease read and a delta query per instance', gcRuns * instances * 2, 'RRU', PRICES.dynamodb.readRequestUnit);
  // a DeleteItem is billed by the deleted item's size, as its write was: every inline delta is
  // deleted once, and each checkpoint's record once it falls out of the history (its task token is
  // gone by then: under 1 KB)
  line('DynamoDB', 'commit GC deletes: each inline delta once, each checkpoint record past the history', (a?.inlineDeltaWru ?? 0) * S + checkpoints * CHECKPOINT_RECORD_DELETE_WRU, 'WRU', PRICES.dynamodb.writeRequestUnit);
  const stateGb = (keys * STATE_BYTES_PER_KEY) / 1e9 + 0.001;
  line('DynamoDB', 'storage (state, control, sinks)', stateGb, 'GB-month', MORE_PRICES.dynamodb.storedGbMonth);
  line('DynamoDB', 'point-in-time recovery', stateGb, 'GB-month', MORE_PRICES.dynamodb.pitrGbMonth);

  // Step Functions
  if (express) {
    line('Step Functions', `Standard transitions (${ROUND_STANDARD_TRANSITIONS} per Express round of about ${perRound} checkpoints${idle ? '; none while idle' : ''})`, rounds * ROUND_STANDARD_TRANSITIONS + parkedRechecks, 'transitions', PRICES.stepFunctions.stateTransition);
    line('Step Functions', 'Express rounds: requests', rounds, 'requests', PRICES.stepFunctions.expressRequest);
    // a round runs from its first checkpoint's acks to its last commit: all but the pause between rounds
    line('Step Functions', 'Express rounds: duration at 64 MB', (checkpoints * (pauseS + 1) - rounds * pauseS) * EXPRESS_BILLED_GB, 'GB-s', PRICES.stepFunctions.expressGbSecond);
  } else {
    line('Step Functions', `state transitions (${transitions} per checkpoint${idle ? '; none while idle' : ''})`, checkpoints * transitions + parkedRechecks, 'transitions', PRICES.stepFunctions.stateTransition);
  }

  // S3
  line('S3', 'PUT (deltas above 8 KB, dead letters)', (a?.s3Puts ?? 0) * S, 'requests', PRICES.s3.put);
  // one listing of the job's deltas/ per run, a request per 1,000 keys; at most, every instance holds
  // its retained window or chain (the longer) plus the checkpoints since the last run, all as objects
  const gcListedKeys = instances * (Math.max(plan.checkpoint.retained, materializeEvery(plan.checkpoint)) + gcEvery);
  const gcListPages = Math.max(1, Math.ceil(gcListedKeys / 1000));
  line('S3', `LIST: commit GC (about once a minute), one listing of the job's deltas (${gcListPages} page${gcListPages > 1 ? 's' : ''} of 1,000 keys)`, gcRuns * gcListPages, 'requests', MORE_PRICES.s3.list);
  line('S3', 'storage (retained deltas, savepoints)', stateGb * (plan.checkpoint.retained + 1), 'GB-month', MORE_PRICES.s3.storedGbMonth);

  // CloudWatch
  const invocations = (a?.stageInvocations ?? 0) * S + coordInvocations + watchdogRuns;
  const level = o.logLevel ?? 'WARN';
  const platformLines = level === 'DEBUG' || level === 'INFO';
  // one busy environment per shard (the ESM runs one batch of a shard at a time) and the coordinator's
  const emfDocuments = Math.min((a?.stageInvocations ?? 0) * S, (shards * S) / EMF_PERIOD_S) + Math.min(coordInvocations, S / EMF_PERIOD_S);
  const logGb = ((platformLines ? invocations * PLATFORM_LOG_BYTES : 0) + emfDocuments * EMF_LOG_BYTES) / 1e9;
  line('CloudWatch', `Logs ingestion (${platformLines ? 'platform lines + ' : ''}one EMF document a minute per busy environment; ${level} level)`, logGb, 'GB', MORE_PRICES.logs.ingestedGb);
  line('CloudWatch', 'Logs storage (one month retention)', logGb, 'GB-month', MORE_PRICES.logs.storedGbMonth);
  const named = steadyMetrics(o.detailedMetrics ?? false, watchedMetrics({ idleCoordinator: idle, dashboard: o.dashboard ?? false }));
  const metrics = active ? plan.stages.length * named.stage + named.coordinator : 0; // billed per hour with data
  line('CloudWatch', `EMF custom metrics (${named.stage} per stage, ${named.coordinator} coordinator${o.detailedMetrics ? ', detailedMetrics' : ''}; dimensions service, job, stage)`, metrics, 'metrics', MORE_PRICES.cloudwatch.customMetricMonth);
  if (o.dashboard) line('CloudWatch', 'dashboard (dashboard: true)', 1, 'dashboards', MORE_PRICES.cloudwatch.dashboardMonth);
  line('CloudWatch', 'alarms on AWS metrics (iterator age and stalled shard per stage; coordinator failed)', plan.stages.length * 2 + 1, 'alarms', MORE_PRICES.cloudwatch.alarmMonth);
  // each Metrics Insights alarm is priced per series its query matches: CheckpointStalled,
  // CheckpointFailed and CheckpointCompleted come from the coordinator only, DeadLetters from each stage
  const insightsSeries = 1 + 1 + plan.stages.length + (idle ? 0 : 1);
  line('CloudWatch', 'Metrics Insights alarms (checkpoint stalled/failed: 1 series each; dead letters: 1 per stage), per series analyzed', insightsSeries, 'alarm-metrics', MORE_PRICES.cloudwatch.metricsInsightsAlarmPerMetricMonth);

  // KMS
  if (o.customerKey) {
    line('KMS', 'customer-managed key', 1, 'keys', MORE_PRICES.kms.keyMonth);
    // data keys are cached by each service for minutes: about one request per stream, table and function per 5 minutes
    line('KMS', 'requests (data keys of streams, tables, bucket)', ((plan.stages.length + 2 + plan.stages.length + 1) * S) / 300, 'requests', MORE_PRICES.kms.request);
  }

  return {
    eventsPerSecond: eps,
    checkpointIntervalS: plan.checkpoint.intervalMs / 1000,
    lines,
    usd: lines.reduce((x, l) => x + l.usd, 0),
    shardsUsd,
    producerPutsUsd,
    checkpointsPerMonth: checkpoints,
    transitionsPerCheckpoint: transitions,
    expressCheckpoints: express,
    batching,
    batchesPerSecond: a?.stageInvocations ?? 0,
  };
}

/** The batch settings in words, as `sluice cost` and the bench print them. */
export function batchingWords(b: Batching): string {
  return `batchSize ${b.batchSize.toLocaleString('en-US')}, ${b.windowMs > 0 ? `${b.windowMs / 1000} s window` : 'no window'}`;
}

/** A table of the lines by service, then the totals (and what is reported apart). */
export function formatMonthlyCost(c: MonthlyCost): string {
  const rows = c.lines.filter((l) => l.quantity > 0);
  const w = Math.max(...rows.map((l) => `${l.service}: ${l.item}`.length));
  const fmtQ = (q: number) => (q >= 100 ? Math.round(q).toLocaleString('en-US') : q.toPrecision(3));
  const out = rows.map((l) => `${`${l.service}: ${l.item}`.padEnd(w)}  ${fmtQ(l.quantity).padStart(14)} ${l.unit.padEnd(12)} $${l.usd.toFixed(2).padStart(9)}`);
  out.push(`${'total (excluding shards and producers\' PUTs)'.padEnd(w)}  ${''.padStart(27)} $${c.usd.toFixed(2).padStart(9)}`);
  out.push(`${'reported apart: Kinesis shard-hours (stream-hours on demand)'.padEnd(w)}  ${''.padStart(27)} $${c.shardsUsd.toFixed(2).padStart(9)}`);
  out.push(`${'reported apart: producers\' PUTs into the source'.padEnd(w)}  ${''.padStart(27)} $${c.producerPutsUsd.toFixed(2).padStart(9)}`);
  return out.join('\n');
}

/** Dollars per service, largest first. */
export function byService(c: MonthlyCost): Array<[string, number]> {
  const m = new Map<string, number>();
  for (const l of c.lines) m.set(l.service, (m.get(l.service) ?? 0) + l.usd);
  return [...m].sort((x, y) => y[1] - x[1]);
}

export interface AslState {
  readonly Type: string;
  readonly Next?: string;
  readonly Default?: string;
  readonly Choices?: ReadonlyArray<{ readonly Next: string }>;
}

/**
 * State transitions of one checkpoint on the happy path of the coordinator workflow: from Allocate
 * back to Allocate, following Next, and at a Choice the branch that loops (Default).
 */
export function transitionsPerCheckpoint(states: Record<string, AslState>, start = 'Allocate'): { count: number; path: string[] } {
  const path: string[] = [];
  let at: string | undefined = start;
  while (at && path.length < 50) {
    path.push(at);
    const s: AslState | undefined = states[at];
    if (!s) break;
    const next: string | undefined = s.Type === 'Choice' ? s.Default : s.Next;
    if (next === start) return { count: path.length, path };
    at = next;
  }
  throw new Error(`no loop back to ${start} from the workflow's states: ${path.join(' → ')}`);
}
