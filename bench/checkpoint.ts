/**
 * What a checkpoint writes to DynamoDB, against the dirty state it must make durable.
 *
 * - dirty bytes: per dirty row, its key plus its state values (names and bytes): what must persist;
 * - floor: those bytes laid out in as few items as the design allows. Rows are addressed by
 *   (operator, key group) — a key group is the unit that moves between shards and that a new owner
 *   reads — so the fewest items are one per dirty (operator, key group):
 *   floor = Σ over dirty key groups of ceil(dirty bytes of the group / 1 KB);
 * - used: every write unit the checkpoint consumed — the state table's packed items (measured: the
 *   real `DynamoStateStore` on DynamoDB (dynalite), write units as DynamoDB reports them; or, without
 *   emulators, the same store code on the twin's table sized by `dynamo-size.ts`), the delta (a
 *   PutItem when inline; in S3 above 8 KB, counted at its price in write units: one PUT costs what
 *   8 write units cost), the lease pointer and the ack;
 * - a full snapshot (every key packed, every checkpoint) for comparison with the incremental one.
 *
 * An instance applies its rows to the state table every `materializeEvery`-th checkpoint only
 * (runtime/changelog.ts): every figure is the mean over the checkpoints of whole periods (the
 * checkpoints that write only their delta and the one that also applies the union), so the table's
 * writes are amortized honestly.
 */
import { performance } from 'node:perf_hooks';
import type { AwsClients } from '../shared/adapters/aws/clients.js';
import { DynamoStateStore } from '../shared/adapters/aws/dynamo-state-store.js';
import { MemoryStateTable, type MemoryStateStore } from '../shared/adapters/memory/memory-ports.js';
import type { Job } from '../shared/api/job.js';
import { planJob } from '../shared/plan/planner.js';
import { PackedStateStore } from '../shared/runtime/packed-state.js';
import type { RuntimePorts, StateRow, StateStore } from '../shared/runtime/ports.js';
import { decodeDelta, encodeDelta } from '../shared/codec/snapshot.js';
import { materializeEvery } from '../shared/runtime/changelog.js';
import { SpillingStateStore } from '../shared/runtime/spilling-state-store.js';
import { createStageRunner } from '../shared/runtime/stage-runner.js';
import { itemSize, KB, utf8Length, writeUnits } from './dynamo-size.js';
import { Meter, meterPorts } from './metering.js';
import { PRICES } from './prices.js';
import { loadRounds, type EncodedRound } from './stage1-input.js';

const INLINE_DELTA_LIMIT = 8 * 1024;
/** an S3 PUT costs as much as this many DynamoDB write request units */
export const S3_PUT_IN_WCU = PRICES.s3.put / PRICES.dynamodb.writeRequestUnit;

/** Every figure but `keys` and `full` is per checkpoint: the mean over `checkpoints` measured ones. */
export interface CheckpointFigures {
  readonly keys: number;
  /** checkpoints measured: whole periods of `materializeEvery` */
  readonly checkpoints: number;
  readonly materializeEvery: number;
  readonly dirtyRows: number;
  readonly dirtyBytes: number;
  readonly dirtyKeyGroups: number;
  readonly floor: number;
  /** where the state table was: DynamoDB (dynalite) or the in-memory twin */
  readonly store: 'dynalite' | 'twin';
  readonly used: {
    total: number;
    rows: number;
    delta: number;
    /** S3 PUTs of the checkpoint (the delta above 8 KB), in `delta` at S3_PUT_IN_WCU each */
    s3Puts: number;
    pointer: number;
    ack: number;
    requests: number;
    bytes: number;
    /** state table items written (puts) and conditional writes refused */
    items: number;
    conditionFailures: number;
  };
  readonly ratio: number;
  readonly deltaBytes: number;
  /** ms for the barrier's batch (snapshot: serialize, delta, rows), memory ports for control, the store above for state */
  readonly ms: number;
  readonly full: { writeUnits: number; rows: number; deltaBytes: number; items: number };
}

const rowBytes = (r: StateRow) => {
  let n = utf8Length(r.key);
  for (const [name, v] of Object.entries(r.values)) n += utf8Length(name) + v.length;
  return n;
};

/** Write units of writing `rows` once into an empty packed table. */
async function packedFull(rows: readonly StateRow[], n: number): Promise<{ units: number; items: number }> {
  const t = new MemoryStateTable();
  await new PackedStateStore(t).applyRows(n, 0, rows);
  let units = 0;
  let items = 0;
  for (const [pk, g] of t.groups) {
    for (const i of g.values()) {
      units += writeUnits(itemSize({ pk, ...i }));
      items++;
    }
  }
  return { units, items };
}

export interface DynamoTarget {
  readonly clients: AwsClients;
  /** an existing table with the state table's key schema (pk, sk) */
  readonly table: string;
}

/** Rounds a checkpoint measurement needs: `warmup` rounds, then `periods` whole materialization periods. */
export function checkpointRounds(job: Job, warmup: number, periods: number): number {
  return warmup + periods * materializeEvery(planJob(job).checkpoint);
}

/**
 * Runs the keyed count over the rounds and measures the checkpoints after round `from` and every
 * later one (whole materialization periods: `checkpointRounds`), with the state table on DynamoDB
 * when `dynamo` is given (the real store), else on the twin. Figures are means per checkpoint.
 */
export async function measureCheckpoint(job: Job, rounds: readonly EncodedRound[], from: number, dynamo?: DynamoTarget): Promise<CheckpointFigures> {
  const meter = new Meter();
  let deltas: Uint8Array[] = [];
  const blobs = new Map<string, Uint8Array>();
  const real = dynamo ? new DynamoStateStore(dynamo.clients, dynamo.table) : undefined;
  let twin: MemoryStateStore | undefined;
  const capture = (p: RuntimePorts): RuntimePorts => {
    twin = p.state as MemoryStateStore;
    const inner: StateStore = real ? new SpillingStateStore(real, { put: async (k, b) => void blobs.set(k, b), get: async (k) => blobs.get(k)! }) : p.state;
    return {
      ...p,
      state: { getRows: (ids) => inner.getRows(ids), applyRows: (n, f, rows) => inner.applyRows(n, f, rows) },
      control: {
        ...p.control,
        readLease: (id) => p.control.readLease(id),
        takeOver: (id, f) => p.control.takeOver(id, f),
        readDelta: (r) => p.control.readDelta(r),
        publishSnapshot: (id, f, ptr) => p.control.publishSnapshot(id, f, ptr),
        commitPosition: (id, f, pos) => p.control.commitPosition(id, f, pos),
        ack: (n, id) => p.control.ack(n, id),
        writeDelta: async (id, n, d) => {
          deltas.push(d);
          return p.control.writeDelta(id, n, d);
        },
      },
    };
  };
  const input = loadRounds(job, rounds, (p) => {
    const c = capture(p);
    return meterPorts(c, meter, real ? undefined : twin!.table);
  });
  const runner = createStageRunner(input);
  const twinTable = twin!.table;
  const sum = { delta: 0, pointer: 0, ack: 0, s3Puts: 0, otherUnits: 0, otherRequests: 0, otherBytes: 0, ms: 0, rows: 0, items: 0, conditionFailures: 0, rowRequests: 0, rowBytes: 0, s3Bytes: 0, dirtyRows: 0, dirtyBytes: 0, dirtyKeyGroups: 0, floor: 0, deltaBytes: 0 };
  const deltaRows: StateRow[] = [];
  let measured = 0;
  for (let r = 0; r < input.rounds.length; r++) {
    const round = input.rounds[r]!;
    for (const b of round.batches) await runner.run(input.shardId, b);
    meter.reset();
    const usage0 = real ? { ...real.usage } : undefined;
    const twin0 = { puts: twinTable.puts, failures: twinTable.conditionFailures };
    deltas = [];
    const t0 = performance.now();
    await runner.run(input.shardId, round.barrier);
    const ms = performance.now() - t0;
    if (r < from) continue;
    measured++;
    sum.ms += ms;
    // what the barrier's batch wrote besides the state table (metered), and the state table on the twin
    const unitsOf = (k: string) => meter.get(`dynamodb.write.${k}`).units;
    const other = meter.sum('dynamodb.write');
    const st = meter.get('dynamodb.write.state');
    const puts = meter.sum('s3.put').requests;
    sum.delta += unitsOf('delta') + puts * S3_PUT_IN_WCU;
    sum.pointer += unitsOf('pointer');
    sum.ack += unitsOf('ack');
    sum.s3Puts += puts;
    sum.otherUnits += other.units - st.units;
    sum.otherRequests += other.requests - st.requests;
    sum.otherBytes += other.bytes - st.bytes;
    // the checkpoint's dirty rows are its delta's
    const dirty = deltas.flatMap((d) => decodeDelta(d).rows);
    deltaRows.push(...dirty);
    const byGroup = new Map<string, number>();
    for (const row of dirty) {
      const g = `${row.operatorId}#${row.keyGroup}`;
      byGroup.set(g, (byGroup.get(g) ?? 0) + rowBytes(row));
    }
    for (const b of byGroup.values()) sum.floor += Math.max(1, Math.ceil(b / KB));
    sum.dirtyRows += dirty.length;
    sum.dirtyBytes += dirty.reduce((a, row) => a + rowBytes(row), 0);
    sum.dirtyKeyGroups += byGroup.size;
    sum.deltaBytes += deltas.reduce((a, d) => a + d.length, 0);
    for (const d of deltas) if (d.length > INLINE_DELTA_LIMIT) sum.s3Bytes += d.length;
    if (real) {
      const now = real.usage;
      sum.rows += now.writeUnits - usage0!.writeUnits;
      sum.items += now.puts - usage0!.puts;
      sum.conditionFailures += now.conditionFailures - usage0!.conditionFailures;
      sum.rowRequests += now.puts - usage0!.puts + (now.deletes - usage0!.deletes);
      sum.rowBytes += now.bytesWritten - usage0!.bytesWritten;
    } else {
      sum.rows += st.units;
      sum.rowRequests += st.requests;
      sum.rowBytes += st.bytes;
      sum.items += twinTable.puts - twin0.puts;
      sum.conditionFailures += twinTable.conditionFailures - twin0.failures;
    }
  }
  if (!measured) throw new Error(`no checkpoint to measure: ${input.rounds.length} rounds, measuring from round ${from}`);
  const per = (x: number) => x / measured;
  const used = {
    total: per(sum.rows + sum.otherUnits + sum.s3Puts * S3_PUT_IN_WCU),
    rows: per(sum.rows),
    delta: per(sum.delta),
    s3Puts: per(sum.s3Puts),
    pointer: per(sum.pointer),
    ack: per(sum.ack),
    requests: per(sum.rowRequests + sum.otherRequests + sum.s3Puts),
    bytes: per(sum.rowBytes + sum.otherBytes + sum.s3Bytes),
    items: per(sum.items),
    conditionFailures: per(sum.conditionFailures),
  };
  const n = input.rounds.length;
  // every row as the table holds it after the last checkpoint (a whole period's end: applied)
  let all: StateRow[];
  if (real) {
    all = [];
    const ops = [...new Set(deltaRows.map((r) => r.operatorId))];
    for (const op of ops) for (let g = 0; g < input.plan.maxParallelism; g++) all.push(...(await real.readGroup(op, g)));
  } else all = twin!.rows().map((x) => x.row);
  const full = await packedFull(all, n);
  const fullDelta = encodeDelta(all).length;
  const fullDeltaUnits = fullDelta <= INLINE_DELTA_LIMIT ? writeUnits(fullDelta + 60) : S3_PUT_IN_WCU;
  return {
    keys: all.length,
    checkpoints: measured,
    materializeEvery: materializeEvery(input.plan.checkpoint),
    dirtyRows: per(sum.dirtyRows),
    dirtyBytes: per(sum.dirtyBytes),
    dirtyKeyGroups: per(sum.dirtyKeyGroups),
    floor: per(sum.floor),
    store: real ? 'dynalite' : 'twin',
    used,
    ratio: used.total / per(sum.floor),
    deltaBytes: per(sum.deltaBytes),
    ms: per(sum.ms),
    full: { writeUnits: full.units + fullDeltaUnits + used.pointer + used.ack, rows: all.length, deltaBytes: fullDelta, items: full.items },
  };
}
