/**
 * What watches a deployed job: its CloudWatch alarms and its dashboard, over the metrics the
 * functions publish (EMF, Metrics Insights queries by `job` and `stage`) and the AWS metrics of its
 * functions, streams and workflow.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import type { Plan } from '../shared/plan/plan.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import { truncate } from './job-validation.js';
import { METRICS_NAMESPACE, type SluiceJobAlarms, type SluiceJobProps, type SluiceMetricOptions } from './sluice-job-props.js';

/** The parts of a job its alarms and dashboard watch; the alarms and dashboard are created in `scope`. */
export interface MonitoredJob {
  readonly scope: Construct;
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly stageFunctions: ReadonlyMap<string, lambda.IFunction>;
  readonly streams: ReadonlyMap<string, kinesis.IStream>;
  readonly stateMachine: sfn.IStateMachine;
  readonly iteratorAgeThresholdMs: number;
  /** the functions publish DETAILED_METRICS too (SluiceJob `detailedMetrics`): the dashboard graphs them */
  readonly detailedMetrics: boolean;
  /** the Express workflow of the checkpoint rounds, when the checkpoints run in rounds */
  readonly rounds?: sfn.IStateMachine;
}

/** One metric the functions publish for `jobName`, summed (by default) over every dimension set; see `SluiceJob.metric`. */
export function jobMetric(jobName: string, metricName: string, options: SluiceMetricOptions = {}): cloudwatch.IMetric {
  const aggregate = options.aggregate ?? 'SUM';
  const where = [`job = '${jobName}'`, ...(options.stage ? [`stage = '${options.stage}'`] : [])].join(' AND ');
  return new cloudwatch.MathExpression({
    expression: `SELECT ${aggregate}(${metricName}) FROM ${METRICS_NAMESPACE} WHERE ${where}`,
    usingMetrics: {},
    period: options.period ?? Duration.minutes(1),
    label: options.label ?? metricName,
  });
}

/** The job's alarms (one set per stage, one per job), each with `props.alarmActions`. */
export function createAlarms(job: MonitoredJob, props: SluiceJobProps, idle: boolean): SluiceJobAlarms {
  const p = job.names.prefix;
  const iteratorAge = new Map<string, cloudwatch.Alarm>();
  const stalledShard = new Map<string, cloudwatch.Alarm>();
  const threshold = Duration.millis(job.iteratorAgeThresholdMs);
  const stalledAfter = props.stalledShardAlarmAfter ?? Duration.minutes(15);
  for (const stage of job.plan.stages) {
    // The function's own IteratorAge, not the stream's GetRecords metric: while the mapping
    // retries one batch it stops polling, and the stream-level metric is simply absent.
    const age = job.stageFunctions.get(stage.id)!.metric('IteratorAge', { statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(1) });
    iteratorAge.set(
      stage.id,
      new cloudwatch.Alarm(job.scope, `Alarm-iterator-age-${stage.id}`, {
        alarmName: `${p}-${stage.id}-iterator-age`,
        alarmDescription: `Stage ${stage.id} (${truncate(stage.name, 200)}) is more than ${threshold.toHumanString()} behind its input stream`,
        metric: age,
        threshold: job.iteratorAgeThresholdMs,
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
      new cloudwatch.Alarm(job.scope, `Alarm-stalled-shard-${stage.id}`, {
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
  const checkpointStalled = new cloudwatch.Alarm(job.scope, 'Alarm-checkpoint-stalled', {
    alarmName: `${p}-checkpoint-stalled`,
    alarmDescription: 'The coordinator reports a checkpoint that cannot complete (CheckpointStalled)',
    metric: jobMetric(job.plan.job, 'CheckpointStalled', { period: Duration.minutes(5) }),
    threshold: 0,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const coordinatorFailed = new cloudwatch.Alarm(job.scope, 'Alarm-coordinator-failed', {
    alarmName: `${p}-coordinator-failed`,
    alarmDescription: `An execution of the ${job.names.stateMachine} workflow failed`,
    metric: job.stateMachine.metricFailed({ statistic: cloudwatch.Stats.SUM, period: Duration.minutes(5) }),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const checkpointFailed = new cloudwatch.Alarm(job.scope, 'Alarm-checkpoint-failed', {
    alarmName: `${p}-checkpoint-failed`,
    alarmDescription: 'A checkpoint failed or was aborted (timeout, a task error); the next checkpoint covers its data',
    metric: jobMetric(job.plan.job, 'CheckpointFailed', { period: Duration.minutes(5) }),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const deadLetters = new cloudwatch.Alarm(job.scope, 'Alarm-dead-letters', {
    alarmName: `${p}-dead-letters`,
    alarmDescription: `Records went to s3://<bucket>/dead-letters/ (poison policy: ${job.plan.poisonPolicy})`,
    metric: jobMetric(job.plan.job, 'DeadLetters', { period: Duration.minutes(5) }),
    threshold: 0,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  let checkpointsStalled: cloudwatch.Alarm | undefined;
  if (!idle) {
    const stallAfter =
      props.checkpointStallAlarmAfter ??
      Duration.seconds(Math.max(15 * 60, Math.ceil((10 * Math.max(job.plan.checkpoint.intervalMs, job.plan.checkpoint.minPauseMs)) / 1000)));
    const periods = Math.min(288, Math.max(1, Math.ceil(stallAfter.toSeconds() / 300)));
    checkpointsStalled = new cloudwatch.Alarm(job.scope, 'Alarm-checkpoints-stalled', {
      alarmName: `${p}-checkpoints-stalled`,
      alarmDescription: `No checkpoint completed for ${periods * 5} minutes: is a coordinator execution running?`,
      metric: jobMetric(job.plan.job, 'CheckpointCompleted', { period: Duration.minutes(5) }),
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

/** The job's dashboard: the plan, the alarms, per stage records, iterator age and function health, then checkpoints and failures. */
export function createDashboard(job: MonitoredJob, alarms: SluiceJobAlarms): cloudwatch.Dashboard {
  const plan = job.plan;
  const dashboard = new cloudwatch.Dashboard(job.scope, 'Dashboard', {
    dashboardName: job.names.prefix,
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
  dashboard.addWidgets(new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: [...alarms.all], width: 24, height: 3 }));
  for (const stage of plan.stages) {
    const fn = job.stageFunctions.get(stage.id)!;
    const stream = job.streams.get(stage.id)!;
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: `${stage.id} records in / out`,
        left: [
          jobMetric(job.plan.job, 'RecordsIn', { stage: stage.id, label: 'in' }),
          jobMetric(job.plan.job, 'RecordsOut', { stage: stage.id, label: 'out' }),
        ],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: `${stage.id} iterator age (ms)`,
        left: [
          fn.metric('IteratorAge', { statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(1), label: 'function' }),
          stream.metricGetRecordsIteratorAgeMilliseconds({ statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(1), label: 'stream' }),
        ],
        leftAnnotations: [{ value: job.iteratorAgeThresholdMs, label: 'alarm' }],
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
  // the snapshots' duration and bytes are DETAILED_METRICS: by default each checkpoint's are in its record (`sluice status`)
  const detailed = job.detailedMetrics;
  const invocations = (label: string) =>
    new cloudwatch.MathExpression({
      expression: plan.stages.map((_, i) => `i${i}`).join(' + '),
      usingMetrics: Object.fromEntries(plan.stages.map((s, i) => [`i${i}`, job.stageFunctions.get(s.id)!.metricInvocations({ period: Duration.minutes(1) })])),
      label,
      period: Duration.minutes(1),
    });
  dashboard.addWidgets(
    new cloudwatch.GraphWidget({
      title: 'Checkpoints',
      left: detailed
        ? [
            jobMetric(job.plan.job, 'CheckpointDurationMs', { aggregate: 'AVG', label: 'snapshot duration avg (ms)' }),
            jobMetric(job.plan.job, 'CheckpointDurationMs', { aggregate: 'MAX', label: 'snapshot duration max (ms)' }),
          ]
        : [jobMetric(job.plan.job, 'CheckpointCompleted', { label: 'completed' })],
      right: detailed ? [jobMetric(job.plan.job, 'CheckpointBytes', { label: 'delta bytes' }), jobMetric(job.plan.job, 'CheckpointCompleted', { label: 'completed' })] : [],
      width: 8,
    }),
    new cloudwatch.GraphWidget({
      title: 'Failures',
      left: [
        jobMetric(job.plan.job, 'CheckpointFailed', { label: 'checkpoints failed/aborted' }),
        job.stateMachine.metricFailed({ period: Duration.minutes(1), label: 'coordinator executions failed' }),
        ...(job.rounds ? [job.rounds.metricFailed({ period: Duration.minutes(1), label: 'checkpoint rounds failed (retried by the coordinator)' })] : []),
        jobMetric(job.plan.job, 'DeadLetters', { label: 'dead letters' }),
      ],
      width: 8,
    }),
    new cloudwatch.GraphWidget({
      title: 'State cache (invariant 5)',
      left: [
        detailed ? jobMetric(job.plan.job, 'CacheHit', { label: 'batches on a valid cache' }) : invocations('stage invocations (batches)'),
        jobMetric(job.plan.job, 'CacheMiss', { label: 'batches that restored' }),
      ],
      width: 8,
    }),
  );
  return dashboard;
}
