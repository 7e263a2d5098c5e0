/**
 * Savepoints: a checkpoint's state in a portable, versioned format that a job with another
 * parallelism can restore from.
 *
 * Layout in the job's bucket:
 *
 * ```
 * savepoints/<id>/manifest.json              what the savepoint holds (written last: no manifest, no savepoint)
 * savepoints/<id>/<operator>/<keyGroup>.bin  the state rows and timers of one key group of one operator
 * ```
 *
 * A key-group file is MessagePack: `{ format: 'sluice-savepoint-keygroup', version: 1, operatorId,
 * keyGroup, rows: [[key, {state name → bytes}]], timers: [[domain, key, time]] }`. State values are
 * the serializer's bytes, as in the state table. The manifest (JSON) lists the operators and their
 * non-empty key groups, the position of each source shard (the replay point just after the
 * savepoint's barrier) with its clock, and per stage the lowest watermark and the processing time.
 *
 * Writing: once the savepoint's checkpoint n has COMPLETED, the coordinator reads every keyed
 * operator's rows key group by key group (rows then hold exactly checkpoint n: every instance
 * applied its rows before acking — a savepoint's barrier makes it apply every row it had kept
 * pending, runtime/changelog.ts — and checkpoint n+1 cannot start before n commits) and the timers
 * from each instance's delta of n (timers are whole in every delta).
 *
 * Restoring: the job's state table and control records are reset; the rows of each key group are
 * loaded; every instance of the new plan gets a snapshot pointer at a fresh epoch E (above every
 * checkpoint the old job allocated) holding the timers of the key groups its shard now owns, and
 * each source shard starts just after the savepoint's barrier. Epoch E does two things: records
 * that the stopped job left in the inner streams belong to epochs below E and are dropped by the
 * instances' epoch check, and transactional sinks skip every epoch below E (the stopped job's
 * unpublished outputs after the savepoint are produced again by the restored job).
 */
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { BatchWriteCommand, GetCommand, PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { decodePayload } from '../../codec/payload.js';
import { keyedOperators, keyGroupKey, manifestKey, runPool, SAVEPOINT_FORMAT, SAVEPOINT_VERSION, savepointPrefix, writeSavepointFiles, type KeyGroupFile, type SavepointManifest } from '../../codec/savepoint.js';
import type { Plan } from '../../plan/plan.js';
import type { ResourceNames } from '../../plan/resources.js';
import { redistributeOperatorLists } from '../../runtime/operator-state.js';
import { makeDestination } from '../../runtime/outbox.js';
import type { ReplayPoint, SnapshotPointer, StateRow } from '../../runtime/ports.js';
import { decodeDelta, encodeDelta } from '../../codec/snapshot.js';
import { instanceIdOf } from '../../runtime/stage-instance.js';
import { SluiceError } from '../../util/errors.js';
import type { AwsClients } from './clients.js';
import { backoffMs, sleep, withThrottleRetry } from './clients.js';
import { controlKey, keptByRestore } from './dynamo-checkpoint-store.js';
import { DynamoControlStore } from './dynamo-control-store.js';
import { DynamoStateStore } from './dynamo-state-store.js';
import { listAllShards } from './kinesis.js';
import { S3BlobStore } from './s3-blob-store.js';
import { skipStagedEpochsBelow } from './staged-sinks.js';
import { SpillingStateStore } from '../../runtime/spilling-state-store.js';
import { TimerIndex } from '../../runtime/timers.js';

type Extras = NonNullable<ReturnType<typeof decodeDelta>['extras']>;
type SourceClock = NonNullable<Extras['source']>;

export interface SavepointContext {
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly clients: AwsClients;
  readonly bucket: string;
}

export { validSavepointId } from '../../coordinator/records.js';
export { keyGroupKey, manifestKey, SAVEPOINT_FORMAT, SAVEPOINT_VERSION, savepointPrefix, type KeyGroupFile, type SavepointManifest } from '../../codec/savepoint.js';

/**
 * Writes savepoint `id` from completed checkpoint n to the job's bucket, given each instance's
 * snapshot pointer of n. Idempotent: a retry rewrites the same files.
 */
export async function writeSavepoint(
  ctx: SavepointContext,
  id: string,
  checkpointId: number,
  pointers: ReadonlyMap<string, SnapshotPointer>,
  now: Date = new Date(),
): Promise<SavepointManifest> {
  const { clients, bucket } = ctx;
  const control = new DynamoControlStore(clients, ctx.names.controlTable, bucket);
  // rows too large for an item live in S3 (state-blobs/): the savepoint holds their values, not the reference
  const spilling = new SpillingStateStore(new DynamoStateStore(clients, ctx.names.stateTable), new S3BlobStore(clients, bucket));
  return writeSavepointFiles(ctx.plan, {
    readDelta: (ref) => control.readDelta(ref),
    readGroup: (operatorId, keyGroup) => spilling.readGroup(operatorId, keyGroup),
    put: async (key, body, contentType) => {
      await withThrottleRetry(() => clients.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ...(contentType ? { ContentType: contentType } : {}) })));
    },
  }, id, checkpointId, pointers, now);
}

export async function readManifest(ctx: Pick<SavepointContext, 'clients' | 'bucket'>, id: string): Promise<SavepointManifest> {
  let text: string;
  try {
    const r = await withThrottleRetry(() => ctx.clients.s3.send(new GetObjectCommand({ Bucket: ctx.bucket, Key: manifestKey(id) })));
    text = await r.Body!.transformToString();
  } catch (err) {
    const name = (err as { name?: string }).name;
    if (name === 'NoSuchKey' || name === 'NotFound') throw new SluiceError(`savepoint "${id}" has no manifest in s3://${ctx.bucket}/${savepointPrefix(id)}: it does not exist or is incomplete`, 'NO_SAVEPOINT');
    throw err;
  }
  const m = JSON.parse(text) as SavepointManifest;
  if (m.format !== SAVEPOINT_FORMAT || m.version !== SAVEPOINT_VERSION) {
    throw new SluiceError(`savepoint "${id}" has format ${String(m.format)} v${String(m.version)}; this build reads ${SAVEPOINT_FORMAT} v${SAVEPOINT_VERSION}`, 'SAVEPOINT_FORMAT');
  }
  return m;
}

export async function readKeyGroup(ctx: Pick<SavepointContext, 'clients' | 'bucket'>, id: string, operatorId: string, keyGroup: number): Promise<KeyGroupFile> {
  const r = await withThrottleRetry(() => ctx.clients.s3.send(new GetObjectCommand({ Bucket: ctx.bucket, Key: keyGroupKey(id, operatorId, keyGroup) })));
  const f = decodePayload<KeyGroupFile>(await r.Body!.transformToByteArray());
  if (f.format !== 'sluice-savepoint-keygroup' || f.version !== SAVEPOINT_VERSION) throw new SluiceError(`savepoint "${id}": ${operatorId}/${keyGroup}.bin is not a key-group file`, 'SAVEPOINT_FORMAT');
  return f;
}

/** Why a plan cannot restore a savepoint, or undefined when it can. */
export function restoreIncompatibility(plan: Plan, m: SavepointManifest): string | undefined {
  if (m.job !== plan.job) return `the savepoint belongs to job "${m.job}", not "${plan.job}"`;
  if (m.maxParallelism !== plan.maxParallelism) return `the savepoint has ${m.maxParallelism} key groups, the job ${plan.maxParallelism} (maxParallelism is fixed for the life of a job's state)`;
  const ops = new Map(keyedOperators(plan).map((o) => [o.id, o]));
  for (const op of m.operators) {
    const now = ops.get(op.id);
    if (!now) return `the savepoint holds state of operator ${op.id}, which the job no longer has`;
    const missing = op.states.filter((s) => !now.states.includes(s));
    if (missing.length) return `operator ${op.id} no longer declares state ${missing.join(', ')}`;
  }
  for (const s of plan.stages) {
    if (s.input.kind !== 'source') continue;
    const saved = m.stages.find((x) => x.id === s.id);
    if (saved && saved.parallelism !== s.parallelism) return `source stage ${s.id} had ${saved.parallelism} shards and now has ${s.parallelism}: a source stream's shards cannot change across a restore`;
  }
  return undefined;
}

async function clearTable(clients: AwsClients, table: string, keep: (item: Record<string, unknown>) => boolean = () => false): Promise<number> {
  let deleted = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const r = await withThrottleRetry(() =>
      clients.doc.send(new ScanCommand({ TableName: table, ProjectionExpression: 'pk, sk', ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) })),
    );
    const keys = (r.Items ?? []).filter((i) => !keep(i)).map((i) => ({ pk: i.pk, sk: i.sk }));
    for (let i = 0; i < keys.length; i += 25) {
      let requests = keys.slice(i, i + 25).map((Key) => ({ DeleteRequest: { Key } }));
      for (let attempt = 0; requests.length; attempt++) {
        const w = await withThrottleRetry(() => clients.doc.send(new BatchWriteCommand({ RequestItems: { [table]: requests } })));
        requests = (w.UnprocessedItems?.[table] as typeof requests | undefined) ?? [];
        if (requests.length) await sleep(backoffMs(attempt));
      }
      deleted += Math.min(25, keys.length - i);
    }
    start = r.LastEvaluatedKey;
  } while (start);
  return deleted;
}

export async function deletePrefix(clients: AwsClients, bucket: string, prefix: string): Promise<number> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const r = await withThrottleRetry(() => clients.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) })));
    for (const o of r.Contents ?? []) keys.push(o.Key!);
    token = r.IsTruncated ? r.NextContinuationToken : undefined;
  } while (token);
  await runPool(keys, 16, async (Key) => {
    await withThrottleRetry(() => clients.s3.send(new DeleteObjectCommand({ Bucket: bucket, Key })));
  });
  return keys.length;
}

export interface RestoreResult {
  readonly savepoint: SavepointManifest;
  /** the epoch the restored job starts in (its first checkpoint is epoch + 1) */
  readonly epoch: number;
  readonly rows: number;
  readonly timers: number;
  readonly instances: number;
}

/**
 * Restores savepoint `id` into the job described by `ctx.plan` (its streams, tables and bucket
 * must exist; inner stage streams with the plan's shard counts). Run it while the job is stopped:
 * no stage function and no coordinator execution may run until it returns.
 */
export async function restoreSavepoint(ctx: SavepointContext, id: string, onProgress?: (done: number, total: number) => void): Promise<RestoreResult> {
  const { plan, names, clients, bucket } = ctx;
  const m = await readManifest(ctx, id);
  const why = restoreIncompatibility(plan, m);
  if (why) throw new SluiceError(`cannot restore savepoint "${id}" into job "${plan.job}": ${why}`, 'SAVEPOINT_INCOMPATIBLE');

  // a fresh epoch above every checkpoint the old job allocated
  const state = await withThrottleRetry(() =>
    clients.doc.send(new GetCommand({ TableName: names.controlTable, Key: controlKey.state, ConsistentRead: true })),
  );
  const epoch = Math.max((state.Item?.last as number | undefined) ?? 0, m.checkpointId) + 1;

  // reset the job's state and control records (savepoint records and sink marks stay)
  await clearTable(clients, names.stateTable);
  await clearTable(clients, names.controlTable, (i) => keptByRestore(i.pk));
  await deletePrefix(clients, bucket, 'deltas/');

  // state rows, key group by key group
  // large rows spill to S3 again, as the stage functions write them
  const stateStore = new SpillingStateStore(new DynamoStateStore(clients, names.stateTable), new S3BlobStore(clients, bucket));
  const files = m.operators.flatMap((op) => op.keyGroups.map((g) => ({ op: op.id, g })));
  const timersByOp = new Map<string, Array<[string, number, 'event-time' | 'processing-time', number]>>();
  let rows = 0;
  let timers = 0;
  let done = 0;
  await runPool(files, 8, async ({ op, g }) => {
    const f = await readKeyGroup(ctx, id, op, g);
    const stateRows: StateRow[] = f.rows.map(([key, values]) => ({ operatorId: op, keyGroup: g, key, values }));
    await stateStore.applyRows(epoch, 0, stateRows);
    let l = timersByOp.get(op);
    if (!l) timersByOp.set(op, (l = []));
    for (const [domain, key, time] of f.timers) l.push([key, g, domain, time]);
    rows += stateRows.length;
    timers += f.timers.length;
    onProgress?.(++done, files.length);
  });

  // a snapshot pointer at `epoch` for every instance of the new plan
  const control = new DynamoControlStore(clients, names.controlTable, bucket);
  const topology: number[] = [];
  let instances = 0;
  const now = new Date().toISOString();
  for (const stage of plan.stages) {
    const stream = names.streamOf(stage);
    const all = await listAllShards(clients, stream);
    const open = all.filter((s) => s.endingSequenceNumber === undefined);
    topology.push(open.length);
    const dest = makeDestination(stream, open, plan.maxParallelism);
    const saved = m.stages.find((s) => s.id === stage.id);
    const timersOfShard = new Map<string, Extras['timers']>();
    for (const op of stage.operators) {
      for (const [key, g, domain, time] of timersByOp.get(op.id) ?? []) {
        const shardId = dest.shards[dest.shardOfKeyGroup[g]!]!.shardId;
        let l = timersOfShard.get(shardId);
        if (!l) timersOfShard.set(shardId, (l = []));
        l.push([domain, op.id, key, g, time]);
      }
    }
    // operator list state dealt to the new instances by its mode; broadcast state copied to each
    const lists = redistributeOperatorLists(saved?.operatorLists ?? [], Math.max(1, open.length));
    const listsOf = new Map(dest.shards.map((sh, i) => [sh.shardId, lists[i] ?? []]));
    for (const shard of all) {
      const instanceId = instanceIdOf(stage.id, shard.shardId);
      let replayPoint: ReplayPoint = { from: 'start' };
      let source: SourceClock | null = null;
      let watermark = saved?.watermark ?? null;
      if (stage.input.kind === 'source') {
        const s = m.sources.find((x) => x.stage === stage.id && x.shardId === shard.shardId);
        if (!s) throw new SluiceError(`savepoint "${id}" has no position for source shard ${shard.shardId} of stage ${stage.id}`, 'SAVEPOINT_INCOMPATIBLE');
        replayPoint = s.replayPoint;
        // the source announces its watermark again at the first barrier after the restore
        source = s.clock ? { ...s.clock, emitted: Number.NEGATIVE_INFINITY } : null;
        watermark = s.watermark;
      }
      const extras: Extras = {
        // in an order that does not depend on which key group's file was read first: it is the instance's firing order
        timers: TimerIndex.inKeyOrder(timersOfShard.get(shard.shardId) ?? []),
        channels: [],
        watermark,
        processingTime: saved?.processingTime ?? 0,
        source,
        operatorLists: listsOf.get(shard.shardId) ?? [],
        broadcast: saved?.broadcast ?? [],
      };
      const ref = await control.writeDelta(instanceId, epoch, encodeDelta([], extras));
      const pointer: SnapshotPointer = { checkpointId: epoch, replayPoint, delta: ref, meta: { restoredFrom: id, watermark, timers: extras.timers.length } };
      await withThrottleRetry(() =>
        clients.doc.send(
          new PutCommand({
            TableName: names.controlTable,
            Item: { ...controlKey.lease(instanceId), fence: 1, snapshot: JSON.stringify(pointer), snapshotAt: now, restoredFrom: id },
          }),
        ),
      );
      instances++;
    }
  }

  // the coordinator goes on from `epoch`; transactional sinks skip the epochs below it
  await skipStagedEpochsBelow(plan, names, clients, epoch);
  await withThrottleRetry(() =>
    clients.doc.send(
      new PutCommand({
        TableName: names.controlTable,
        Item: {
          ...controlKey.checkpoint(epoch),
          status: 'COMPLETED',
          savepoint: false,
          restoredFrom: id,
          expected: instances,
          topology,
          startedAt: now,
          endedAt: now,
          durationMs: 0,
        },
      }),
    ),
  );
  await withThrottleRetry(() => clients.doc.send(new PutCommand({ TableName: names.controlTable, Item: { ...controlKey.state, last: epoch, restoredFrom: id } })));
  return { savepoint: m, epoch, rows, timers, instances };
}
