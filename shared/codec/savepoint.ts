/**
 * The savepoint files (a manifest and one file per operator and key group, portable across plans
 * that keep operator ids and maxParallelism) and how they are written from a completed checkpoint.
 * Where they are read from and written to is the caller's (`SavepointIo`): S3 on AWS
 * (shared/adapters/aws/savepoints.ts, which also restores them).
 */
import type { Plan, PlanStage } from '../plan/plan.js';
import type { OperatorListRow } from '../runtime/operator-state.js';
import { groupPk } from '../runtime/packed-state.js';
import type { DeltaRef, ReplayPoint, SnapshotPointer, StateRow } from '../runtime/ports.js';
import { SluiceError } from '../util/errors.js';
import { encodePayload } from './payload.js';
import { decodeDelta } from './snapshot.js';

/** What writing savepoint files reads and writes. */
export interface SavepointIo {
  readDelta(ref: DeltaRef): Promise<Uint8Array>;
  /** every row of a key group, spilled values read back */
  readGroup(operatorId: string, keyGroup: number): Promise<StateRow[]>;
  put(key: string, body: Uint8Array | string, contentType?: string): Promise<void>;
}

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


export const savepointPrefix = (id: string) => `savepoints/${id}/`;
export const manifestKey = (id: string) => `${savepointPrefix(id)}manifest.json`;
export const keyGroupKey = (id: string, operatorId: string, keyGroup: number) => `${savepointPrefix(id)}${operatorId}/${keyGroup}.bin`;

/** Keyed operators of a plan (those holding state rows), with their stage. */
export function keyedOperators(plan: Plan): Array<{ id: string; stage: PlanStage; states: string[] }> {
  return plan.stages.flatMap((stage) => stage.operators.filter((o) => o.keyed && o.state.length > 0).map((o) => ({ id: o.id, stage, states: o.state.map((s) => s.name) })));
}

export async function runPool<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
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
export async function writeSavepointFiles(
  plan: Plan,
  io: SavepointIo,
  id: string,
  checkpointId: number,
  pointers: ReadonlyMap<string, SnapshotPointer>,
  now: Date = new Date(),
): Promise<SavepointManifest> {
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
    const { extras } = decodeDelta(await io.readDelta(pointer.delta));
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
      for (const row of await io.readGroup(op.id, g)) {
        if ((row.checkpointId ?? 0) > checkpointId) {
          throw new SluiceError(`state of ${groupPk(op.id, g)} (key ${row.key}) was written by checkpoint ${String(row.checkpointId)}, after the savepoint's ${checkpointId}`, 'SAVEPOINT_INCONSISTENT');
        }
        if (Object.keys(row.values).length) rows.push([row.key, row.values]);
      }
      const t = timers.get(`${op.id}#${g}`) ?? [];
      if (!rows.length && !t.length) return;
      rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      const file: KeyGroupFile = { format: 'sluice-savepoint-keygroup', version: SAVEPOINT_VERSION, operatorId: op.id, keyGroup: g, rows, timers: t };
      const body = encodePayload(file);
      await io.put(keyGroupKey(id, op.id, g), body);
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
  await io.put(manifestKey(id), JSON.stringify(manifest, null, 2), 'application/json');
  return manifest;
}

