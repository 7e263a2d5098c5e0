/**
 * `SluiceJob`: the L3 construct that deploys one planned job (DESIGN §1, §3.8, §4).
 *
 * It reads nothing but the plan: `planJob(job)` gives the stages, their parallelism and their
 * exchanges; `resourceNames(plan, prefix)` gives every physical name, the same names the functions
 * and the local runner derive from `SLUICE_PREFIX`. Per stage it creates the input stream, the
 * function and its event source mapping; per job the state and control tables, the sink tables,
 * the data bucket, the coordinator function and workflow, alarms and (with `dashboard`) a dashboard.
 *
 * IAM is written out statement by statement (each role has one inline policy, so a function never
 * starts before its permissions exist): no managed policies, and every wildcard says why.
 */
import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { Annotations, ArnFormat, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import type { StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { BundlingOptions } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import type { IConstruct } from 'constructs';
import type { Job } from '../shared/api/job.js';
import type { Plan, PlanSink, PlanSource, PlanStage } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { ENV, defaultPrefix, resourceNames, sanitizeName } from '../shared/plan/resources.js';
import { KINESIS_SINK_SHARDS, kinesisSinkStream } from '../shared/plan/sink-names.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import { LOOP_ENV } from '../shared/coordinator/loop.js';
import { TRACING_ENV } from '../functions/telemetry.js';
import { CoordinatorStateMachine } from './coordinator-state-machine.js';
import { addCoordinatorStart, addJobOutputs, operateStatements, type JobParts } from './job-operations.js';
import { REPO_ROOT, defaultEntriesDir, writeFunctionEntries } from './function-entry.js';

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
  /** @default 1024 (MB) */
  readonly memorySize?: number;
  /** @default Duration.seconds(60) */
  readonly timeout?: Duration;
  /** records per invocation; @default 500 */
  readonly batchSize?: number;
  /** how long the event source mapping gathers records before invoking; @default no batching window */
  readonly maxBatchingWindow?: Duration;
  /**
   * Reserved concurrency of the stage function; at least the stage's parallelism (one invocation
   * per shard at a time), or shards would wait for each other.
   * @default no reservation (the account's unreserved pool)
   */
  readonly reservedConcurrency?: number;
}

export const STAGE_DEFAULTS = {
  memorySize: 1024,
  timeout: Duration.seconds(60),
  batchSize: 500,
} as const;

/** Bucket prefixes the functions use (DESIGN §1); `state-blobs/` holds state rows too large for an item. */
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
   * and fails loudly (DESIGN §6), so longer is safer and costs more.
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

/** Lambda runtime of every function: Node.js 22 (the project pins Node 22 as the Lambda line). */
export const LAMBDA_RUNTIME = lambda.Runtime.NODEJS_22_X;

const DDB_READ = ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query'];
const DDB_READ_WRITE = [...DDB_READ, 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchWriteItem', 'dynamodb:DeleteItem'];
const DDB_SINK_WRITE = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchWriteItem'];
const KINESIS_READ = [
  'kinesis:DescribeStream',
  'kinesis:DescribeStreamSummary',
  'kinesis:GetRecords',
  'kinesis:GetShardIterator',
  'kinesis:ListShards',
];

const MAX_NAME = { function: 64, stream: 128, table: 255, stateMachine: 80 } as const;

/**
 * The project the functions are bundled from: this repository, or — where Sluice is an installed
 * package (its folder has no lockfile) — the user's project that runs the synth: the nearest folder
 * up from it that holds a package-lock.json (a workspace's root has the lockfile).
 */
const PROJECT_ROOT = existsSync(join(REPO_ROOT, 'package-lock.json')) ? REPO_ROOT : userProjectRoot(process.cwd());

function userProjectRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package-lock.json'))) return dir;
    if (dirname(dir) === dir) return from;
  }
}

/** esbuild, run locally (never Docker): ESM for Node 22, source maps, the AWS SDK bundled at the pinned versions. */
function bundlingOptions(): BundlingOptions {
  return {
    forceDockerBundling: false,
    format: OutputFormat.ESM,
    target: 'node22',
    mainFields: ['module', 'main'],
    minify: true,
    sourceMap: true,
    sourcesContent: false,
    // The runtime's SDK may be older than the one in package-lock.json: bundle ours.
    externalModules: [],
    // CommonJS dependencies inside an ESM bundle still call require().
    banner: "import { createRequire as __sluiceRequire } from 'node:module'; const require = __sluiceRequire(import.meta.url);",
    ...(existsSync(join(PROJECT_ROOT, 'tsconfig.json')) ? { tsconfig: join(PROJECT_ROOT, 'tsconfig.json') } : {}),
  };
}

/** What differs between Sluice's functions; everything else is set alike by `sluiceFunction`. */
export interface SluiceFunctionProps {
  readonly functionName?: string;
  readonly description: string;
  /** the generated entry module (it exports `handler`) */
  readonly entry: string;
  readonly memorySize: number;
  readonly timeout: Duration;
  readonly role?: iam.IRole;
  readonly logGroup: logs.ILogGroup;
  readonly environment: Record<string, string>;
  readonly reservedConcurrentExecutions?: number;
  /** @default no active tracing */
  readonly tracing?: lambda.Tracing;
}

/** A function of Sluice: Node.js 22 on ARM, bundled from the repository with `bundlingOptions()`. */
export function sluiceFunction(scope: Construct, id: string, props: SluiceFunctionProps): NodejsFunction {
  const { reservedConcurrentExecutions, functionName, role, ...rest } = props;
  return new NodejsFunction(scope, id, {
    ...rest,
    ...(functionName !== undefined ? { functionName } : {}),
    ...(role !== undefined ? { role } : {}),
    ...(reservedConcurrentExecutions !== undefined ? { reservedConcurrentExecutions } : {}),
    handler: 'handler',
    runtime: LAMBDA_RUNTIME,
    architecture: lambda.Architecture.ARM_64,
    depsLockFilePath: join(PROJECT_ROOT, 'package-lock.json'),
    projectRoot: PROJECT_ROOT,
    bundling: bundlingOptions(),
  });
}

/**
 * One deployed Sluice job.
 *
 * ```ts
 * const job = new SluiceJob(stack, 'Clicks', { job: clickstream, jobModule: 'examples/clickstream/job.ts' });
 * job.grantWriteSource(producerRole);
 * ```
 */
export class SluiceJob extends Construct {
  /** the plan every resource was derived from */
  readonly plan: Plan;
  /** the physical names (`resourceNames(plan, prefix)`) */
  readonly names: ResourceNames;
  /** input stream of each stage, by stage id (a source stage reads its source stream) */
  readonly streams: ReadonlyMap<string, kinesis.IStream>;
  /** stream of each source, by the source's logical name */
  readonly sourceStreams: ReadonlyMap<string, kinesis.IStream>;
  readonly stateTable: dynamodb.Table;
  readonly controlTable: dynamodb.Table;
  /** table of each `dynamodb-upsert` sink, by the sink's logical name (imported when the sink names an existing table) */
  readonly sinkTables: ReadonlyMap<string, dynamodb.ITable>;
  /** output stream of each `kinesis` sink, by the sink's logical name (imported when the sink names an existing stream) */
  readonly sinkStreams: ReadonlyMap<string, kinesis.IStream>;
  /** the data bucket (named by CloudFormation; functions get its name in `SLUICE_BUCKET`) */
  readonly bucket: s3.Bucket;
  /** the function of each stage, by stage id */
  readonly stageFunctions: ReadonlyMap<string, NodejsFunction>;
  /** the event source mapping of each stage function, by stage id */
  readonly eventSourceMappings: ReadonlyMap<string, lambda.EventSourceMapping>;
  readonly coordinatorFunction: NodejsFunction;
  /** the coordinator workflow construct (state machine + its log group) */
  readonly coordinator: CoordinatorStateMachine;
  readonly stateMachine: sfn.StateMachine;
  /** restarts a failed coordinator execution; undefined when `restartCoordinatorOnFailure` is false */
  readonly restartRule?: events.Rule;
  /** the job's dashboard; undefined unless `dashboard` is true */
  readonly dashboard?: cloudwatch.Dashboard;
  readonly alarms: SluiceJobAlarms;
  /** starts the coordinator when none is running (scheduled) */
  readonly watchdogRule: events.Rule;

  private readonly key?: kms.IKey;
  /** every customer-managed key the job's data is under (its own and imported resources') */
  private readonly keys: kms.IKey[];
  private readonly sourceKeys: ReadonlyMap<string, kms.IKey>;
  private readonly sinkKeys: ReadonlyMap<string, kms.IKey>;
  private readonly logGroupArns: string[] = [];
  private readonly iteratorAgeThresholdMs: number;

  constructor(scope: Construct, id: string, props: SluiceJobProps) {
    super(scope, id);
    const plan = planJob(props.job);
    this.plan = plan;
    const prefix = props.prefix ?? defaultPrefix(plan);
    validatePrefix(prefix);
    const names = resourceNames(plan, prefix);
    this.names = names;
    validateNames(plan, names);
    const settings = resolveStageSettings(plan, props.stageSettings ?? {});
    const stack = Stack.of(this);
    const key = props.encryptionKey;
    this.key = key;
    this.sourceKeys = importedKeys(plan, 'sources', props.importedResourceKeys?.sources ?? {});
    this.sinkKeys = importedKeys(plan, 'sinks', props.importedResourceKeys?.sinks ?? {});
    this.keys = [...new Set([...(key ? [key] : []), ...this.sourceKeys.values(), ...this.sinkKeys.values()])];
    const onDemand = onDemandSourceIds(plan, props.onDemandSources ?? []);
    const idle = props.idleCoordinator ?? true;
    const tracing = props.tracing ?? false;
    const dataRemoval = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const logRetention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;
    const iteratorAgeThreshold = props.iteratorAgeAlarmThreshold ?? Duration.minutes(5);
    if (iteratorAgeThreshold.toMilliseconds() < 1000) {
      throw new Error(`iteratorAgeAlarmThreshold must be at least 1 second, got ${iteratorAgeThreshold.toHumanString()}`);
    }
    this.iteratorAgeThresholdMs = iteratorAgeThreshold.toMilliseconds();

    const jobModule = isAbsolute(props.jobModule) ? props.jobModule : resolve(REPO_ROOT, props.jobModule);
    if (stack.bundlingRequired && !existsSync(jobModule)) {
      throw new Error(`jobModule must name the job's module file, got "${props.jobModule}" (no file at ${jobModule})`);
    }
    const entries = writeFunctionEntries({
      jobName: plan.job,
      jobModule,
      outDir: props.entriesDir ?? defaultEntriesDir(plan.job),
      ...(props.functionsRoot !== undefined ? { repoRoot: props.functionsRoot } : {}),
    });
    for (const sink of plan.sinks) {
      if (sink.kind === 'collect') {
        Annotations.of(this).addWarningV2(
          'sluice:collect-sink',
          `sink "${sink.name}" is a collect sink: it keeps values in one process's memory (tests, local runner) and publishes nothing on AWS`,
        );
      }
    }

    // ── Streams ────────────────────────────────────────────────────────────────────────────────
    const byName = new Map<string, kinesis.IStream>();
    const streams = new Map<string, kinesis.IStream>();
    const sourceStreams = new Map<string, kinesis.IStream>();
    for (const stage of plan.stages) {
      const streamName = names.streamOf(stage);
      let stream = byName.get(streamName);
      const source = sourceOf(plan, stage);
      if (!stream) {
        if (source?.streamName !== undefined) {
          stream = kinesis.Stream.fromStreamAttributes(this, `Source-${source.id}`, {
            streamArn: stack.formatArn({ service: 'kinesis', resource: 'stream', resourceName: streamName }),
          });
        } else {
          stream = new kinesis.Stream(this, `Stream-${stage.id}`, {
            streamName,
            ...(source && onDemand.has(source.id) ? { streamMode: kinesis.StreamMode.ON_DEMAND } : { streamMode: kinesis.StreamMode.PROVISIONED, shardCount: stage.parallelism }),
            encryption: key ? kinesis.StreamEncryption.KMS : kinesis.StreamEncryption.MANAGED,
            ...(key ? { encryptionKey: key } : {}),
            retentionPeriod: props.streamRetention ?? Duration.hours(24),
            removalPolicy: dataRemoval,
          });
          if (key) {
            Validations.of(stream).acknowledge({
              id: 'AwsSolutions-KDS3',
              reason: 'A customer-managed key was asked for (encryptionKey): its owner controls the key policy and rotation instead of alias/aws/kinesis.',
            });
          }
        }
        byName.set(streamName, stream);
      }
      streams.set(stage.id, stream);
      if (source) sourceStreams.set(source.name, stream);
    }
    this.streams = streams;
    this.sourceStreams = sourceStreams;

    // ── Tables ─────────────────────────────────────────────────────────────────────────────────
    const tableEncryption = key
      ? { encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED, encryptionKey: key }
      : { encryption: dynamodb.TableEncryption.AWS_MANAGED };
    const table = (cid: string, tableName: string, partitionKey: string, sortKey?: string): dynamodb.Table =>
      new dynamodb.Table(this, cid, {
        tableName,
        partitionKey: { name: partitionKey, type: dynamodb.AttributeType.STRING },
        ...(sortKey ? { sortKey: { name: sortKey, type: dynamodb.AttributeType.STRING } } : {}),
        billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        ...tableEncryption,
        removalPolicy: dataRemoval,
      });
    this.stateTable = table('StateTable', names.stateTable, 'pk', 'sk');
    this.controlTable = table('ControlTable', names.controlTable, 'pk', 'sk');
    const sinkTables = new Map<string, dynamodb.ITable>();
    for (const sink of plan.sinks) {
      if (sink.kind !== 'dynamodb-upsert') continue;
      const cid = `Sink-${sanitizeName(sink.name)}`;
      sinkTables.set(
        sink.name,
        sink.tableName !== undefined
          ? dynamodb.Table.fromTableName(this, cid, sink.tableName)
          : table(cid, names.sinkTable(sink), sink.keyAttribute ?? 'pk'),
      );
    }
    this.sinkTables = sinkTables;

    // ── Output streams of Kinesis sinks (published by the coordinator at commit) ────────────────
    const sinkStreams = new Map<string, kinesis.IStream>();
    for (const sink of plan.sinks) {
      if (sink.kind !== 'kinesis') continue;
      const cid = `SinkStream-${sanitizeName(sink.name)}`;
      const streamName = kinesisSinkStream(names, sink);
      let stream: kinesis.IStream;
      if (sink.streamName !== undefined) {
        stream = kinesis.Stream.fromStreamAttributes(this, cid, {
          streamArn: stack.formatArn({ service: 'kinesis', resource: 'stream', resourceName: streamName }),
        });
      } else {
        stream = new kinesis.Stream(this, cid, {
          streamName,
          streamMode: kinesis.StreamMode.PROVISIONED,
          shardCount: KINESIS_SINK_SHARDS,
          encryption: key ? kinesis.StreamEncryption.KMS : kinesis.StreamEncryption.MANAGED,
          ...(key ? { encryptionKey: key } : {}),
          retentionPeriod: props.streamRetention ?? Duration.hours(24),
          removalPolicy: dataRemoval,
        });
        if (key) {
          Validations.of(stream).acknowledge({
            id: 'AwsSolutions-KDS3',
            reason: 'A customer-managed key was asked for (encryptionKey): its owner controls the key policy and rotation instead of alias/aws/kinesis.',
          });
        }
      }
      sinkStreams.set(sink.name, stream);
    }
    this.sinkStreams = sinkStreams;

    // ── Bucket ─────────────────────────────────────────────────────────────────────────────────
    this.bucket = new s3.Bucket(this, 'Bucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      encryption: key ? s3.BucketEncryption.KMS : s3.BucketEncryption.S3_MANAGED,
      ...(key ? { encryptionKey: key, bucketKeyEnabled: true } : {}),
      versioned: false,
      removalPolicy: dataRemoval,
      lifecycleRules: [
        // deltas/ and savepoints/ are expired by the coordinator (it knows which checkpoints are
        // retained); dead-letters/ and sinks/ are the user's data: never expired here.
        { id: 'expire-tmp', prefix: 'tmp/', expiration: Duration.days(1) },
        // dirty state an instance moved out of memory: a snapshot drops it; a dead owner's is never read
        { id: 'expire-spill', prefix: 'spill/', expiration: Duration.days(1) },
        { id: 'abort-incomplete-uploads', abortIncompleteMultipartUploadAfter: Duration.days(2) },
      ],
    });
    Validations.of(this.bucket).acknowledge({
      id: 'AwsSolutions-S1',
      reason:
        "Internal data bucket read and written only by this job's functions; server access logs would need a second bucket per job. CloudTrail data events are the audit path.",
    });

    // ── Functions ──────────────────────────────────────────────────────────────────────────────
    const stateMachineArn = CoordinatorStateMachine.arnForName(this, names.stateMachine);
    const baseEnv = {
      [ENV.prefix]: names.prefix,
      [ENV.bucket]: this.bucket.bucketName,
      // the same service name the functions give Powertools (functions/telemetry.ts)
      POWERTOOLS_SERVICE_NAME: `sluice-${plan.job}`,
      POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
      NODE_OPTIONS: '--enable-source-maps',
      [ENV.logLevel]: props.logLevel ?? 'WARN',
      ...(tracing ? { [TRACING_ENV]: '1' } : {}),
      ...(idle ? { [LOOP_ENV.idle]: '1' } : {}),
    };
    const bucketStatements = (sid: string, actions: string[]): iam.PolicyStatement[] => [
      new iam.PolicyStatement({
        sid: `${sid}Objects`,
        actions,
        resources: BUCKET_PREFIXES.map((p) => this.bucket.arnForObjects(`${p}*`)),
      }),
      // Without ListBucket, S3 answers 403 instead of 404 for a missing key: the engine needs to
      // tell "no delta yet" from "access denied". Only key names of this job's bucket are visible.
      new iam.PolicyStatement({ sid: `${sid}List`, actions: ['s3:ListBucket'], resources: [this.bucket.bucketArn] }),
    ];
    const kmsStatements = (): iam.PolicyStatement[] =>
      key
        ? [
            new iam.PolicyStatement({
              sid: 'JobKey',
              actions: ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey', 'kms:DescribeKey'],
              resources: [key.keyArn],
            }),
          ]
        : [];
    const taskResponse = (): iam.PolicyStatement =>
      new iam.PolicyStatement({
        sid: 'CheckpointTaskResponse',
        actions: ['states:SendTaskSuccess', 'states:SendTaskFailure'],
        resources: [stateMachineArn],
      });

    const stageFunctions = new Map<string, NodejsFunction>();
    const eventSourceMappings = new Map<string, lambda.EventSourceMapping>();
    for (const stage of plan.stages) {
      const s = settings.get(stage.id)!;
      const source = sourceOf(plan, stage);
      const functionName = names.functionOf(stage);
      const logGroup = this.logGroup(`Logs-${stage.id}`, functionName, logRetention);
      const input = streams.get(stage.id)!;
      const downstream = [...new Set(stage.operators.flatMap((o) => (o.exchange ? [o.exchange.toStage] : [])))].map(
        (toStage) => streams.get(toStage)!,
      );
      const sinkArns = stage.operators
        .flatMap((o) => (o.sink?.kind === 'dynamodb-upsert' ? [sinkTables.get(o.sink.name)!.tableArn] : []));
      const statements = [
        logStatement(logGroup),
        new iam.PolicyStatement({ sid: 'ReadInputStream', actions: KINESIS_READ, resources: [input.streamArn] }),
        ...(downstream.length
          ? [
              new iam.PolicyStatement({
                sid: 'WriteDownstreamStreams',
                actions: ['kinesis:PutRecords', 'kinesis:ListShards'],
                resources: downstream.map((d) => d.streamArn),
              }),
            ]
          : []),
        new iam.PolicyStatement({
          sid: 'StateAndControlTables',
          actions: DDB_READ_WRITE,
          resources: [this.stateTable.tableArn, this.controlTable.tableArn],
        }),
        ...(sinkArns.length
          ? [new iam.PolicyStatement({ sid: 'SinkTables', actions: DDB_SINK_WRITE, resources: sinkArns })]
          : []),
        ...bucketStatements('Bucket', ['s3:GetObject', 's3:PutObject']),
        // a snapshot drops the dirty state it took in from the spill
        new iam.PolicyStatement({ sid: 'DropSpilledState', actions: ['s3:DeleteObject'], resources: [this.bucket.arnForObjects('spill/*')] }),
        taskResponse(),
        ...kmsStatements(),
        ...importedKeyStatements('ImportedKeys', [
          ...(source && this.sourceKeys.has(source.name) ? [this.sourceKeys.get(source.name)!] : []),
          ...stage.operators.flatMap((o) => (o.sink && this.sinkKeys.has(o.sink.name) ? [this.sinkKeys.get(o.sink.name)!] : [])),
        ]),
      ];
      const role = this.role(`Role-${stage.id}`, `Sluice ${plan.job} stage ${stage.id}`, statements);
      const fn = sluiceFunction(this, `Function-${stage.id}`, {
        functionName,
        description: truncate(`Sluice ${plan.job} stage ${stage.id}: ${stage.name}`, 256),
        entry: entries.operator,
        memorySize: s.memorySize,
        timeout: s.timeout,
        role,
        logGroup,
        ...(tracing ? { tracing: lambda.Tracing.ACTIVE } : {}),
        ...(s.reservedConcurrency !== undefined ? { reservedConcurrentExecutions: s.reservedConcurrency } : {}),
        environment: { ...baseEnv, [ENV.stage]: stage.id },
      });
      this.acknowledgeRuntime(fn);
      const esm = new lambda.EventSourceMapping(this, `Input-${stage.id}`, {
        target: fn,
        eventSourceArn: input.streamArn,
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: s.batchSize,
        ...(s.maxBatchingWindow ? { maxBatchingWindow: s.maxBatchingWindow } : {}),
        parallelizationFactor: 1,
        bisectBatchOnError: true,
        reportBatchItemFailures: true,
        // -1: retry until the batch succeeds. An ESM that gives up skips the batch and loses data;
        // poison records are the engine's business (DESIGN §3.8).
        retryAttempts: -1,
      });
      // The L2 takes maxRecordAge as a Duration between 60 s and 7 days and cannot express -1
      // ("never discard"); leaving it out relies on a service default, so set it on the L1.
      (esm.node.defaultChild as lambda.CfnEventSourceMapping).maximumRecordAgeInSeconds = -1;
      esm.node.addDependency(role);
      stageFunctions.set(stage.id, fn);
      eventSourceMappings.set(stage.id, esm);
    }
    this.stageFunctions = stageFunctions;
    this.eventSourceMappings = eventSourceMappings;

    // ── Coordinator ────────────────────────────────────────────────────────────────────────────
    const coordinatorLogs = this.logGroup('Logs-coordinator', names.coordinatorFunction, logRetention);
    const sourceStreamArns = [...new Set([...sourceStreams.values()].map((st) => st.streamArn))];
    const coordinatorRole = this.role('Role-coordinator', `Sluice ${plan.job} coordinator`, [
      logStatement(coordinatorLogs),
      new iam.PolicyStatement({ sid: 'ControlTable', actions: DDB_READ_WRITE, resources: [this.controlTable.tableArn] }),
      new iam.PolicyStatement({ sid: 'StateTableRead', actions: DDB_READ, resources: [this.stateTable.tableArn] }),
      new iam.PolicyStatement({
        sid: 'InjectIntoSourceStreams',
        actions: ['kinesis:PutRecord', 'kinesis:PutRecords', 'kinesis:ListShards'],
        resources: sourceStreamArns,
      }),
      // topology at allocate, instances whose deltas the commit garbage-collects; an in-place
      // rescale reshards a stage's stream at a checkpoint boundary and waits for it to be ACTIVE
      new iam.PolicyStatement({
        sid: 'ListStageShards',
        actions: ['kinesis:ListShards', 'kinesis:DescribeStreamSummary', 'kinesis:UpdateShardCount'],
        resources: [...new Set([...streams.values()].map((st) => st.streamArn))],
      }),
      ...(sinkStreams.size
        ? [
            new iam.PolicyStatement({
              sid: 'PublishKinesisSinks',
              actions: ['kinesis:PutRecords', 'kinesis:ListShards'],
              resources: [...sinkStreams.values()].map((st) => st.streamArn),
            }),
          ]
        : []),
      // deltas/ (GC), savepoints/ (written at a savepoint's commit), sinks/ (staging read, publishing, staging GC)
      ...bucketStatements('Bucket', ['s3:GetObject', 's3:PutObject', 's3:DeleteObject']),
      // The acks can complete before `await` registers the token; the coordinator then completes
      // the task itself.
      taskResponse(),
      // the Commit state's heartbeats (its heartbeat timeout is the pause)
      new iam.PolicyStatement({ sid: 'CommitHeartbeat', actions: ['states:SendTaskHeartbeat'], resources: [stateMachineArn] }),
      // continue-as-new and the watchdog start executions of the workflow; the watchdog lists them
      new iam.PolicyStatement({ sid: 'StartOwnWorkflow', actions: ['states:StartExecution', 'states:ListExecutions'], resources: [stateMachineArn] }),
      // an idle coordinator looks for input after the last committed barrier
      new iam.PolicyStatement({ sid: 'ReadSourceStreams', actions: ['kinesis:GetShardIterator', 'kinesis:GetRecords'], resources: sourceStreamArns }),
      ...kmsStatements(),
      ...importedKeyStatements('ImportedKeys', [...this.sourceKeys.values(), ...plan.sinks.flatMap((k) => (k.kind === 'kinesis' && this.sinkKeys.has(k.name) ? [this.sinkKeys.get(k.name)!] : []))]),
    ]);
    this.coordinatorFunction = sluiceFunction(this, 'Function-coordinator', {
      functionName: names.coordinatorFunction,
      description: truncate(`Sluice ${plan.job} checkpoint coordinator tasks`, 256),
      entry: entries.coordinator,
      memorySize: 512,
      timeout: Duration.seconds(60),
      role: coordinatorRole,
      logGroup: coordinatorLogs,
      environment: { ...baseEnv, [LOOP_ENV.stateMachineArn]: stateMachineArn },
      ...(tracing ? { tracing: lambda.Tracing.ACTIVE } : {}),
    });
    this.acknowledgeRuntime(this.coordinatorFunction);

    this.coordinator = new CoordinatorStateMachine(this, 'Coordinator', {
      stateMachineName: names.stateMachine,
      coordinatorFunction: this.coordinatorFunction,
      checkpoint: plan.checkpoint,
      logRetention,
      tracing,
      ...(props.coordinatorLogLevel ? { logLevel: props.coordinatorLogLevel } : {}),
    });
    this.stateMachine = this.coordinator.stateMachine;
    if (!tracing) {
      Validations.of(this.stateMachine).acknowledge({ id: 'AwsSolutions-SF2', reason: 'X-Ray tracing is a prop (tracing: true); off by default to keep an idle job free of trace costs.' });
    }
    if ((props.coordinatorLogLevel ?? 'ERROR') !== 'ALL') {
      Validations.of(this.stateMachine).acknowledge({
        id: 'AwsSolutions-SF1',
        reason: 'The workflow logs failed states and executions (ERROR); ALL logs three transitions per checkpoint with their data, a cost worth paying only while debugging (coordinatorLogLevel).',
      });
    }
    const fnLogicalId = stack.resolve(stack.getLogicalId(this.coordinatorFunction.node.defaultChild as lambda.CfnFunction)) as string;
    const smPolicy = this.stateMachine.role.node.tryFindChild('DefaultPolicy') as IConstruct;
    Validations.of(smPolicy).acknowledge(
      {
        id: `AwsSolutions-IAM5[Resource::<${fnLogicalId}.Arn>:*]`,
        reason: 'Added by the LambdaInvoke task: versions and aliases of the coordinator function, and no other function.',
      },
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'X-Ray tracing (PutTraceSegments, PutTelemetryRecords, GetSampling*) and CloudWatch Logs delivery (CreateLogDelivery, ...) have no resource-level permissions; CDK adds them for tracing and logging.',
      },
    );

    if (props.restartCoordinatorOnFailure ?? true) {
      this.restartRule = new events.Rule(this, 'CoordinatorRestart', {
        description: `Restarts the ${names.stateMachine} workflow when an execution fails or times out`,
        eventPattern: {
          source: ['aws.states'],
          detailType: ['Step Functions Execution Status Change'],
          detail: { status: ['FAILED', 'TIMED_OUT'], stateMachineArn: [this.stateMachine.stateMachineArn] },
        },
        targets: [
          new targets.SfnStateMachine(this.stateMachine, { input: events.RuleTargetInput.fromObject({ iteration: 0 }) }),
        ],
      });
    }

    // ── Observability ──────────────────────────────────────────────────────────────────────────
    this.alarms = this.createAlarms(props, idle);
    if (props.dashboard) this.dashboard = this.createDashboard();

    // ── Running and operating ──────────────────────────────────────────────────────────────────
    this.logGroupArns.push(this.coordinator.logGroup.logGroupArn);
    addJobOutputs(this, this.parts());
    this.watchdogRule = addCoordinatorStart(this, this.parts(), {
      period: props.watchdogPeriod ?? Duration.minutes(5),
      onDeploy: props.startOnDeploy ?? true,
      planHash: plan.hash,
      dependsOn: [this.stateMachine, ...eventSourceMappings.values()],
    });
    if (tracing) {
      for (const fn of [...stageFunctions.values(), this.coordinatorFunction]) {
        Validations.of(fn.role!).acknowledge({
          id: 'AwsSolutions-IAM5[Resource::*]',
          reason: 'X-Ray PutTraceSegments and PutTelemetryRecords have no resource-level permissions; added by active tracing (tracing: true).',
        });
      }
    }
  }

  /**
   * Lets producers write a source stream: PutRecord, PutRecords, DescribeStream, ListShards, and
   * kms:GenerateDataKey on the job's key when there is one.
   * @param sourceName logical name of the source (`job.source({ name })`); @default every source
   */
  grantWriteSource(grantee: iam.IGrantable, sourceName?: string): iam.Grant {
    let streams: kinesis.IStream[];
    if (sourceName === undefined) {
      streams = [...new Set(this.sourceStreams.values())];
    } else {
      const stream = this.sourceStreams.get(sourceName);
      if (!stream) {
        throw new Error(
          `job "${this.plan.job}" has no source named "${sourceName}" (sources: ${[...this.sourceStreams.keys()].join(', ')})`,
        );
      }
      streams = [stream];
    }
    const grant = iam.Grant.addToPrincipal({
      grantee,
      actions: ['kinesis:PutRecord', 'kinesis:PutRecords', 'kinesis:DescribeStream', 'kinesis:DescribeStreamSummary', 'kinesis:ListShards'],
      resourceArns: streams.map((s) => s.streamArn),
    });
    const keys = [...(this.key ? [this.key] : []), ...[...this.sourceKeys].filter(([name]) => sourceName === undefined || name === sourceName).map(([, k]) => k)];
    return keys.length
      ? grant.combine(iam.Grant.addToPrincipal({ grantee, actions: ['kms:GenerateDataKey'], resourceArns: [...new Set(keys.map((k) => k.keyArn))] }))
      : grant;
  }

  /**
   * Lets readers see the results: read the sink tables (GetItem, BatchGetItem, Query, Scan,
   * DescribeTable), the state table (queryable state: GetItem, BatchGetItem, Query), the output
   * streams of Kinesis sinks, the objects of file sinks (`sinks/`), and decrypt with the job's key
   * when there is one.
   */
  grantReadResults(grantee: iam.IGrantable): iam.Grant {
    let grant = iam.Grant.addToPrincipal({
      grantee,
      actions: DDB_READ,
      resourceArns: [this.stateTable.tableArn],
    });
    const outputStreamArns = [...this.sinkStreams.values()].map((st) => st.streamArn);
    if (outputStreamArns.length) {
      grant = grant.combine(iam.Grant.addToPrincipal({ grantee, actions: KINESIS_READ, resourceArns: outputStreamArns }));
    }
    if (this.plan.sinks.some((s) => s.kind === 's3-file')) {
      grant = grant.combine(iam.Grant.addToPrincipal({ grantee, actions: ['s3:GetObject'], resourceArns: [this.bucket.arnForObjects('sinks/*')] }));
    }
    const sinkArns = [...this.sinkTables.values()].map((t) => t.tableArn);
    if (sinkArns.length) {
      grant = grant.combine(
        iam.Grant.addToPrincipal({
          grantee,
          actions: [...DDB_READ, 'dynamodb:Scan', 'dynamodb:DescribeTable'],
          resourceArns: sinkArns,
        }),
      );
    }
    const keys = [...(this.key ? [this.key] : []), ...this.sinkKeys.values()];
    return keys.length
      ? grant.combine(iam.Grant.addToPrincipal({ grantee, actions: ['kms:Decrypt', 'kms:DescribeKey'], resourceArns: [...new Set(keys.map((k) => k.keyArn))] }))
      : grant;
  }

  /**
   * A metric the functions publish in the `Sluice` namespace, for this job (and one stage when
   * `stage` is given), as a CloudWatch Metrics Insights query.
   *
   * Why a query and not a plain metric: a CloudWatch metric is identified by its *whole* dimension
   * set, and Powertools Metrics always adds a `service` dimension to whatever the functions declare
   * (today `{service, job, stage}`). A plain metric with `{job}` or `{stage}` alone would match
   * nothing, silently. `SELECT ... FROM Sluice WHERE job = ...` aggregates over every dimension set
   * that carries the `job` key, so the dashboard and alarms keep working when the functions add a
   * dimension, and job-level alarms sum over stages and the coordinator without a 10-metric limit.
   */
  metric(metricName: string, options: SluiceMetricOptions = {}): cloudwatch.IMetric {
    const aggregate = options.aggregate ?? 'SUM';
    const where = [`job = '${this.plan.job}'`, ...(options.stage ? [`stage = '${options.stage}'`] : [])].join(' AND ');
    return new cloudwatch.MathExpression({
      expression: `SELECT ${aggregate}(${metricName}) FROM ${METRICS_NAMESPACE} WHERE ${where}`,
      usingMetrics: {},
      period: options.period ?? Duration.minutes(1),
      label: options.label ?? metricName,
    });
  }

  private parts(): JobParts {
    return {
      prefix: this.names.prefix,
      bucketName: this.bucket.bucketName,
      bucketArn: this.bucket.bucketArn,
      stateTable: this.stateTable,
      controlTable: this.controlTable,
      streams: this.streams,
      stageFunctions: this.stageFunctions,
      eventSourceMappings: this.eventSourceMappings,
      coordinatorFunction: this.coordinatorFunction,
      stateMachineArn: this.stateMachine.stateMachineArn,
      stateMachineName: this.names.stateMachine,
      ...(this.dashboard ? { dashboardName: this.names.prefix } : {}),
      alarmArns: this.alarms.all.map((a) => a.alarmArn),
      logGroupArns: this.logGroupArns,
      keys: this.keys,
    };
  }

  /**
   * Lets an operator run the CLI on this job (`sluice status`, `start`, `stop`, `logs`,
   * `checkpoints`, `savepoint`, `restore`): read the stack's outputs; start, stop and list the
   * coordinator's executions; enable and disable the event source mappings; invoke the coordinator
   * (savepoint requests); read and write the control and state tables (checkpoints, the stop flag,
   * restore); savepoints and deltas in the bucket; describe the alarms; read the logs; the job's
   * keys. `cloudwatch:GetMetricData` has no resource-level permissions (lag per stage).
   */
  grantOperate(grantee: iam.IGrantable): iam.Grant {
    let grant: iam.Grant | undefined;
    for (const st of operateStatements(Stack.of(this), this.parts())) {
      const g = iam.Grant.addToPrincipal({ grantee, actions: st.actions, resourceArns: st.resources });
      grant = grant ? grant.combine(g) : g;
    }
    return grant!;
  }

  private logGroup(cid: string, functionName: string, retention: logs.RetentionDays): logs.LogGroup {
    this.logGroupArns.push(Stack.of(this).formatArn({ service: 'logs', resource: 'log-group', resourceName: `/aws/lambda/${functionName}:*`, arnFormat: ArnFormat.COLON_RESOURCE_NAME }));
    return new logs.LogGroup(this, cid, {
      logGroupName: `/aws/lambda/${functionName}`,
      retention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
  }

  private role(cid: string, description: string, statements: iam.PolicyStatement[]): iam.Role {
    const role = new iam.Role(this, cid, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description,
      inlinePolicies: { access: new iam.PolicyDocument({ statements }) },
    });
    const stack = Stack.of(this);
    const bucketId = stack.resolve(stack.getLogicalId(this.bucket.node.defaultChild as s3.CfnBucket)) as string;
    Validations.of(role).acknowledge(
      ...BUCKET_PREFIXES.map((p) => ({
        id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/${p}*]`,
        reason: `Objects under the ${p} prefix of the job's own bucket: their keys are made at run time (checkpoint ids, epochs, shard ids).`,
      })),
    );
    return role;
  }

  private acknowledgeRuntime(fn: lambda.Function): void {
    Validations.of(fn).acknowledge({
      id: 'AwsSolutions-L1',
      reason: 'Node.js 22 is the runtime the project builds and tests for (LAMBDA_RUNTIME); moving to a newer line is a deliberate change.',
    });
  }

  private createAlarms(props: SluiceJobProps, idle: boolean): SluiceJobAlarms {
    const p = this.names.prefix;
    const iteratorAge = new Map<string, cloudwatch.Alarm>();
    const stalledShard = new Map<string, cloudwatch.Alarm>();
    const threshold = Duration.millis(this.iteratorAgeThresholdMs);
    const stalledAfter = props.stalledShardAlarmAfter ?? Duration.minutes(15);
    for (const stage of this.plan.stages) {
      // The function's own IteratorAge, not the stream's GetRecords metric: while the mapping
      // retries one batch it stops polling, and the stream-level metric is simply absent.
      const age = this.stageFunctions.get(stage.id)!.metric('IteratorAge', { statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(1) });
      iteratorAge.set(
        stage.id,
        new cloudwatch.Alarm(this, `Alarm-iterator-age-${stage.id}`, {
          alarmName: `${p}-${stage.id}-iterator-age`,
          alarmDescription: `Stage ${stage.id} (${truncate(stage.name, 200)}) is more than ${threshold.toHumanString()} behind its input stream`,
          metric: age,
          threshold: this.iteratorAgeThresholdMs,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          evaluationPeriods: 3,
          datapointsToAlarm: 3,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
      // a shard whose position has not moved: the function keeps reading (retrying) records this old;
      // missing data keeps the state, so a mapping that stops invoking does not clear the alarm
      stalledShard.set(
        stage.id,
        new cloudwatch.Alarm(this, `Alarm-stalled-shard-${stage.id}`, {
          alarmName: `${p}-${stage.id}-stalled-shard`,
          alarmDescription: `A shard of stage ${stage.id} has not moved for ${stalledAfter.toHumanString()}: its function keeps reading records that old (a batch retried forever?)`,
          metric: age,
          threshold: stalledAfter.toMilliseconds(),
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cloudwatch.TreatMissingData.IGNORE,
        }),
      );
    }
    const checkpointStalled = new cloudwatch.Alarm(this, 'Alarm-checkpoint-stalled', {
      alarmName: `${p}-checkpoint-stalled`,
      alarmDescription: 'The coordinator reports a checkpoint that cannot complete (CheckpointStalled)',
      metric: this.metric('CheckpointStalled', { period: Duration.minutes(5) }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const coordinatorFailed = new cloudwatch.Alarm(this, 'Alarm-coordinator-failed', {
      alarmName: `${p}-coordinator-failed`,
      alarmDescription: `An execution of the ${this.names.stateMachine} workflow failed`,
      metric: this.stateMachine.metricFailed({ statistic: cloudwatch.Stats.SUM, period: Duration.minutes(5) }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const checkpointFailed = new cloudwatch.Alarm(this, 'Alarm-checkpoint-failed', {
      alarmName: `${p}-checkpoint-failed`,
      alarmDescription: 'A checkpoint failed or was aborted (timeout, a task error); the next checkpoint covers its data',
      metric: this.metric('CheckpointFailed', { period: Duration.minutes(5) }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const deadLetters = new cloudwatch.Alarm(this, 'Alarm-dead-letters', {
      alarmName: `${p}-dead-letters`,
      alarmDescription: `Records went to s3://<bucket>/dead-letters/ (poison policy: ${this.plan.poisonPolicy})`,
      metric: this.metric('DeadLetters', { period: Duration.minutes(5) }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    let checkpointsStalled: cloudwatch.Alarm | undefined;
    if (!idle) {
      const stallAfter =
        props.checkpointStallAlarmAfter ??
        Duration.seconds(Math.max(15 * 60, Math.ceil((10 * Math.max(this.plan.checkpoint.intervalMs, this.plan.checkpoint.minPauseMs)) / 1000)));
      const periods = Math.min(288, Math.max(1, Math.ceil(stallAfter.toSeconds() / 300)));
      checkpointsStalled = new cloudwatch.Alarm(this, 'Alarm-checkpoints-stalled', {
        alarmName: `${p}-checkpoints-stalled`,
        alarmDescription: `No checkpoint completed for ${periods * 5} minutes: is a coordinator execution running?`,
        metric: this.metric('CheckpointCompleted', { period: Duration.minutes(5) }),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluationPeriods: periods,
        treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      });
    }
    const all = [
      ...iteratorAge.values(),
      ...stalledShard.values(),
      coordinatorFailed,
      checkpointFailed,
      checkpointStalled,
      deadLetters,
      ...(checkpointsStalled ? [checkpointsStalled] : []),
    ];
    for (const alarm of all) alarm.addAlarmAction(...(props.alarmActions ?? []));
    return { iteratorAge, stalledShard, checkpointStalled, coordinatorFailed, checkpointFailed, deadLetters, ...(checkpointsStalled ? { checkpointsStalled } : {}), all };
  }

  private createDashboard(): cloudwatch.Dashboard {
    const plan = this.plan;
    const dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: this.names.prefix,
      defaultInterval: Duration.hours(3),
    });
    dashboard.addWidgets(
      new cloudwatch.TextWidget({
        markdown: [
          `# Sluice job \`${plan.job}\``,
          `plan \`${plan.hash}\` · ${plan.mode} · checkpoint every ${plan.checkpoint.intervalMs} ms · poison policy \`${plan.poisonPolicy}\``,
          '',
          ...plan.stages.map((s) => `- **${s.id}** × ${s.parallelism}: ${s.name}`),
        ].join('\n'),
        width: 24,
        height: 2 + Math.ceil(plan.stages.length / 2),
      }),
    );
    dashboard.addWidgets(new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: [...this.alarms.all], width: 24, height: 3 }));
    for (const stage of plan.stages) {
      const fn = this.stageFunctions.get(stage.id)!;
      const stream = this.streams.get(stage.id)!;
      dashboard.addWidgets(
        new cloudwatch.GraphWidget({
          title: `${stage.id} records in / out`,
          left: [
            this.metric('RecordsIn', { stage: stage.id, label: 'in' }),
            this.metric('RecordsOut', { stage: stage.id, label: 'out' }),
          ],
          width: 8,
        }),
        new cloudwatch.GraphWidget({
          title: `${stage.id} iterator age (ms)`,
          left: [
            fn.metric('IteratorAge', { statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(1), label: 'function' }),
            stream.metricGetRecordsIteratorAgeMilliseconds({ statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(1), label: 'stream' }),
          ],
          leftAnnotations: [{ value: this.iteratorAgeThresholdMs, label: 'alarm' }],
          width: 8,
        }),
        new cloudwatch.GraphWidget({
          title: `${stage.id} function`,
          left: [fn.metricInvocations({ period: Duration.minutes(1) }), fn.metricErrors({ period: Duration.minutes(1) }), fn.metricThrottles({ period: Duration.minutes(1) })],
          right: [fn.metricDuration({ statistic: cloudwatch.Stats.p(99), period: Duration.minutes(1) })],
          width: 8,
        }),
      );
    }
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Checkpoints',
        left: [
          this.metric('CheckpointDurationMs', { aggregate: 'AVG', label: 'snapshot duration avg (ms)' }),
          this.metric('CheckpointDurationMs', { aggregate: 'MAX', label: 'snapshot duration max (ms)' }),
        ],
        right: [
          this.metric('CheckpointBytes', { label: 'delta bytes' }),
          this.metric('CheckpointCompleted', { label: 'completed' }),
        ],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Failures',
        left: [
          this.metric('CheckpointFailed', { label: 'checkpoints failed/aborted' }),
          this.stateMachine.metricFailed({ period: Duration.minutes(1), label: 'coordinator executions failed' }),
          this.metric('DeadLetters', { label: 'dead letters' }),
        ],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'State cache (invariant 5)',
        left: [this.metric('CacheHit', { label: 'batches on a valid cache' }), this.metric('CacheMiss', { label: 'batches that restored' })],
        width: 8,
      }),
    );
    return dashboard;
  }
}

function logStatement(logGroup: logs.LogGroup): iam.PolicyStatement {
  // logGroupArn ends in ":*" (the log streams of this one group, which Lambda names per environment)
  return new iam.PolicyStatement({
    sid: 'OwnLogGroup',
    actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
    resources: [logGroup.logGroupArn],
  });
}

/** KMS use of an imported stream or table: read, write and publish under its key. */
function importedKeyStatements(sid: string, keys: readonly kms.IKey[]): iam.PolicyStatement[] {
  const arns = [...new Set(keys.map((k) => k.keyArn))];
  return arns.length ? [new iam.PolicyStatement({ sid, actions: ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey', 'kms:DescribeKey'], resources: arns })] : [];
}

/** Keys given for imported sources or sinks, checked against the plan: the name must exist and name an existing resource. */
function importedKeys(plan: Plan, kind: 'sources' | 'sinks', given: Readonly<Record<string, kms.IKey>>): Map<string, kms.IKey> {
  const out = new Map<string, kms.IKey>();
  for (const [name, k] of Object.entries(given)) {
    if (kind === 'sources') {
      const src = plan.sources.find((x) => x.name === name);
      if (!src) throw new Error(`importedResourceKeys.sources names "${name}", but the job's sources are ${plan.sources.map((x) => x.name).join(', ')}`);
      if (src.streamName === undefined) throw new Error(`importedResourceKeys.sources.${name}: the source creates its own stream (under encryptionKey); a key is only for a stream it imports (streamName)`);
    } else {
      const sink = plan.sinks.find((x) => x.name === name);
      if (!sink) throw new Error(`importedResourceKeys.sinks names "${name}", but the job's sinks are ${plan.sinks.map((x) => x.name).join(', ')}`);
      const imported = (sink.kind === 'dynamodb-upsert' && sink.tableName !== undefined) || (sink.kind === 'kinesis' && sink.streamName !== undefined);
      if (!imported) throw new Error(`importedResourceKeys.sinks.${name}: the sink does not import an existing table or stream (tableName/streamName), so it needs no key of its own`);
    }
    out.set(name, k);
  }
  return out;
}

/** Ids of the sources named by `onDemandSources`, checked against the plan: each must exist and create its stream. */
function onDemandSourceIds(plan: Plan, given: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const name of given) {
    const src = plan.sources.find((x) => x.name === name);
    if (!src) throw new Error(`onDemandSources names "${name}", but the job's sources are ${plan.sources.map((x) => x.name).join(', ')}`);
    if (src.streamName !== undefined) {
      throw new Error(`onDemandSources: source "${name}" reads the existing stream ${src.streamName}, whose capacity mode is its own (on-demand streams are adopted as they are); list only sources whose stream the job creates`);
    }
    out.add(src.id);
  }
  return out;
}

function sourceOf(plan: Plan, stage: PlanStage): PlanSource | undefined {
  if (stage.input.kind !== 'source') return undefined;
  const id = stage.input.sourceId;
  return plan.sources.find((s) => s.id === id);
}

function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

function validatePrefix(prefix: string): void {
  if (!prefix || sanitizeName(prefix) !== prefix) {
    throw new Error(
      `prefix must be lower-case letters, digits and single dashes, not starting or ending with a dash (it starts every physical name), got "${prefix}"`,
    );
  }
}

function validateNames(plan: Plan, names: ResourceNames): void {
  const check = (kind: keyof typeof MAX_NAME, name: string) => {
    if (name.length > MAX_NAME[kind]) {
      throw new Error(`${kind} name "${name}" has ${name.length} characters, more than the ${MAX_NAME[kind]} AWS allows: use a shorter prefix`);
    }
  };
  check('function', names.coordinatorFunction);
  check('stateMachine', names.stateMachine);
  check('table', names.stateTable);
  check('table', names.controlTable);
  for (const stage of plan.stages) {
    check('function', names.functionOf(stage));
    check('stream', names.streamOf(stage));
  }
  for (const sink of plan.sinks as readonly PlanSink[]) {
    if (sink.kind === 'dynamodb-upsert') check('table', names.sinkTable(sink));
    if (sink.kind === 'kinesis') check('stream', kinesisSinkStream(names, sink));
  }
}

interface ResolvedStageSettings {
  readonly memorySize: number;
  readonly timeout: Duration;
  readonly batchSize: number;
  readonly maxBatchingWindow?: Duration;
  readonly reservedConcurrency?: number;
}

function resolveStageSettings(plan: Plan, given: Readonly<Record<string, StageSettings>>): Map<string, ResolvedStageSettings> {
  const ids = plan.stages.map((s) => s.id);
  for (const id of Object.keys(given)) {
    if (!ids.includes(id)) throw new Error(`stageSettings names stage "${id}", but the job's stages are ${ids.join(', ')}`);
  }
  const out = new Map<string, ResolvedStageSettings>();
  for (const stage of plan.stages) {
    const g = given[stage.id] ?? {};
    const where = `stageSettings.${stage.id}`;
    const memorySize = g.memorySize ?? STAGE_DEFAULTS.memorySize;
    if (!Number.isInteger(memorySize) || memorySize < 128 || memorySize > 10_240) {
      throw new Error(`${where}.memorySize must be an integer between 128 and 10240 MB, got ${memorySize}`);
    }
    const timeout = g.timeout ?? STAGE_DEFAULTS.timeout;
    if (timeout.toSeconds() < 1 || timeout.toSeconds() > 900) {
      throw new Error(`${where}.timeout must be between 1 second and 15 minutes, got ${timeout.toHumanString()}`);
    }
    const batchSize = g.batchSize ?? STAGE_DEFAULTS.batchSize;
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10_000) {
      throw new Error(`${where}.batchSize must be an integer between 1 and 10000, got ${batchSize}`);
    }
    if (g.maxBatchingWindow && g.maxBatchingWindow.toSeconds() > 300) {
      throw new Error(`${where}.maxBatchingWindow must be at most 5 minutes, got ${g.maxBatchingWindow.toHumanString()}`);
    }
    if (g.reservedConcurrency !== undefined && (!Number.isInteger(g.reservedConcurrency) || g.reservedConcurrency < stage.parallelism)) {
      throw new Error(
        `${where}.reservedConcurrency must be an integer of at least the stage's parallelism (${stage.parallelism}: one invocation per shard), got ${g.reservedConcurrency}`,
      );
    }
    out.set(stage.id, {
      memorySize,
      timeout,
      batchSize,
      ...(g.maxBatchingWindow ? { maxBatchingWindow: g.maxBatchingWindow } : {}),
      ...(g.reservedConcurrency !== undefined ? { reservedConcurrency: g.reservedConcurrency } : {}),
    });
  }
  return out;
}

export interface SluiceJobStackProps extends StackProps, SluiceJobProps {}

/** A stack holding one `SluiceJob` (construct id `Job`): what `cdk/app.ts` deploys per example. */
export class SluiceJobStack extends Stack {
  readonly job: SluiceJob;
  constructor(scope: Construct, id: string, props: SluiceJobStackProps) {
    super(scope, id, props);
    this.job = new SluiceJob(this, 'Job', props);
  }
}

/** The stack id `cdk/app.ts` and `coordinatorDefinition` use for a job. */
export function stackIdFor(jobName: string): string {
  return `Sluice-${sanitizeName(jobName)}`;
}
