/**
 * The settings of a `SluiceJob`: its props, the per-stage function settings and their defaults,
 * the alarms it creates, and the constants the functions share with the construct.
 */
import { Duration } from 'aws-cdk-lib';
import type { RemovalPolicy } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Job } from '../shared/api/job.js';
import { BATCHING } from './stage-batching.js';

/** CloudWatch namespace of the metrics the functions publish (EMF). */
export const METRICS_NAMESPACE = 'Sluice';

export interface SluiceMetricOptions {
  /** restrict to one stage (`s0`, ..., or `coordinator`); @default every stage and the coordinator */
  readonly stage?: string;
  /** Metrics Insights aggregate; @default 'SUM' */
  readonly aggregate?: 'SUM' | 'AVG' | 'MAX' | 'MIN' | 'COUNT';
  /** @default Duration.minutes(1) */
  readonly period?: Duration;
  /** @default the metric name */
  readonly label?: string;
}

/** Settings of one stage's function and event source mapping. */
export interface StageSettings {
  /** @default 512 (MB): BATCHING.memorySize in cdk/stage-batching.ts says why and when to raise it */
  readonly memorySize?: number;
  /** @default Duration.seconds(60) */
  readonly timeout?: Duration;
  /** records per invocation (1–10,000; the mapping also invokes at 6 MB); @default 10,000 */
  readonly batchSize?: number;
  /**
   * How long the event source mapping gathers records before invoking (whole seconds, at most half
   * of `checkpoint.timeoutMs`). Every batch commits a lease position and reads its lease, so fewer
   * batches cost less; every stage adds up to this much latency, and a barrier crosses each stage
   * after up to one window. `Duration.seconds(0)` invokes as soon as a poll finds records.
   * @default a fifth of the checkpoint interval, in whole seconds, at most 5 s and a quarter of
   *   `checkpoint.timeoutMs` (none below a 5 s interval): 2 s at the default 10 s
   */
  readonly maxBatchingWindow?: Duration;
  /**
   * Reserved concurrency of the stage function; at least the stage's parallelism (one invocation
   * per shard at a time), or shards would wait for each other.
   * @default no reservation (the account's unreserved pool)
   */
  readonly reservedConcurrency?: number;
}

/** The defaults of `StageSettings` (the batching window's depends on the checkpoint interval: `defaultBatchingWindowMs`). */
export const STAGE_DEFAULTS = {
  memorySize: BATCHING.memorySize,
  timeout: Duration.seconds(60),
  batchSize: BATCHING.batchSize,
} as const;

/** Bucket prefixes the functions use; `state-blobs/` holds state rows too large for an item. */
export const BUCKET_PREFIXES = ['deltas/', 'dead-letters/', 'savepoints/', 'sinks/', 'state-blobs/', 'spill/'] as const;

export interface SluiceJobProps {
  /** the user's job (`export default` of the job module); planned once by the construct */
  readonly job: Job;
  /** path of the job's module file, bundled into every function; relative paths start at the repo root */
  readonly jobModule: string;
  /**
   * Starts every physical name (`<prefix>-state`, `<prefix>-s1`, ...); lower-case letters, digits
   * and dashes. Two deployments of one job need two prefixes.
   * @default defaultPrefix(plan): `sluice-<job name>`
   */
  readonly prefix?: string;
  /**
   * Customer-managed key for the streams, tables and bucket. The functions and the producers
   * granted by `grantWriteSource` get the KMS permissions they need. Log groups and the workflow's
   * history stay under AWS-owned keys.
   * @default AWS-managed encryption everywhere: `alias/aws/kinesis` for streams, `alias/aws/dynamodb`
   *   for tables, SSE-S3 for the bucket
   */
  readonly encryptionKey?: kms.IKey;
  /**
   * What happens to the job's data (streams, tables, bucket) when it leaves the stack. With RETAIN,
   * delete the retained resources (or pick another prefix) before deploying the job again: their
   * names are fixed. Log groups are always destroyed.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /** actions of every alarm (an SNS topic, say); @default no actions (the alarms still show in the CloudWatch console and `sluice status`) */
  readonly alarmActions?: readonly cloudwatch.IAlarmAction[];
  /** per stage id (`s0`, `s1`, ...): function and event source mapping settings; @default STAGE_DEFAULTS for every stage */
  readonly stageSettings?: Readonly<Record<string, StageSettings>>;
  /** retention of the functions' and the workflow's logs; @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Retention of every stream the job creates. A stage stalled for longer than this cannot replay
   * and fails loudly, so longer is safer and costs more.
   * @default Duration.hours(24)
   */
  readonly streamRetention?: Duration;
  /** iterator age of a stage's input stream that raises its alarm; @default Duration.minutes(5) */
  readonly iteratorAgeAlarmThreshold?: Duration;
  /** no completed checkpoint for this long raises the stalled-checkpoints alarm; @default max(15 minutes, 10 checkpoint intervals) */
  readonly checkpointStallAlarmAfter?: Duration;
  /** what the coordinator workflow logs; @default sfn.LogLevel.ERROR (see CoordinatorStateMachineProps.logLevel) */
  readonly coordinatorLogLevel?: sfn.LogLevel;
  /**
   * Start a new coordinator execution when one FAILS or TIMES OUT (an EventBridge rule on the
   * workflow's status changes). A stopped (ABORTED) execution is not restarted: stopping is how an
   * operator pauses checkpointing. The first execution starts on deploy (`startOnDeploy`), and the
   * watchdog covers a lost status event.
   * @default true
   */
  readonly restartCoordinatorOnFailure?: boolean;
  /**
   * Park the coordinator while no source shard receives input (no state transitions), woken by the
   * first input a source stage function sees. Off, the coordinator checkpoints every interval.
   * @default true
   */
  readonly idleCoordinator?: boolean;
  /**
   * Run the checkpoints in Express rounds of up to a few minutes each, started by the coordinator's
   * Standard execution, instead of three Standard transitions per checkpoint: at a 10 s interval
   * $3.88 a month of Step Functions instead of $17.92 (docs/cost.md). The rounds' steps are in
   * CloudWatch Logs (`coordinatorLogLevel`: failed steps at ERROR, every step at ALL), not in Step
   * Functions' execution history. `true` needs `checkpoint.maxConcurrent` 1 and a pause of at most a
   * minute (the construct throws otherwise); `false` keeps the Standard loop.
   * @default rounds where they are allowed and cost less (`roundsByDefault`: one checkpoint in
   *   flight and a pause of at most 56 s), the Standard loop otherwise
   */
  readonly expressCheckpoints?: boolean;
  /** start the coordinator when the stack deploys (a custom resource running the watchdog once); @default true */
  readonly startOnDeploy?: boolean;
  /** how often the watchdog starts a coordinator execution when none is running (and the job is not stopped); @default Duration.minutes(5) */
  readonly watchdogPeriod?: Duration;
  /**
   * Customer-managed keys of resources the job imports by name (`streamName` of a source or a
   * Kinesis sink, `tableName` of an upsert sink), by the source's or sink's logical name. Every role
   * that touches the resource gets the KMS permissions it needs: the stage functions, the
   * coordinator (injection, publishing), producers (`grantWriteSource`), readers
   * (`grantReadResults`) and operators (`grantOperate`).
   * @default none (imported resources use AWS-owned or AWS-managed keys)
   */
  readonly importedResourceKeys?: { readonly sources?: Readonly<Record<string, kms.IKey>>; readonly sinks?: Readonly<Record<string, kms.IKey>> };
  /**
   * Sources (by name) whose stream the job creates in on-demand capacity mode: Kinesis adds and
   * removes shards as traffic changes, and the job adopts each new shard the way it adopts the
   * children of its own rescale (the child rebuilds its parents' final state; the checkpoint in
   * flight across the reshard aborts and the next one expects the new shards). The source's
   * `shards` is then only the estimate the cost model uses, and `sluice rescale` refuses the stage.
   * An existing stream (`streamName`) keeps its own mode, on-demand included, and is not named
   * here. Streams between stages are always provisioned: the job routes records between stages by
   * key group and reshards them only at a checkpoint boundary.
   * @default none (every stream the job creates is provisioned)
   */
  readonly onDemandSources?: readonly string[];
  /**
   * A CloudWatch dashboard of the job (rates, lag, checkpoints, state cache, alarms). It is billed
   * $3 a month whether or not anything runs — more than everything else an idle job costs — so it
   * is asked for, not given: `sluice status` prints the same lag, checkpoints and alarms.
   * @default false
   */
  readonly dashboard?: boolean;
  /**
   * Publish the steady metrics an operator does not need every day too (shared/runtime/metric-names.ts
   * DETAILED_METRICS: CacheHit, CheckpointKeys, CheckpointBytes and CheckpointDurationMs per stage,
   * SinkValuesPublished), and graph them on the dashboard: $0.30 a month each per stage. Without it
   * the checkpoint records `sluice status` prints hold each checkpoint's bytes, keys and duration,
   * and the dashboard sets the stage functions' invocations beside CacheMiss.
   * @default false
   */
  readonly detailedMetrics?: boolean;
  /** X-Ray active tracing of every function and the workflow, with its permissions; @default false (no tracer at all) */
  readonly tracing?: boolean;
  /** level of the functions' structured logs (POWERTOOLS_LOG_LEVEL); @default 'WARN' (INFO adds a line per batch and task) */
  readonly logLevel?: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  /** a stage function reading records this old (its own IteratorAge) raises the stalled-shard alarm; @default Duration.minutes(15) */
  readonly stalledShardAlarmAfter?: Duration;
  /** folder of the generated Lambda entry files; @default `<repo>/cdk.out/.sluice-entries/<job>` */
  readonly entriesDir?: string;
  /**
   * Folder holding `functions/operator.ts` and `functions/coordinator.ts` (the handler factories).
   * @default the repository root
   */
  readonly functionsRoot?: string;
}

/** The job's alarms. */
export interface SluiceJobAlarms {
  /** per stage id: the age of the records the stage function reads (its own `IteratorAge`, reported even while one batch is retried) */
  readonly iteratorAge: ReadonlyMap<string, cloudwatch.Alarm>;
  /** per stage id: a shard whose position has not moved for `stalledShardAlarmAfter` (the function reads records that old) */
  readonly stalledShard: ReadonlyMap<string, cloudwatch.Alarm>;
  /** the coordinator reports a checkpoint that cannot complete (`CheckpointStalled` > 0) */
  readonly checkpointStalled: cloudwatch.Alarm;
  /** the coordinator workflow failed (Step Functions `ExecutionsFailed`) */
  readonly coordinatorFailed: cloudwatch.Alarm;
  /** a checkpoint failed or was aborted (`CheckpointFailed`) */
  readonly checkpointFailed: cloudwatch.Alarm;
  /** records went to the dead letters (`DeadLetters` > 0) */
  readonly deadLetters: cloudwatch.Alarm;
  /**
   * No checkpoint completed for a while (no `CheckpointCompleted`): the coordinator is not running,
   * or it is stuck. Only with `idleCoordinator: false` (an idle job completes none on purpose).
   */
  readonly checkpointsStalled?: cloudwatch.Alarm;
  /** every alarm above */
  readonly all: readonly cloudwatch.Alarm[];
}
