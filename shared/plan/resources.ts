/**
 * Physical names of everything a planned job uses, derived from the plan and one prefix. The CDK
 * construct creates resources under these names, the local runner creates them in the emulators,
 * and the functions find them from `SLUICE_PREFIX` alone, so no list of names has to be passed
 * around (and none can drift).
 */
import type { Plan, PlanSink, PlanSource, PlanStage } from './plan.js';

export interface ResourceNames {
  readonly prefix: string;
  /** DynamoDB table with keyed and operator state rows */
  readonly stateTable: string;
  /** DynamoDB table with leases, snapshot manifests, small deltas and checkpoint records */
  readonly controlTable: string;
  /** S3 bucket for large deltas, savepoints, dead letters and file-sink output */
  readonly bucket: string;
  /** the coordinator state machine */
  readonly stateMachine: string;
  /** Kinesis stream feeding a stage (for a source stage, the source stream) */
  streamOf(stage: PlanStage): string;
  /** Kinesis stream of a source */
  sourceStream(source: PlanSource): string;
  /** DynamoDB table of an upsert sink */
  sinkTable(sink: PlanSink): string;
  /** Lambda function running a stage */
  functionOf(stage: PlanStage): string;
  /** Lambda function running the coordinator's tasks */
  readonly coordinatorFunction: string;
}

/** Lower-case, dash-separated, safe for every AWS name we create (streams, tables, buckets, functions). */
export function sanitizeName(s: string): string {
  return s
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-|-$/g, '');
}

export function defaultPrefix(plan: Plan): string {
  return `sluice-${sanitizeName(plan.job)}`;
}

export function resourceNames(plan: Plan, prefix: string = defaultPrefix(plan)): ResourceNames {
  const p = sanitizeName(prefix);
  const sourceStream = (s: PlanSource): string => s.streamName ?? `${p}-src-${sanitizeName(s.name)}`;
  return {
    prefix: p,
    stateTable: `${p}-state`,
    controlTable: `${p}-control`,
    bucket: `${p}-data`,
    stateMachine: `${p}-coordinator`,
    coordinatorFunction: `${p}-coordinator`,
    sourceStream,
    streamOf(stage) {
      if (stage.input.kind === 'source') {
        const sourceId = stage.input.sourceId;
        const src = plan.sources.find((s) => s.id === sourceId);
        if (!src) throw new Error(`stage ${stage.id} reads unknown source ${sourceId}`);
        return sourceStream(src);
      }
      return `${p}-${stage.id}`;
    },
    sinkTable: (sink) => sink.tableName ?? `${p}-sink-${sanitizeName(sink.name)}`,
    functionOf: (stage) => `${p}-${stage.id}`,
  };
}

/**
 * Environment variables the functions read. The CDK construct and the local runner set them; the
 * functions read them through `readFunctionConfig`.
 */
export const ENV = {
  /** resource prefix given to `resourceNames` */
  prefix: 'SLUICE_PREFIX',
  /** stage id a stage function runs (`s1`) */
  stage: 'SLUICE_STAGE',
  /** the data bucket, when its name is not `resourceNames(...).bucket` (CDK lets AWS name buckets) */
  bucket: 'SLUICE_BUCKET',
  /** log level for the functions' structured logs */
  logLevel: 'POWERTOOLS_LOG_LEVEL',
} as const;
