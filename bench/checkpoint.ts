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
 */
import { performance } from 'node:perf_hooks';
import type { AwsClients } from '../shared/adapters/aws/clients.js';
import { DynamoStateStore } from '../shared/adapters/aws/dynamo-state-store.js';
import { MemoryStateTable, type MemoryStateStore } from '../shared/adapters/memory/memory-ports.js';
import type { Job } from '../shared/api/job.js';
import { PackedStateStore } from '../shared/runtime/packed-state.js';
import type { RuntimePorts, StateRow, StateStore } from '../shared/runtime/ports.js';
import { encodeDelta } from '../shared/codec/snapshot.js';
import { SpillingStateStore } from '../shared/runtime/spilling-state-store.js';
import { createStageRunner } from '../shared/runtime/stage-runner.js';
import { itemSize, KB, utf8Length, writeUnits } from './dynamo-size.js';
import { Meter, meterPorts } from './metering.js';
import { PRICES } from './prices.js';
import { loadRounds, type EncodedRound } from './stage1-input.js';

const INLINE_DELTA_LIMIT = 8 * 1024;
/** an S3 PUT costs as much as this many DynamoDB write request units */
export const S3_PUT_IN_WCU = PRICES.s3.put / PRICES.dynamodb.writeRequestUnit;

export interface CheckpointFigures {
  readonly keys: number;
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

/**
 * Runs the keyed count over the rounds and measures the checkpoint after round `measureRound`, with
 * the state table on DynamoDB when `dynamo` is given (the real store), else on the twin.
 */
export async function measureCheckpoint(job: Job, rounds: readonly EncodedRound[], measureRound: number, dynamo?: DynamoTarget): Promise<CheckpointFigures> {
  const meter = new Meter();
  let lastRows: readonly StateRow[] = [];
  let lastDelta = 0;
  const blobs = new Map<string, Uint8Array>();
  const real = dynamo ? new DynamoStateStore(dynamo.clients, dynamo.table) : undefined;
  let twin: MemoryStateStore | undefined;
  const capture = (p: RuntimePorts): RuntimePorts => {
    twin = p.state as MemoryStateStore;
    const inner: StateStore = real ? new SpillingStateStore(real, { put: async (k, b) => void blobs.set(k, b), get: async (k) => blobs.get(k)! }) : p.state;
    return {
      ...p,
      state: {
        getRows: (ids) => inner.getRows(ids),
        applyRows: async (n, f, rows) => {
          lastRows = rows;
          return inner.applyRows(n, f, rows);
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
    };
  };
  const input = loadRounds(job, rounds, (p) => {
    const c = capture(p);
    return meterPorts(c, meter, real ? undefined : twin!.table);
  });
  const runner = createStageRunner(input);
  let ms = 0;
  let usage0 = real ? { ...real.usage } : undefined;
  const twinTable = twin!.table;
  let twin0 = { puts: twinTable.puts, failures: twinTable.conditionFailures };
  for (let r = 0; r <= measureRound; r++) {
    const round = input.rounds[r]!;
    for (const b of round.batches) await runner.run(input.shardId, b);
    meter.reset();
    if (real) usage0 = { ...real.usage };
    twin0 = { puts: twinTable.puts, failures: twinTable.conditionFailures };
    const t0 = performance.now();
    await runner.run(input.shardId, round.barrier);
    ms = performance.now() - t0;
  }
  const n = measureRound + 1;
  const dirty = lastRows;
  const byGroup = new Map<string, number>();
  for (const r of dirty) {
    const g = `${r.operatorId}#${r.keyGroup}`;
    byGroup.set(g, (byGroup.get(g) ?? 0) + rowBytes(r));
  }
  let floor = 0;
  for (const b of byGroup.values()) floor += Math.max(1, Math.ceil(b / KB));
  const dirtyBytes = dirty.reduce((a, r) => a + rowBytes(r), 0);
  const u = (k: string) => meter.get(`dynamodb.write.${k}`).units;
  const s3Puts = meter.sum('s3.put').requests;
  let rows: number;
  let items: number;
  let conditionFailures: number;
  let rowRequests: number;
  let rowBytes_: number;
  if (real) {
    const now = real.usage;
    rows = now.writeUnits - usage0!.writeUnits;
    items = now.puts - usage0!.puts;
    conditionFailures = now.conditionFailures - usage0!.conditionFailures;
    rowRequests = items + (now.deletes - usage0!.deletes);
    rowBytes_ = now.bytesWritten - usage0!.bytesWritten;
  } else {
    const st = meter.get('dynamodb.write.state');
    rows = st.units;
    items = twinTable.puts - twin0.puts;
    conditionFailures = twinTable.conditionFailures - twin0.failures;
    rowRequests = st.requests;
    rowBytes_ = st.bytes;
  }
  const delta = u('delta') + s3Puts * S3_PUT_IN_WCU;
  const other = meter.sum('dynamodb.write');
  const used = {
    total: rows + (other.units - u('state')) + s3Puts * S3_PUT_IN_WCU,
    rows,
    delta,
    s3Puts,
    pointer: u('pointer'),
    ack: u('ack'),
    requests: rowRequests + (other.requests - meter.get('dynamodb.write.state').requests) + s3Puts,
    bytes: rowBytes_ + (other.bytes - meter.get('dynamodb.write.state').bytes) + (s3Puts ? lastDelta : 0),
    items,
    conditionFailures,
  };
  // every row as the table now holds it
  let all: StateRow[];
  if (real) {
    all = [];
    const ops = [...new Set(dirty.map((r) => r.operatorId))];
    for (const op of ops) for (let g = 0; g < input.plan.maxParallelism; g++) all.push(...(await real.readGroup(op, g)));
  } else all = twin!.rows().map((x) => x.row);
  const full = await packedFull(all, n);
  const fullDelta = encodeDelta(all).length;
  const fullDeltaUnits = fullDelta <= INLINE_DELTA_LIMIT ? writeUnits(fullDelta + 60) : S3_PUT_IN_WCU;
  return {
    keys: all.length,
    dirtyRows: dirty.length,
    dirtyBytes,
    dirtyKeyGroups: byGroup.size,
    floor,
    store: real ? 'dynalite' : 'twin',
    used,
    ratio: used.total / floor,
    deltaBytes: lastDelta,
    ms,
    full: { writeUnits: full.units + fullDeltaUnits + used.pointer + used.ack, rows: all.length, deltaBytes: fullDelta, items: full.items },
  };
}
