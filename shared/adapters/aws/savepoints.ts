/**
 * Savepoints: a checkpoint's state in a portable, versioned format that a job with another
 * parallelism can restore from (DESIGN §4).
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
 * applied its rows before acking, and checkpoint n+1 cannot start before n commits) and the timers
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
import { decodePayload, encodePayload } from '../../codec/payload.js';
import type { Plan, PlanStage } from '../../plan/plan.js';
import type { ResourceNames } from '../../plan/resources.js';
import { redistributeOperatorLists, type OperatorListRow } from '../../runtime/operator-state.js';
import { makeDestination } from '../../runtime/outbox.js';
import type { ReplayPoint, SnapshotPointer, StateRow } from '../../runtime/ports.js';
import { decodeDelta, encodeDelta } from '../../codec/snapshot.js';
import { instanceIdOf } from '../../runtime/stage-instance.js';
import { SluiceError } from '../../util/errors.js';
import type { AwsClients } from './clients.js';
import { backoffMs, sleep, withThrottleRetry } from './clients.js';
import { controlKey, keptByRestore } from './dynamo-checkpoint-store.js';
import { DynamoControlStore } from './dynamo-control-store.js';
import { DynamoStateStore, rowPk } from './dynamo-state-store.js';
import { listAllShards } from './kinesis.js';
import { S3BlobStore } from './s3-blob-store.js';
import { skipStagedEpochsBelow } from './staged-sinks.js';
import { SpillingStateStore } from '../../runtime/spilling-state-store.js';

export const SAVEPOINT_FORMAT = 'sluice-savepoint';
export const SAVEPOINT_VERSION = 1;

type Extras = NonNullable<ReturnType<typeof decodeDelta>['extras']>;
type BroadcastRows = NonNullable<Extras['broadcast']>;
type SourceClock = NonNullable<Extras['source']>;

export interface SavepointManifest {
  readonly format: typeof SAVEPOINT_FORMAT;
  readonly version: typeof SAVEPOINT_VERSION;
  readonly id: string;
  readonly job: string;
  readonly planHash: string;
  readonly checkpointId: number;
  readonly createdAt: string;
  readonly maxParallelism: number;
  readonly operators: ReadonlyArray<{ readonly id: string; readonly stage: string; readonly states: readonly string[]; readonly keyGroups: readonly number[] }>;
  readonly sources: ReadonlyArray<{
    readonly sourceId: string;
    readonly stage: string;
    readonly shardId: string;
    readonly replayPoint: ReplayPoint;
    readonly watermark: number | null;
    readonly clock: SourceClock | null;
  }>;
  readonly stages: ReadonlyArray<{
    readonly id: string;
    readonly parallelism: number;
    readonly watermark: number | null;
    readonly processingTime: number;
    /** operator list state per old instance (in shard order), redistributed by its mode on restore */
    readonly operatorLists?: OperatorListRow[][];
    /** broadcast state (identical in every instance) */
    readonly broadcast?: BroadcastRows;
  }>;
  readonly rows: number;
  readonly timers: number;
  readonly bytes: number;
}

export interface KeyGroupFile {
  readonly format: 'sluice-savepoint-keygroup';
  readonly version: typeof SAVEPOINT_VERSION;
  readonly operatorId: string;
  readonly keyGroup: number;
  readonly rows: Array<[string, Record<string, Uint8Array>]>;
  readonly timers: Array<['event-time' | 'processing-time', string, number]>;
}

export interface SavepointContext {
  readonly plan: Plan;
  readonly names: ResourceNames;
  readonly clients: AwsClients;
  readonly bucket: string;
}

export const savepointPrefix = (id: string) => `savepoints/${id}/`;
export const manifestKey = (id: string) => `${savepointPrefix(id)}manifest.json`;
export const keyGroupKey = (id: string, operatorId: string, keyGroup: number) => `${savepointPrefix(id)}${operatorId}/${keyGroup}.bin`;

export { validSavepointId } from '../../coordinator/records.js';

/** Keyed operators of a plan (those holding state rows), with their stage. */
function keyedOperators(plan: Plan): Array<{ id: string; stage: PlanStage; states: string[] }> {
  return plan.stages.flatMap((stage) => stage.operators.filter((o) => o.keyed && o.state.length > 0).map((o) => ({ id: o.id, stage, states: o.state.map((s) => s.name) })));
}

async function runPool<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/**
 * Writes savepoint `id` from completed checkpoint n, given each instance's snapshot pointer of n.
 * Idempotent: a retry rewrites the same files.
 */
export async function writeSavepoint(
  ctx: SavepointContext,
  id: string,
  checkpointId: number,
  pointers: ReadonlyMap<string, SnapshotPointer>,
  now: Date = new Date(),
): Promise<SavepointManifest> {
  const { plan, clients, bucket } = ctx;
  const control = new DynamoControlStore(clients, ctx.names.controlTable, bucket);
  // rows too large for an item live in S3 (state-blobs/): the savepoint holds their values, not the reference
  const spilling = new SpillingStateStore(new DynamoStateStore(clients, ctx.names.stateTable), new S3BlobStore(clients, bucket));
  // timers, watermarks and clocks from each instance's delta of n
  const timers = new Map<string, KeyGroupFile['timers']>();
  const stageInfo = new Map<string, { watermark: number | null; processingTime: number }>();
  const operatorLists = new Map<string, Array<[string, OperatorListRow[]]>>();
  const broadcast = new Map<string, BroadcastRows>();
  const sources: Array<SavepointManifest['sources'][number]> = [];
  for (const [instanceId, pointer] of pointers) {
    if (pointer.checkpointId !== checkpointId) {
      throw new SluiceError(`${instanceId} points at checkpoint ${pointer.checkpointId}, not ${checkpointId}: the savepoint cannot be taken`, 'SAVEPOINT_INCONSISTENT');
    }
    const { extras } = decodeDelta(await control.readDelta(pointer.delta));
    const stageId = instanceId.slice(0, instanceId.indexOf(':'));
    const shardId = instanceId.slice(instanceId.indexOf(':') + 1);
    const stage = plan.stages.find((s) => s.id === stageId);
    if (!stage) continue;
    const wm = extras?.watermark ?? null;
    const lists = operatorLists.get(stageId) ?? [];
    lists.push([shardId, extras?.operatorLists ?? []]);
    operatorLists.set(stageId, lists);
    if (!broadcast.has(stageId)) broadcast.set(stageId, extras?.broadcast ?? []);
    const info = stageInfo.get(stageId);
    stageInfo.set(stageId, {
      watermark: info === undefined ? wm : info.watermark === null || wm === null ? null : Math.min(info.watermark, wm),
      processingTime: Math.max(info?.processingTime ?? 0, extras?.processingTime ?? 0),
    });
    if (stage.input.kind === 'source') {
      sources.push({ sourceId: stage.input.sourceId, stage: stageId, shardId, replayPoint: pointer.replayPoint, watermark: wm, clock: extras?.source ?? null });
    }
    for (const [domain, operatorId, key, keyGroup, time] of extras?.timers ?? []) {
      const k = `${operatorId}#${keyGroup}`;
      let l = timers.get(k);
      if (!l) timers.set(k, (l = []));
      l.push([domain, key, time]);
    }
  }
  const operators: Array<SavepointManifest['operators'][number]> = [];
  let rowCount = 0;
  let timerCount = 0;
  let bytes = 0;
  for (const op of keyedOperators(plan)) {
    const keyGroups: number[] = [];
    const groups = Array.from({ length: plan.maxParallelism }, (_, g) => g);
    await runPool(groups, 16, async (g) => {
      const rows: KeyGroupFile['rows'] = [];
      // every row of the group as the state table holds it (packed items; spilled values read back from S3)
      for (const row of await spilling.readGroup(op.id, g)) {
        if ((row.checkpointId ?? 0) > checkpointId) {
          throw new SluiceError(`state of ${rowPk(op.id, g)} (key ${row.key}) was written by checkpoint ${String(row.checkpointId)}, after the savepoint's ${checkpointId}`, 'SAVEPOINT_INCONSISTENT');
        }
        if (Object.keys(row.values).length) rows.push([row.key, row.values]);
      }
      const t = timers.get(`${op.id}#${g}`) ?? [];
      if (!rows.length && !t.length) return;
      rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      const file: KeyGroupFile = { format: 'sluice-savepoint-keygroup', version: SAVEPOINT_VERSION, operatorId: op.id, keyGroup: g, rows, timers: t };
      const body = encodePayload(file);
      await withThrottleRetry(() => clients.s3.send(new PutObjectCommand({ Bucket: bucket, Key: keyGroupKey(id, op.id, g), Body: body })));
      keyGroups.push(g);
      rowCount += rows.length;
      timerCount += t.length;
      bytes += body.length;
    });
    operators.push({ id: op.id, stage: op.stage.id, states: op.states, keyGroups: keyGroups.sort((a, b) => a - b) });
  }
  sources.sort((a, b) => (a.stage + a.shardId < b.stage + b.shardId ? -1 : 1));
  const manifest: SavepointManifest = {
    format: SAVEPOINT_FORMAT,
    version: SAVEPOINT_VERSION,
    id,
    job: plan.job,
    planHash: plan.hash,
    checkpointId,
    createdAt: now.toISOString(),
    maxParallelism: plan.maxParallelism,
    operators,
    sources,
    stages: plan.stages.map((s) => ({
      id: s.id,
      parallelism: s.parallelism,
      watermark: stageInfo.get(s.id)?.watermark ?? null,
      processingTime: stageInfo.get(s.id)?.processingTime ?? 0,
      operatorLists: (operatorLists.get(s.id) ?? []).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, rows]) => rows),
      broadcast: broadcast.get(s.id) ?? [],
    })),
    rows: rowCount,
    timers: timerCount,
    bytes,
  };
  await withThrottleRetry(() =>
    clients.s3.send(new PutObjectCommand({ Bucket: bucket, Key: manifestKey(id), Body: JSON.stringify(manifest, null, 2), ContentType: 'application/json' })),
  );
  return manifest;
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
        timers: timersOfShard.get(shard.shardId) ?? [],
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
