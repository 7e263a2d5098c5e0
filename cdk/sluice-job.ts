/**
 * `SluiceJob`: the L3 construct that deploys one planned job.
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
import { isAbsolute, resolve } from 'node:path';
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
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import type { Plan } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { ENV, defaultPrefix, resourceNames, sanitizeName } from '../shared/plan/resources.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import { COORDINATOR_TIMEOUT_MS, LOOP_ENV } from '../shared/coordinator/loop.js';
import { TRACING_ENV } from '../functions/telemetry.js';
import { DETAILED_METRICS_ENV, WATCHED_METRICS_ENV, watchedMetrics } from '../shared/runtime/metric-names.js';
import { barrierWaitMs } from './ack-wait.js';
import { CoordinatorStateMachine } from './coordinator-state-machine.js';
import { addCoordinatorStart, addJobOutputs, operateStatements, type JobParts } from './job-operations.js';
import { REPO_ROOT, defaultEntriesDir, writeFunctionEntries } from './function-entry.js';
import { createAlarms, createDashboard, jobMetric } from './job-monitoring.js';
import { importedKeys, onDemandSourceIds, resolveStageSettings, sourceOf, truncate, validateNames, validatePrefix } from './job-validation.js';
import { BUCKET_PREFIXES, METRICS_NAMESPACE } from './sluice-job-props.js';
import type { SluiceJobAlarms, SluiceJobProps, SluiceMetricOptions } from './sluice-job-props.js';
import { sluiceFunction } from './sluice-function.js';
import { DDB_READ, DDB_READ_WRITE, DDB_SINK_WRITE, KINESIS_READ, importedKeyStatements, logStatement } from './job-iam.js';
import { readResultsGrant, writeSourceGrant, type GrantedResources } from './job-grants.js';
import { acknowledgeCoordinator, acknowledgeRuntime, acknowledgeTracing } from './job-nag.js';
import { createBucket, createSinkStreams, createStageStreams, createTables } from './job-storage.js';

export { METRICS_NAMESPACE, STAGE_DEFAULTS, BUCKET_PREFIXES } from './sluice-job-props.js';
export type { SluiceJobProps, SluiceJobAlarms, SluiceMetricOptions, StageSettings } from './sluice-job-props.js';
export { sluiceFunction, LAMBDA_RUNTIME } from './sluice-function.js';
export type { SluiceFunctionProps } from './sluice-function.js';

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

    // ── Data: streams, tables, bucket ──────────────────────────────────────────────────────────
    const storage = { ...(key ? { key } : {}), removalPolicy: dataRemoval, streamRetention: props.streamRetention ?? Duration.hours(24), onDemand };
    const { streams, sourceStreams } = createStageStreams(this, plan, names, storage);
    this.streams = streams;
    this.sourceStreams = sourceStreams;
    const { stateTable, controlTable, sinkTables } = createTables(this, plan, names, storage);
    this.stateTable = stateTable;
    this.controlTable = controlTable;
    this.sinkTables = sinkTables;
    const sinkStreams = createSinkStreams(this, plan, names, storage);
    this.sinkStreams = sinkStreams;
    this.bucket = createBucket(this, storage);

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
      ...(props.detailedMetrics ? { [DETAILED_METRICS_ENV]: '1' } : {}),
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
      // an inner stage fed by a source stage lists that source stream's shards: a source barrier is
      // complete when the hash ranges of the shards that sent it cover the stream (barrier-senders.ts)
      const upstreamSources = stage.input.kind === 'exchange'
        ? stage.input.fromStages.filter((id) => plan.stages.find((x) => x.id === id)?.input.kind === 'source').map((id) => streams.get(id)!)
        : [];
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
        ...(upstreamSources.length
          ? [new iam.PolicyStatement({ sid: 'ListSourceShards', actions: ['kinesis:ListShards'], resources: upstreamSources.map((u) => u.streamArn) })]
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
        logLevel: props.logLevel ?? 'WARN',
        ...(tracing ? { tracing: lambda.Tracing.ACTIVE } : {}),
        ...(s.reservedConcurrency !== undefined ? { reservedConcurrentExecutions: s.reservedConcurrency } : {}),
        environment: { ...baseEnv, [ENV.stage]: stage.id },
      });
      acknowledgeRuntime(fn);
      const esm = new lambda.EventSourceMapping(this, `Input-${stage.id}`, {
        target: fn,
        eventSourceArn: input.streamArn,
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: s.batchSize,
        // fewer, larger batches: defaults and their reasons in stage-batching.ts
        ...(s.maxBatchingWindow.toMilliseconds() > 0 ? { maxBatchingWindow: s.maxBatchingWindow } : {}),
        parallelizationFactor: 1,
        bisectBatchOnError: true,
        // a source whose credit window is full reports the first record it did not take as failed:
        // the mapping hands the rest over again (runtime/source-window.ts)
        reportBatchItemFailures: true,
        // -1: retry until the batch succeeds. An ESM that gives up skips the batch and loses data;
        // poison records are the engine's business (dead letters).
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
    // the coordinator publishes CheckpointCompleted only where an alarm or the dashboard reads it
    const watched = watchedMetrics({ idleCoordinator: idle, dashboard: props.dashboard ?? false });
    const watchedEnv: Record<string, string> = watched.length > 0 ? { [WATCHED_METRICS_ENV]: watched.join(',') } : {};
    this.coordinatorFunction = sluiceFunction(this, 'Function-coordinator', {
      functionName: names.coordinatorFunction,
      description: truncate(`Sluice ${plan.job} checkpoint coordinator tasks`, 256),
      entry: entries.coordinator,
      memorySize: 512,
      // a round's commit must fit in an Express execution after its last read of the acks
      timeout: Duration.millis(COORDINATOR_TIMEOUT_MS),
      role: coordinatorRole,
      logGroup: coordinatorLogs,
      logLevel: props.logLevel ?? 'WARN',
      environment: { ...baseEnv, [LOOP_ENV.stateMachineArn]: stateMachineArn, ...watchedEnv },
      ...(tracing ? { tracing: lambda.Tracing.ACTIVE } : {}),
    });
    acknowledgeRuntime(this.coordinatorFunction);

    this.coordinator = new CoordinatorStateMachine(this, 'Coordinator', {
      stateMachineName: names.stateMachine,
      coordinatorFunction: this.coordinatorFunction,
      checkpoint: plan.checkpoint,
      controlTable: this.controlTable,
      barrierWaitSeconds: barrierWaitMs(plan, (id) => settings.get(id)!.maxBatchingWindow.toMilliseconds()) / 1000,
      logRetention,
      tracing,
      ...(props.coordinatorLogLevel ? { logLevel: props.coordinatorLogLevel } : {}),
      ...(props.expressCheckpoints !== undefined ? { expressCheckpoints: props.expressCheckpoints } : {}),
    });
    this.stateMachine = this.coordinator.stateMachine;
    acknowledgeCoordinator(this.stateMachine, this.coordinator.rounds, this.coordinatorFunction, props);

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
    const monitored = {
      scope: this,
      plan,
      names,
      stageFunctions: this.stageFunctions,
      streams: this.streams,
      stateMachine: this.stateMachine,
      iteratorAgeThresholdMs: this.iteratorAgeThresholdMs,
      detailedMetrics: props.detailedMetrics ?? false,
      ...(this.coordinator.rounds ? { rounds: this.coordinator.rounds } : {}),
    };
    this.alarms = createAlarms(monitored, props, idle);
    if (props.dashboard) this.dashboard = createDashboard(monitored, this.alarms);

    // ── Running and operating ──────────────────────────────────────────────────────────────────
    this.logGroupArns.push(this.coordinator.logGroup.logGroupArn);
    addJobOutputs(this, this.parts());
    this.watchdogRule = addCoordinatorStart(this, this.parts(), {
      period: props.watchdogPeriod ?? Duration.minutes(5),
      onDeploy: props.startOnDeploy ?? true,
      planHash: plan.hash,
      dependsOn: [this.stateMachine, ...eventSourceMappings.values()],
    });
    if (tracing) acknowledgeTracing([...stageFunctions.values(), this.coordinatorFunction]);
  }

  /**
   * Lets producers write a source stream: PutRecord, PutRecords, DescribeStream, ListShards, and
   * kms:GenerateDataKey on the job's key when there is one.
   * @param sourceName logical name of the source (`job.source({ name })`); @default every source
   */
  grantWriteSource(grantee: iam.IGrantable, sourceName?: string): iam.Grant {
    return writeSourceGrant(this.granted(), grantee, sourceName);
  }

  /**
   * Lets readers see the results: read the sink tables (GetItem, BatchGetItem, Query, Scan,
   * DescribeTable), the state table (queryable state: GetItem, BatchGetItem, Query), the output
   * streams of Kinesis sinks, the objects of file sinks (`sinks/`), and decrypt with the job's key
   * when there is one.
   */
  grantReadResults(grantee: iam.IGrantable): iam.Grant {
    return readResultsGrant(this.granted(), grantee);
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
    return jobMetric(this.plan.job, metricName, options);
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

  private granted(): GrantedResources {
    return {
      plan: this.plan,
      ...(this.key ? { key: this.key } : {}),
      sourceStreams: this.sourceStreams,
      sourceKeys: this.sourceKeys,
      sinkKeys: this.sinkKeys,
      stateTable: this.stateTable,
      sinkTables: this.sinkTables,
      sinkStreams: this.sinkStreams,
      bucket: this.bucket,
    };
  }
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
