/**
 * What a checkpoint's CPU is made of, piece by piece, on the keyed count's state (one ValueState
 * per key, 8.7 k dirty keys: what a checkpoint of the handler part writes): each piece timed alone,
 * CPU time, best of several runs (a shared machine's load inflates averages, rarely the best run).
 * Also the MessagePack payload writer on the bench's records. The pieces, in a snapshot's order:
 *
 * - rows: serializing the dirty keys into rows (`KeyedStateCache.dirtyRows` + `markClean`; the
 *   state's serializer, JSON as UTF-8, runs inside);
 * - delta: encoding those rows again into the checkpoint's delta (`encodeDelta`);
 * - spill: the spilling store's pass over the rows (`SpillingStateStore.applyRows`, nothing spilled);
 * - packed: the packed layout's apply on an in-memory table (`PackedStateStore.applyRows`): planning
 *   the items that hold dirty keys and encoding them (the table's own writes cost ~nothing).
 */
import { MemoryStateTable } from '../shared/adapters/memory/memory-ports.js';
import { valueState } from '../shared/api/state.js';
import { encodePayload } from '../shared/codec/payload.js';
import { KeyedStateCache } from '../shared/runtime/keyed-state.js';
import { PackedStateStore } from '../shared/runtime/packed-state.js';
import type { StateRow, StateStore } from '../shared/runtime/ports.js';
import { encodeDelta } from '../shared/codec/snapshot.js';
import { SpillingStateStore } from '../shared/runtime/spilling-state-store.js';

export interface ComponentFigures {
  readonly dirtyKeys: number;
  /** ns of CPU per dirty key, best run */
  readonly nsPerKey: { readonly rows: number; readonly delta: number; readonly spill: number; readonly packed: number };
  /** ns of CPU per encodePayload call, best run */
  readonly nsPerPayload: { readonly output: number; readonly event: number };
  readonly runs: number;
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function best(runs: number, f: () => unknown): Promise<number> {
  let b = Infinity;
  for (let i = 0; i < runs; i++) {
    const c0 = cpuMs();
    await f();
    b = Math.min(b, cpuMs() - c0);
  }
  return b;
}

export async function measureComponents(o: { dirtyKeys: number; keys: number; runs: number }): Promise<ComponentFigures> {
  const count = valueState<number>('count');
  const cache = new KeyedStateCache();
  cache.register('op2-process', [count]);
  const keys = Array.from({ length: o.dirtyKeys }, (_, i) => `user-${(i * 7919) % o.keys}`);
  const touch = () => {
    for (let i = 0; i < keys.length; i++) cache.valueState('op2-process', keys[i]!, i % 128, count).update(i);
  };
  let rows: StateRow[] = [];
  const touchOnly = await best(o.runs, touch);
  const rowsMs =
    (await best(o.runs, () => {
      touch();
      rows = cache.dirtyRows();
      cache.markClean();
    })) - touchOnly;
  const deltaMs = await best(o.runs, () => encodeDelta(rows));
  const nothing: StateStore = { getRows: async () => [], applyRows: async () => {} };
  const spilling = new SpillingStateStore(nothing, { put: async () => {}, get: async () => new Uint8Array() });
  const spillMs = await best(o.runs, () => spilling.applyRows(1, 1, rows));
  const packed = new PackedStateStore(new MemoryStateTable());
  let n = 0;
  await packed.applyRows(++n, 1, rows);
  const packedMs = await best(o.runs, () => packed.applyRows(++n, 1, rows));
  const outputs = Array.from({ length: 1000 }, (_, i) => ({ k: `user-${i}`, n: i }));
  const events = Array.from({ length: 1000 }, (_, i) => ({ k: `user-${i}`, v: 1 + (i % 7), ts: Date.UTC(2026, 0, 1) + i }));
  const outMs = await best(o.runs, () => {
    for (let r = 0; r < 20; r++) for (const x of outputs) encodePayload(x);
  });
  const evMs = await best(o.runs, () => {
    for (let r = 0; r < 20; r++) for (const x of events) encodePayload(x);
  });
  const perKey = (ms: number) => (ms * 1e6) / o.dirtyKeys;
  return {
    dirtyKeys: o.dirtyKeys,
    nsPerKey: { rows: perKey(rowsMs), delta: perKey(deltaMs), spill: perKey(spillMs), packed: perKey(packedMs) },
    nsPerPayload: { output: (outMs * 1e6) / 20_000, event: (evMs * 1e6) / 20_000 },
    runs: o.runs,
  };
}
