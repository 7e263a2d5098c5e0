/** Sink factories. Each sink states the guarantee it gives; `describe` prints it. */
import type { SinkDefinition } from './graph.js';

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
  return {
    spec: {
      id: `sink-${options.name}`,
      kind: 'dynamodb-upsert',
      name: options.name,
      keyAttribute: options.keyAttribute ?? 'pk',
      guarantee: 'exactly-once in effect (idempotent, version-conditioned upserts; no commit latency)',
      ...(options.tableName !== undefined ? { tableName: options.tableName } : {}),
    },
    key: options.key,
    ...(options.item ? { item: options.item } : {}),
  };
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
    },
  };
}
