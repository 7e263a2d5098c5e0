/** Sink factories. Each sink states the guarantee it gives; `describe` prints it. */
import type { PlanSink } from '../plan/plan.js';
import { UsageError } from '../util/errors.js';
import { isWellFormed } from '../util/well-formed.js';
import { checkStreamName } from './stream-names.js';
import type { SinkDefinition } from './graph.js';

/** Attributes of an upsert sink's rows that start so are the engine's (its version: epoch, seq, producer, generation). */
export const ENGINE_ATTRIBUTE_PREFIX = '_sluice_';

/**
 * Refuses a sink declaration AWS would refuse only at the first write (or at deploy): an upsert
 * sink's key attribute must be a name a table key can have (1–255 bytes of UTF-8, not the engine's
 * own), an existing table's name must be one DynamoDB allows (3–255 of a-z A-Z 0-9 _ - .), and an
 * existing stream's one Kinesis allows.
 */
export function checkSinkSpec(spec: PlanSink): void {
  const where = `sink "${spec.name}"`;
  if (typeof spec.name !== 'string' || spec.name.length === 0) throw new UsageError('sink', 'name', `must be a non-empty string, got ${JSON.stringify(spec.name)}`);
  if (spec.kind === 'kinesis' && spec.streamName !== undefined) checkStreamName(where, spec.streamName);
  if (spec.kind !== 'dynamodb-upsert') return;
  const k = spec.keyAttribute;
  if (k !== undefined) {
    if (typeof k !== 'string' || k.length === 0) throw new UsageError(where, 'keyAttribute', `must be a non-empty string, got ${JSON.stringify(k)}`);
    if (!isWellFormed(k)) throw new UsageError(where, 'keyAttribute', 'must not hold half of a surrogate pair: UTF-8 cannot carry it');
    const bytes = new TextEncoder().encode(k).length;
    if (bytes > 255) throw new UsageError(where, 'keyAttribute', `must be at most 255 bytes of UTF-8 (a DynamoDB key attribute name), got ${bytes}`);
    if (k.startsWith(ENGINE_ATTRIBUTE_PREFIX)) throw new UsageError(where, 'keyAttribute', `must not start with "${ENGINE_ATTRIBUTE_PREFIX}" (the engine's own attributes), got "${k}"`);
  }
  const t = spec.tableName;
  if (t !== undefined && !(typeof t === 'string' && /^[A-Za-z0-9_.-]{3,255}$/.test(t))) {
    throw new UsageError(where, 'tableName', `must be 3 to 255 characters of a-z, A-Z, 0-9, _, - and . (a DynamoDB table name), got ${JSON.stringify(t)}`);
  }
}

export interface DynamoUpsertSinkOptions<T> {
  /** logical name (also names the table the job creates) */
  readonly name: string;
  /** the row key of a value; rows are upserted by it */
  readonly key: (value: T) => string;
  /** attributes to store (default: the value's own fields) */
  readonly item?: (value: T) => Record<string, unknown>;
  /** partition key attribute of the table; @default 'pk' */
  readonly keyAttribute?: string;
  /** write to an existing table instead of one the job creates */
  readonly tableName?: string;
}

/**
 * Upserts each value into a DynamoDB table by key. Exactly-once in effect: a replay writes the same
 * values again, and each write is conditioned on the emitting instance's output version, so a row
 * never moves back in time. No commit latency.
 */
export function dynamoUpsertSink<T>(options: DynamoUpsertSinkOptions<T>): SinkDefinition<T> {
  if (typeof options.key !== 'function') throw new UsageError(`sink "${options.name}"`, 'key', 'must be a function of a value to its row key');
  const spec: PlanSink = {
    id: `sink-${options.name}`,
    kind: 'dynamodb-upsert',
    name: options.name,
    keyAttribute: options.keyAttribute ?? 'pk',
    guarantee: 'exactly-once in effect (idempotent, version-conditioned upserts; no commit latency)',
    latency: 'immediate (written as records are processed)',
    ...(options.tableName !== undefined ? { tableName: options.tableName } : {}),
  };
  checkSinkSpec(spec);
  return { spec, key: options.key, ...(options.item ? { item: options.item } : {}) };
}

/**
 * Collects values in the memory of the process that runs the job (tests and the local runner).
 * Values are staged per epoch and published when the checkpoint that covers them commits, so the
 * published list is exactly-once.
 */
export function collectSink<T>(name: string): SinkDefinition<T> {
  return {
    spec: {
      id: `sink-${name}`,
      kind: 'collect',
      name,
      guarantee: 'exactly-once (staged per epoch, published at checkpoint commit); in-process only, for tests',
      latency: 'about one checkpoint interval (published when the next checkpoint commits)',
    },
  };
}

export interface S3FileSinkOptions {
  /** logical name (names the staging area and, by default, the output prefix) */
  readonly name: string;
  /**
   * Key prefix of the published objects in the job's bucket. It must start with `sinks/` (the job's
   * functions may write only there) and must not reach into `sinks/_staged/`.
   * @default `sinks/<name>`
   */
  readonly prefix?: string;
  /** object format: one JSON value per line; @default 'jsonl' */
  readonly format?: 'jsonl';
}

/**
 * Writes values as JSON-lines objects to the job's S3 bucket, exactly once.
 *
 * Each instance stages its outputs per epoch (objects under `sinks/_staged/<name>/`) before its
 * snapshot is made durable; when checkpoint n commits, the coordinator publishes every epoch below
 * n not yet published, as `<prefix>/epoch=<e>/<producer>-<first seq>.jsonl` (at most 10,000 values
 * per object). Names and contents are deterministic, so publishing is idempotent and resumable: a
 * coordinator that dies between COMPLETED and publishing is finished by the next commit, and an
 * object written twice is written with the same bytes. Latency: outputs appear about one checkpoint
 * interval after they are produced (at the commit of the checkpoint that follows them).
 */
export function s3FileSink<T>(options: S3FileSinkOptions): SinkDefinition<T> {
  return {
    spec: {
      id: `sink-${options.name}`,
      kind: 's3-file',
      name: options.name,
      prefix: trimSlashes(options.prefix ?? `sinks/${options.name}`),
      format: options.format ?? 'jsonl',
      guarantee: 'exactly-once (staged per epoch in S3, published at checkpoint commit under deterministic object names)',
      latency: 'about one checkpoint interval (published when the next checkpoint commits)',
    },
  };
}

export interface KinesisSinkOptions {
  /** logical name (also names the output stream the job creates) */
  readonly name: string;
  /** publish to an existing stream instead of one the job creates */
  readonly streamName?: string;
}

/**
 * Publishes values to a Kinesis stream at checkpoint commit. Each record is the JSON object
 * `{"id": "<sink>/<epoch>/<producer>/<seq>", "epoch": e, "value": v}`: the id is deterministic, so
 * a value published again carries the same id.
 *
 * Outputs are staged per epoch in S3 and published by the commit of the checkpoint that follows
 * them (latency: about one checkpoint interval). Publishing records its progress after every
 * PutRecords call, so a crash in the middle of publishing repeats at most the records of the call
 * in flight: effectively exactly-once for a consumer that drops a record whose `id` it has already
 * seen (a set of the ids of the last few epochs is enough: a repeat is never more than one epoch
 * old). Records are spread over the shards by id; there is no per-key order.
 */
export function kinesisSink<T>(options: KinesisSinkOptions): SinkDefinition<T> {
  const spec: PlanSink = {
    id: `sink-${options.name}`,
    kind: 'kinesis',
    name: options.name,
    ...(options.streamName !== undefined ? { streamName: options.streamName } : {}),
    guarantee:
      'exactly-once with consumer-side dedupe by record id (staged per epoch, published at checkpoint commit; a crash mid-publish may repeat one PutRecords call)',
    latency: 'about one checkpoint interval (published when the next checkpoint commits)',
  };
  checkSinkSpec(spec);
  return { spec };
}

function trimSlashes(s: string): string {
  return s.replace(/^\/+|\/+$/g, '');
}
