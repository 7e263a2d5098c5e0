/**
 * Plan-time checks of a `SluiceJob`'s props against its plan and AWS's limits, and the per-stage
 * settings they resolve to. Each error names the prop and the value at fault.
 */
import { Duration } from 'aws-cdk-lib';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type { Plan, PlanSink, PlanSource, PlanStage } from '../shared/plan/plan.js';
import { sanitizeName } from '../shared/plan/resources.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import { kinesisSinkStream } from '../shared/plan/sink-names.js';
import { STAGE_DEFAULTS, type StageSettings } from './sluice-job-props.js';
import { defaultBatchingWindowMs, maxBatchingWindowMs } from './stage-batching.js';

const MAX_NAME = { function: 64, stream: 128, table: 255, stateMachine: 80 } as const;

/** Keys given for imported sources or sinks, checked against the plan: the name must exist and name an existing resource. */
export function importedKeys(plan: Plan, kind: 'sources' | 'sinks', given: Readonly<Record<string, kms.IKey>>): Map<string, kms.IKey> {
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
export function onDemandSourceIds(plan: Plan, given: readonly string[]): Set<string> {
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

export function sourceOf(plan: Plan, stage: PlanStage): PlanSource | undefined {
  if (stage.input.kind !== 'source') return undefined;
  const id = stage.input.sourceId;
  return plan.sources.find((s) => s.id === id);
}

export function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

export function validatePrefix(prefix: string): void {
  if (!prefix || sanitizeName(prefix) !== prefix) {
    throw new Error(
      `prefix must be lower-case letters, digits and single dashes, not starting or ending with a dash (it starts every physical name), got "${prefix}"`,
    );
  }
}

export function validateNames(plan: Plan, names: ResourceNames): void {
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

export interface ResolvedStageSettings {
  readonly memorySize: number;
  readonly timeout: Duration;
  readonly batchSize: number;
  /** zero: no window (the mapping invokes as soon as a poll finds records) */
  readonly maxBatchingWindow: Duration;
  readonly reservedConcurrency?: number;
}

export function resolveStageSettings(plan: Plan, given: Readonly<Record<string, StageSettings>>): Map<string, ResolvedStageSettings> {
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
    const window = g.maxBatchingWindow ?? Duration.millis(defaultBatchingWindowMs(plan.checkpoint));
    const windowMs = window.toMilliseconds();
    if (windowMs % 1000 !== 0) {
      throw new Error(`${where}.maxBatchingWindow must be whole seconds (the event source mapping's unit), got ${windowMs} ms`);
    }
    if (windowMs > 300_000) {
      throw new Error(`${where}.maxBatchingWindow must be at most 5 minutes, got ${window.toHumanString()}`);
    }
    const windowLimit = maxBatchingWindowMs(plan.checkpoint);
    if (windowMs > windowLimit) {
      throw new Error(
        `${where}.maxBatchingWindow must be at most half of checkpoint.timeoutMs (${windowLimit} ms: a checkpoint's acks arrive about one window apart, and one with no ack for a whole timeoutMs is aborted), got ${window.toHumanString()}`,
      );
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
      maxBatchingWindow: window,
      ...(g.reservedConcurrency !== undefined ? { reservedConcurrency: g.reservedConcurrency } : {}),
    });
  }
  return out;
}
