/**
 * What a checkpoint writes to DynamoDB, against the dirty state it must make durable.
 *
 * - dirty bytes: per dirty row, its key plus its state values (names and bytes): what must persist;
 * - floor: those bytes laid out in as few items as the design allows. Rows are addressed by
 *   (operator, key group) — a key group is the unit that moves between shards and that a new owner
 *   reads — so the fewest items are one per dirty (operator, key group):
 *   floor = Σ over dirty key groups of ceil(dirty bytes of the group / 1 KB);
 * - used: every write unit the checkpoint consumed — state rows (one conditional UpdateItem per
 *   dirty key), the delta item (the atomic-flush record), the lease pointer and the ack;
 * - the alternative layout "many small keys of one key group in one item", simulated on the same
 *   state: items of (operator, key group, bucket) holding *all* their keys (an UpdateItem is billed
 *   on the whole item, dirty or not), for a few bucket sizes;
 * - a full snapshot (every key, every checkpoint) for comparison with the incremental one.
 */
import { performance } from 'node:perf_hooks';
import type { Job } from '../shared/api/job.js';
import { murmur3 } from '../shared/plan/key-groups.js';
import type { RuntimePorts, StateRow } from '../shared/runtime/ports.js';
import { encodeDelta } from '../shared/runtime/stage-instance.js';
import { StageRunner } from '../shared/runtime/stage-runner.js';
import { itemSize, KB, utf8Length, writeUnits } from './dynamo-size.js';
import { Meter, meterPorts, stateRowItem } from './metering.js';
import { loadRounds, type EncodedRound } from './stage1-input.js';

const INLINE_DELTA_LIMIT = 300 * 1024;
const utf8 = new TextEncoder();

export interface PackedLayout {
  /** target bytes per packed item (keys of a key group are hashed into ceil(group bytes / target) items) */
  readonly targetBytes: number;
  readonly items: number;
  readonly writeUnits: number;
}

export interface CheckpointFigures {
  readonly keys: number;
  readonly dirtyRows: number;
  readonly dirtyBytes: number;
  readonly dirtyKeyGroups: number;
  readonly floor: number;
  readonly used: { total: number; rows: number; delta: number; pointer: number; ack: number; requests: number; bytes: number; s3Puts: number };
  readonly ratio: number;
  readonly deltaBytes: number;
  /** ms for the barrier's batch in process (snapshot: serialize, delta, rows), memory ports */
  readonly ms: number;
  readonly packed: PackedLayout[];
  readonly bestPacked: PackedLayout;
  /** write units the whole checkpoint would use with the best packed layout instead of per-key rows */
  readonly packedTotal: number;
  readonly packedSavingPct: number;
  readonly full: { writeUnits: number; rows: number; deltaBytes: number; bytes: number };
}

const rowBytes = (r: StateRow) => {
  let n = utf8Length(r.key);
  for (const [name, v] of Object.entries(r.values)) n += utf8Length(name) + v.length;
  return n;
};

function packedUnits(all: readonly StateRow[], dirty: readonly StateRow[], targetBytes: number, n: number): PackedLayout {
  // group every row by (operator, key group), then hash keys into buckets of about targetBytes
  const groups = new Map<string, StateRow[]>();
  for (const r of all) {
    const g = `${r.operatorId}#${r.keyGroup}`;
    let l = groups.get(g);
    if (!l) groups.set(g, (l = []));
    l.push(r);
  }
  const bucketsOf = new Map<string, number>();
  for (const [g, rows] of groups) bucketsOf.set(g, Math.max(1, Math.ceil(rows.reduce((a, r) => a + rowBytes(r) + 4, 0) / targetBytes)));
  const bucketOf = (r: StateRow) => murmur3(utf8.encode(r.key), 17) % bucketsOf.get(`${r.operatorId}#${r.keyGroup}`)!;
  const touched = new Set<string>();
  for (const r of dirty) touched.add(`${r.operatorId}#${r.keyGroup}#${bucketOf(r)}`);
  // size of each touched item: all its keys
  const items = new Map<string, Record<string, Record<string, Uint8Array>>>();
  for (const r of all) {
    const id = `${r.operatorId}#${r.keyGroup}#${bucketOf(r)}`;
    if (!touched.has(id)) continue;
    let m = items.get(id);
    if (!m) items.set(id, (m = {}));
    m[r.key] = r.values;
  }
  let units = 0;
  for (const [id, v] of items) units += writeUnits(itemSize({ pk: id, sk: 'b', ckpt: n, v }));
  return { targetBytes, items: items.size, writeUnits: units };
}

/** Runs the keyed count over the rounds and measures the checkpoint after round `measureRound`. */
export async function measureCheckpoint(job: Job, rounds: readonly EncodedRound[], measureRound: number): Promise<CheckpointFigures> {
  const meter = new Meter();
  let lastRows: readonly StateRow[] = [];
  let lastDelta = 0;
  const capture = (p: RuntimePorts): RuntimePorts => ({
    ...p,
    state: {
      getRows: (ids) => p.state.getRows(ids),
      applyRows: async (n, f, rows) => {
        lastRows = rows;
        return p.state.applyRows(n, f, rows);
      },
    },
    control: {
      ...p.control,
      readLease: (id) => p.control.readLease(id),
      takeOver: (id, f) => p.control.takeOver(id, f),
      readDelta: (r) => p.control.readDelta(r),
      publishSnapshot: (id, f, ptr) => p.control.publishSnapshot(id, f, ptr),
      commitPosition: (id, f, pos) => p.control.commitPosition(id, f, pos),
      ack: (n, id) => p.control.ack(n, id),
      writeDelta: async (id, n, d) => {
        lastDelta = d.length;
        return p.control.writeDelta(id, n, d);
      },
    },
  });
  const input = loadRounds(job, rounds, (p) => meterPorts(capture(p), meter));
  const runner = new StageRunner(input.job, input.plan, input.stage, input.names, input.ports);
  let ms = 0;
  for (let r = 0; r <= measureRound; r++) {
    const round = input.rounds[r]!;
    for (const b of round.batches) await runner.run(input.shardId, b);
    meter.reset();
    const t0 = performance.now();
    await runner.run(input.shardId, round.barrier);
    ms = performance.now() - t0;
  }
  const n = measureRound + 1;
  const dirty = lastRows;
  const all = input.mem.state.rows().map((x) => x.row);
  const byGroup = new Map<string, number>();
  for (const r of dirty) {
    const g = `${r.operatorId}#${r.keyGroup}`;
    byGroup.set(g, (byGroup.get(g) ?? 0) + rowBytes(r));
  }
  let floor = 0;
  for (const b of byGroup.values()) floor += Math.max(1, Math.ceil(b / KB));
  const dirtyBytes = dirty.reduce((a, r) => a + rowBytes(r), 0);
  const u = (k: string) => meter.get(`dynamodb.write.${k}`).units;
  const used = {
    total: meter.sum('dynamodb.write').units,
    rows: u('state'),
    delta: u('delta'),
    pointer: u('pointer'),
    ack: u('ack'),
    requests: meter.sum('dynamodb.write').requests,
    bytes: meter.sum('dynamodb.write').bytes,
    s3Puts: meter.sum('s3.put').requests,
  };
  const packed = [1 * KB, 4 * KB, 16 * KB, 64 * KB].map((t) => packedUnits(all, dirty, t, n));
  const bestPacked = packed.reduce((a, b) => (b.writeUnits < a.writeUnits ? b : a));
  const packedTotal = used.total - used.rows + bestPacked.writeUnits;
  // a full snapshot: every row written, and a delta holding every row
  let fullUnits = 0;
  let fullBytes = 0;
  for (const r of all) {
    const s = itemSize(stateRowItem(r, n));
    fullUnits += writeUnits(s);
    fullBytes += s;
  }
  const fullDelta = encodeDelta(all).length;
  const fullDeltaUnits = fullDelta <= INLINE_DELTA_LIMIT ? writeUnits(fullDelta + 60) : 0;
  return {
    keys: all.length,
    dirtyRows: dirty.length,
    dirtyBytes,
    dirtyKeyGroups: byGroup.size,
    floor,
    used,
    ratio: used.total / floor,
    deltaBytes: lastDelta,
    ms,
    packed,
    bestPacked,
    packedTotal,
    packedSavingPct: 100 * (1 - packedTotal / used.total),
    full: { writeUnits: fullUnits + fullDeltaUnits + used.pointer + used.ack, rows: all.length, deltaBytes: fullDelta, bytes: fullBytes },
  };
}
