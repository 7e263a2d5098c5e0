/**
 * The oracle and the invariant checks of the StageRunner protocol tests' driver (Sim, in
 * stage-runner-sim.test-support.ts). The oracle is computed from the produced input only: per-key
 * counts and sums of the records that precede barrier n in their source shard are what snapshot n
 * must hold and what the commit of n must have published; all records are what the final upsert
 * rows must show. A violation is added to the Sim's `errors`.
 */
import { memoryDeadLetterKey } from '../adapters/memory/memory-ports.js';
import { decodeDelta } from '../codec/snapshot.js';
import { chainOf } from './changelog.js';
import type { RuntimePorts, StateRow } from './ports.js';
import { instanceIdOf } from './stage-instance.js';
import { compareSeq } from './positions.js';
import { envelopeIds, type Ev, type Sim, type Total, type Totals } from './stage-runner-sim.test-support.js';

/**
 * Whether the record `seq` of a source shard precedes barrier n there: with tail barriers, the
 * barrier the coordinator appended; with barriers at the read position, the record after which the
 * source instance's snapshot n says it went out (every snapshot n of the instance must say the same).
 */
export function beforeBarrier(s: Sim, n: number, shardId: string, seq: string): boolean {
  if (!s.o.sourceBarriers) return compareSeq(seq, s.barrierAt.get(n)!.get(shardId)!) < 0;
  const id = `${s.stage(0).id}:${shardId}`;
  const points = new Set(s.m.control.published.filter((p) => p.instanceId === id && p.pointer.checkpointId === n).map((p) => JSON.stringify(p.pointer.replayPoint)));
  if (points.size !== 1) {
    s.errors.push(`barrier ${n} of ${id} went out at ${points.size} places: ${[...points].join(', ')}`);
    return false;
  }
  const rp = JSON.parse([...points][0]!) as { from: string; sequenceNumber: string };
  return rp.from === 'after' && compareSeq(seq, rp.sequenceNumber) <= 0;
}

/** Per-user count and sum of the records before barrier n in their shard (all records if n is undefined). */
export function oracle(s: Sim, n?: number): Totals {
  const out: Totals = new Map();
  for (const p of s.produced) {
    if (p.kind !== 'ok') continue;
    if (n !== undefined && !beforeBarrier(s, n, p.shardId, p.seq)) continue;
    const t = out.get(p.ev!.user) ?? { count: 0, sum: 0, values: [] };
    t.count++;
    t.sum += p.ev!.v;
    t.values.push(p.ev!.v);
    out.set(p.ev!.user, t);
  }
  return out;
}

export function skippedBefore(s: Sim, n?: number): string[] {
  return s.produced
    .filter((p) => p.kind === 'skip' && (n === undefined || beforeBarrier(s, n, p.shardId, p.seq)))
    .map((p) => JSON.stringify(p.ev))
    .sort();
}

/** Checks what the commit of n published, and the snapshot n. */
export function checkCommitted(s: Sim, n: number): void {
  const expected = oracle(s, n);
  checkPublished(s, expected, `commit ${n}`, skippedBefore(s, n));
  checkSnapshot(s, n, expected);
}

export function checkPublished(s: Sim, expected: Totals, what: string, skipped: string[]): void {
  const updates = s.m.collect.published<Total>('updates');
  const perUser = new Map<string, Total[]>();
  for (const u of updates) perUser.set(u.user, [...(perUser.get(u.user) ?? []), u]);
  const users = new Set([...expected.keys(), ...perUser.keys()]);
  for (const user of users) {
    const e = expected.get(user) ?? { count: 0, sum: 0, values: [] };
    const got = perUser.get(user) ?? [];
    const counts = got.map((g) => g.count);
    if (JSON.stringify(counts) !== JSON.stringify(Array.from({ length: e.count }, (_, i) => i + 1))) {
      s.errors.push(`${what}: published counts of ${user} are ${JSON.stringify(counts)}, expected 1..${e.count}`);
      continue;
    }
    const deltas = got.map((g, i) => g.sum - (i ? got[i - 1]!.sum : 0)).sort((a, b) => a - b);
    if (JSON.stringify(deltas) !== JSON.stringify([...e.values].sort((a, b) => a - b))) {
      s.errors.push(`${what}: published sums of ${user} do not add up to its values`);
    }
  }
  const gotSkipped = s.m.collect.published<Ev>('skipped').map((e) => JSON.stringify(e)).sort();
  if (JSON.stringify(gotSkipped) !== JSON.stringify(skipped)) {
    s.errors.push(`${what}: published ${gotSkipped.length} skipped events, expected ${skipped.length}`);
  }
}

/**
 * What a restore of snapshot n would start from: the state table as of n, and over it the rows of
 * each keyed instance's snapshot n folded over its chain (those not applied to the table yet).
 */
export function snapshotState(s: Sim, n: number): StateRow[] {
  const rows = new Map<string, StateRow>();
  for (const row of s.m.state.asOf(n)) rows.set(`${row.operatorId}\u0000${row.key}`, row);
  const deltas = s.m.control.deltas();
  for (const id of s.shardsOf(s.stage(1)).map((sh) => instanceIdOf(s.stage(1).id, sh))) {
    const pointer = s.m.control.published.filter((p) => p.instanceId === id && p.pointer.checkpointId === n).at(-1)?.pointer;
    if (!pointer) continue;
    for (const ref of [...chainOf(pointer).chain, pointer.delta]) {
      const bytes = deltas.get(ref.key);
      if (!bytes) {
        s.errors.push(`snapshot ${n} of ${id}: delta ${ref.key} of its chain is gone`);
        continue;
      }
      for (const row of decodeDelta(bytes).rows) {
        if (Object.keys(row.values).length) rows.set(`${row.operatorId}\u0000${row.key}`, row);
        else rows.delete(`${row.operatorId}\u0000${row.key}`);
      }
    }
  }
  return [...rows.values()];
}

export function checkSnapshot(s: Sim, n: number, expected: Totals): void {
  const op = s.plan.stages[1]!.operators.find((o) => o.kind === 'process')!.id;
  const got = new Map<string, { count: number; sum: number }>();
  for (const row of snapshotState(s, n)) {
    if (row.operatorId !== op || !row.values.totals) continue;
    got.set(row.key, JSON.parse(new TextDecoder().decode(row.values.totals)) as { count: number; sum: number });
  }
  const want = new Map([...expected].map(([u, t]) => [u, { count: t.count, sum: t.sum }]));
  const a = JSON.stringify([...got].sort(([x], [y]) => x.localeCompare(y)));
  const b = JSON.stringify([...want].sort(([x], [y]) => x.localeCompare(y)));
  if (a !== b) s.errors.push(`snapshot ${n}: state rows ${a}, expected ${b}`);
  const instances = s.plan.stages.flatMap((st) => s.shardsOf(st).map((sh) => `${st.id}:${sh}`));
  for (const id of instances) {
    if (!s.m.control.published.some((p) => p.instanceId === id && p.pointer.checkpointId === n)) {
      s.errors.push(`snapshot ${n}: ${id} acked without publishing it`);
    }
  }
}

/** The end state: every record's effect exactly once. */
export function checkFinal(s: Sim): void {
  const expected = oracle(s);
  const table = s.m.upsertSink.table(s.upsertTable());
  const got = [...table].map(([k, v]) => [k, { user: v.user, count: v.count, sum: v.sum }] as const).sort(([x], [y]) => x.localeCompare(y));
  const want = [...expected].map(([u, t]) => [u, { user: u, count: t.count, sum: t.sum }] as const).sort(([x], [y]) => x.localeCompare(y));
  if (JSON.stringify(got) !== JSON.stringify(want)) s.errors.push(`final upsert rows ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
  // rows never moved back in time
  const last = new Map<string, number>();
  for (const a of s.m.upsertSink.accepted) {
    const c = (a.write.item as unknown as Total).count;
    if ((last.get(a.key) ?? 0) > c) s.errors.push(`upsert row ${a.key} regressed from ${last.get(a.key)} to ${c}`);
    last.set(a.key, c);
  }
  const poison = s.produced
    .filter((p) => p.kind === 'poison')
    .map((p) => memoryDeadLetterKey({ job: s.plan.job, stage: 's0', shardId: p.shardId, sequenceNumber: p.seq, subSequence: 0 }))
    .sort();
  const letters = [...s.m.deadLetters.letters.keys()].sort();
  if (JSON.stringify(letters) !== JSON.stringify(poison)) s.errors.push(`dead letters ${JSON.stringify(letters)}, expected ${JSON.stringify(poison)}`);
  // determinism: every replay gives a record the same producer, epoch and sequence number
  for (const shardId of s.shardsOf(s.stage(1))) {
    const seen = new Map<string, string>();
    for (const r of s.records(s.stage(1), shardId)) {
      for (const [id, content] of envelopeIds(r.data)) {
        const prev = seen.get(id);
        if (prev === undefined) seen.set(id, content);
        else if (prev !== content) {
          s.errors.push(`inner envelope ${id} on ${shardId} was emitted with two contents: ${prev} and ${content}`);
          return;
        }
      }
    }
  }
  if (s.m.collect.conflicts) s.errors.push(`${s.m.collect.conflicts} collect outputs re-staged with other content (non-determinism)`);
  if (s.m.state.conflicts) s.errors.push(`${s.m.state.conflicts} state rows rewritten with other values for the same checkpoint`);
  if (s.m.control.deltaConflicts) s.errors.push(`${s.m.control.deltaConflicts} deltas rewritten with other bytes`);
}

// ------------------------------------------------------------------------------------------ restores

/** A keyed instance's read of state rows, at its epoch: per key read, the totals found (undefined: none). */
export interface StateRead {
  readonly instanceId: string;
  readonly epoch: number;
  readonly rows: ReadonlyMap<string, { count: number; sum: number } | undefined>;
}

/**
 * The ports of one environment, keeping in `reads` what its instances read from the state store and
 * in which epoch: the epoch of the snapshot it restored (takeOver's pointer) or last published.
 * Reads the engine refuses (a row of a checkpoint past the epoch: StateLoader) are left out.
 */
export function watchStateReads(ports: RuntimePorts, operatorId: string, reads: StateRead[]): RuntimePorts {
  let instance: string | undefined;
  const epochs = new Map<string, number>();
  const { control, state } = ports;
  return {
    ...ports,
    control: {
      ...control,
      readLease: async (id) => {
        instance = id;
        return control.readLease(id);
      },
      takeOver: async (id, fence) => {
        const lease = await control.takeOver(id, fence);
        epochs.set(id, lease.snapshot?.checkpointId ?? 0);
        return lease;
      },
      publishSnapshot: async (id, fence, pointer) => {
        await control.publishSnapshot(id, fence, pointer);
        epochs.set(id, pointer.checkpointId);
      },
      writeDelta: (id, n, d) => control.writeDelta(id, n, d),
      readDelta: (ref) => control.readDelta(ref),
      commitPosition: (id, fence, last, first) => control.commitPosition(id, fence, last, first),
      ack: (n, id) => control.ack(n, id),
    },
    state: {
      applyRows: (n, fence, rows) => state.applyRows(n, fence, rows),
      getRows: async (ids) => {
        const rows = await state.getRows(ids);
        const epoch = instance === undefined ? undefined : epochs.get(instance);
        if (epoch === undefined || rows.some((r) => (r.checkpointId ?? 0) > epoch)) return rows;
        const got = new Map<string, { count: number; sum: number } | undefined>();
        for (const id of ids) if (id.operatorId === operatorId) got.set(id.key, undefined);
        for (const r of rows) {
          if (r.operatorId === operatorId && r.values.totals) got.set(r.key, JSON.parse(new TextDecoder().decode(r.values.totals)) as { count: number; sum: number });
        }
        if (got.size) reads.push({ instanceId: instance!, epoch, rows: got });
        return rows;
      },
    },
  };
}

/** Whether every source shard's barrier n is known (where it was appended, or where each source's snapshot n put it). */
function barrierKnown(s: Sim, n: number): boolean {
  const shards = s.shardsOf(s.stage(0));
  if (!s.o.sourceBarriers) return shards.every((sh) => s.barrierAt.get(n)?.has(sh));
  return shards.every((sh) => s.m.control.published.some((p) => p.instanceId === instanceIdOf(s.stage(0).id, sh) && p.pointer.checkpointId === n));
}

/** per Sim, the oracle of each epoch whose barriers are all known (they never move once known) */
const oracles = new WeakMap<Sim, Map<number, Totals>>();

/**
 * A restore never combines state and positions of different checkpoints: every row a keyed instance
 * read in epoch e holds what snapshot e holds (the effects of the records before barrier e), since
 * a key not cached is one the instance has not changed since e began. Checks the reads whose
 * barriers are known by now (at each commit, and at the end); the others wait.
 */
export function checkStateReads(s: Sim): void {
  let expected = oracles.get(s);
  if (!expected) oracles.set(s, (expected = new Map()));
  const waiting: StateRead[] = [];
  for (const read of s.stateReads.splice(0)) {
    if (read.epoch > 0 && !barrierKnown(s, read.epoch)) {
      waiting.push(read);
      continue;
    }
    let want = expected.get(read.epoch);
    if (!want) expected.set(read.epoch, (want = read.epoch === 0 ? new Map() : oracle(s, read.epoch)));
    s.stats.stateReadsChecked++;
    for (const [key, got] of read.rows) {
      const e = want.get(key);
      const w = e ? { count: e.count, sum: e.sum } : undefined;
      if (JSON.stringify(got) !== JSON.stringify(w)) {
        s.errors.push(`${read.instanceId} read ${key} in epoch ${read.epoch} as ${JSON.stringify(got)}; snapshot ${read.epoch} holds ${JSON.stringify(w)}`);
        break;
      }
    }
  }
  s.stateReads.push(...waiting);
}
