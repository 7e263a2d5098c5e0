/**
 * The plan: a job turned into plain, serialisable data. One planner (`planJob`) produces it; the CDK
 * construct, the local runner, the Lambda functions and the tests all read the same plan, so there is
 * never a second description of a job. User functions are not part of the plan: the runtime looks
 * them up by operator id in the job definition that is bundled beside it.
 */

/** How records of one stage reach the instances of the next. */
export type Partitioning =
  /** by key group of the record's key (keyBy) */
  | 'key'
  /** round robin over the downstream shards */
  | 'rebalance'
  /** every downstream shard gets every record */
  | 'broadcast';

export type RecordFormat = 'json' | 'text' | 'binary';

export type OperatorKind =
  | 'source'
  | 'map'
  | 'filter'
  | 'flatMap'
  | 'process'
  | 'reduce'
  | 'window'
  | 'coProcess'
  | 'broadcastProcess'
  | 'operatorProcess'
  | 'sideOutput'
  | 'union'
  | 'exchange'
  | 'sink';

export interface PlanStateDecl {
  /** state name, unique per operator */
  readonly name: string;
  readonly kind: 'value' | 'list' | 'map' | 'reducing' | 'aggregating' | 'operator-list';
  /** keyed: per key; operator: per instance (split on rescale); union: per instance (union on rescale); broadcast: one identical copy everywhere */
  readonly scope: 'keyed' | 'operator' | 'union' | 'broadcast';
}

export interface PlanOperator {
  /** stable id, unique in the job (`op3-process`) */
  readonly id: string;
  readonly kind: OperatorKind;
  /** user-facing name (defaults to the kind) */
  readonly name: string;
  /** ids of the operators of the same stage that feed this one; empty for the stage's entry */
  readonly inputs: readonly string[];
  /** true when the operator runs on a keyed stream */
  readonly keyed: boolean;
  readonly state: readonly PlanStateDecl[];
  /** set on `exchange` operators: the stage the records go to and how they are spread */
  readonly exchange?: {
    readonly toStage: string;
    readonly partitioning: Partitioning;
    /** which input of the consuming operator the records feed (connect, joins); 0 for one-input operators */
    readonly input: number;
  };
  /** set on `sink` operators */
  readonly sink?: PlanSink;
  /** set on `source` operators */
  readonly source?: PlanSource;
}

export interface PlanSource {
  readonly id: string;
  readonly kind: 'kinesis';
  /** logical name; the physical stream name comes from `resourceNames` unless `streamName` is given */
  readonly name: string;
  /** an existing stream to read instead of one the job creates */
  readonly streamName?: string;
  readonly shards: number;
  readonly format: RecordFormat;
  /** KPL-aggregated records are de-aggregated before decoding */
  readonly deaggregate: boolean;
}

/**
 * Kinds of sinks. `dynamodb-upsert` writes directly (idempotent); `collect`, `s3-file` and `kinesis`
 * are transactional: outputs are staged per epoch and published when the checkpoint that covers
 * them commits.
 */
export type SinkKind = 'dynamodb-upsert' | 'collect' | 's3-file' | 'kinesis';

/** Sink kinds whose outputs go through the staged path (outbox.collect → staged sink → commit target). */
export const STAGED_SINK_KINDS: readonly SinkKind[] = ['collect', 's3-file', 'kinesis'];

export interface PlanSink {
  readonly id: string;
  readonly kind: SinkKind;
  readonly name: string;
  /** the guarantee the sink gives, as shown by `describe` */
  readonly guarantee: string;
  /** when outputs become visible, as shown by `describe` */
  readonly latency?: string;
  /** for s3-file: key prefix of the published objects in the job's bucket (starts with `sinks/`) */
  readonly prefix?: string;
  /** for s3-file: the object format */
  readonly format?: 'jsonl';
  /** for kinesis: an existing stream to publish to instead of one the job creates */
  readonly streamName?: string;
  /** for dynamodb-upsert: the table's partition key attribute */
  readonly keyAttribute?: string;
  /** for dynamodb-upsert: an existing table to write instead of one the job creates */
  readonly tableName?: string;
}

export interface PlanStage {
  /** `s0`, `s1`, ... in topological order */
  readonly id: string;
  /** readable name made of the chained operators' names */
  readonly name: string;
  /** number of parallel instances = shards of the stage's input stream */
  readonly parallelism: number;
  /** what feeds the stage: a source stream, or the exchange of one or more upstream stages */
  readonly input:
    | { readonly kind: 'source'; readonly sourceId: string }
    | { readonly kind: 'exchange'; readonly fromStages: readonly string[]; readonly keyed: boolean };
  /** the chain, in topological order */
  readonly operators: readonly PlanOperator[];
  /** true when an operator of the stage holds state (it then flushes at checkpoints) */
  readonly stateful: boolean;
}

/** the most checkpoints an instance's rows may stay unapplied: its pointer names each one's delta (runtime/changelog.ts) */
export const MAX_MATERIALIZE_EVERY = 16;

export interface CheckpointSettings {
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly minPauseMs: number;
  /** completed checkpoints kept for restores */
  readonly retained: number;
  /** the coordinator workflow continues as a new execution after this many checkpoints */
  readonly continueAsNewAfter: number;
  /** checkpoints in flight at once; absent = 1 */
  readonly maxConcurrent?: number;
  /** a source shard's credit window (runtime/source-window.ts); absent = its default */
  readonly maxInFlightRecords?: number;
  /** an instance applies its snapshots' rows to the state table every this many checkpoints (runtime/changelog.ts); absent = about every two minutes */
  readonly materializeEvery?: number;
}

export interface Plan {
  readonly formatVersion: 1;
  readonly job: string;
  /** sha-256 of the plan's canonical JSON without this field */
  readonly hash: string;
  /** key groups; fixed for the life of the job's state */
  readonly maxParallelism: number;
  readonly mode: 'exactly-once' | 'at-least-once';
  readonly poisonPolicy: 'fail' | 'dead-letter';
  readonly checkpoint: CheckpointSettings;
  readonly sources: readonly PlanSource[];
  readonly sinks: readonly PlanSink[];
  readonly stages: readonly PlanStage[];
}
