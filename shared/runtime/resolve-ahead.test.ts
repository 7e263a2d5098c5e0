/**
 * A packet's records are decoded, keyed and looked up before the pass applies them, and each row
 * keeps its first keyed operator's entry for its turn (packet-apply.ts, `resolveAhead`). What that
 * must still do: an entry the cache dropped in between is looked up again, and with more than one
 * keyed operator the others' entries are still looked up (and read from the state store when
 * evicted), though the first one's was found.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, valueState, WatermarkStrategies, type KeyedProcessFunction } from '../api/index.js';
import { PacketBuilder, type Envelope } from '../codec/envelope.js';
import { encodePayload } from '../codec/payload.js';
import { keyGroupOf } from '../plan/key-groups.js';
import { innerStageOnTwins } from '../testing/inner-stage-on-twins.js';
import { DataUnit } from './inner-packets.js';
import { KeyedStateCache } from './keyed-state.js';
import type { RuntimePorts, StagedOutput, StateRowId } from './ports.js';
import { instanceIdOf } from './stage-instance.js';
import { createStageRunner } from './stage-runner.js';
import { resolveUnit } from './state-prefetch.js';

interface Ev {
  readonly k: string;
  readonly v: number;
}

const MAX_PARALLELISM = 8;
const A = instanceIdOf('s0', 'shardId-000000000000');

/**
 * One keyed stream, two keyed operators in the stage: `count` writes its key's state at every
 * record, `first` only at a key's first record (and emits that record's value at every record).
 */
function twoOperatorJob() {
  const n = valueState<number>('n');
  const first = valueState<number>('first');
  const count: KeyedProcessFunction<string, Ev, string> = {
    state: [n],
    processElement(e, ctx, out) {
      const s = ctx.getState(n);
      const next = (s.value() ?? 0) + 1;
      s.update(next);
      out.collect(`count ${e.k}:${next}`);
    },
  };
  const firstSeen: KeyedProcessFunction<string, Ev, string> = {
    state: [first],
    processElement(e, ctx, out) {
      const s = ctx.getState(first);
      if (s.value() === undefined) s.update(e.v);
      out.collect(`first ${e.k}:${s.value()}`);
    },
  };
  const j = job('resolve-ahead', { maxParallelism: MAX_PARALLELISM });
  const keyed = j
    .source<Ev>({ name: 'ev', shards: 1, timestamp: () => 0, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
    .keyBy((e) => e.k, { parallelism: 1 });
  keyed.process(count, { name: 'count' }).sinkTo(collectSink('counts'));
  keyed.process(firstSeen, { name: 'first' }).sinkTo(collectSink('firsts'));
  return j;
}

const data = (epoch: number, seq: number, k: string, v: number): Envelope => ({ kind: 'data', epoch, seq, keyGroup: keyGroupOf(k, MAX_PARALLELISM), timestamp: 0, payload: encodePayload({ k, v }) });
const barrier = (checkpointId: number, count: number): Envelope => ({ kind: 'barrier', checkpointId, count, topology: [1, 1], savepoint: false });
function packet(envs: readonly Envelope[]): Uint8Array {
  const b = new PacketBuilder(A);
  for (const e of envs) b.add(e);
  return b.finish();
}

describe('a packet resolved ahead of its pass', () => {
  it('with two keyed operators, the second one’s entry evicted while the first one’s stays is read back, not started empty', async () => {
    const j = twoOperatorJob();
    // batch 1: the key's first record, then a checkpoint (both operators' entries clean);
    // batch 2: `count` writes (its entry stays dirty), `first` only reads (clean: evicted after the batch);
    // batch 3: `count`'s entry is cached, `first`'s must be read from the state store
    const { plan, names, mem, stage, shard, stored } = innerStageOnTwins(j, [
      packet([data(0, 0, 'a', 1), barrier(1, 1)]),
      packet([data(1, 0, 'a', 2)]),
      packet([data(1, 1, 'a', 3)]),
    ]);
    const outputs: StagedOutput[] = [];
    const ports: RuntimePorts = { ...mem.ports, collectSink: { stage: async (_sink, out) => void outputs.push(...out) } };
    const runner = createStageRunner({ job: j, plan, stage, names, ports, options: { maxCachedKeys: 1 } });
    for (const r of stored) await runner.run(shard.shardId, [r]);
    expect(outputs.map((o) => o.value as string).sort()).toEqual(['count a:1', 'count a:2', 'count a:3', 'first a:1', 'first a:1', 'first a:1']);
  });

  it('an entry kept for a row and dropped by the cache before the row’s turn is looked up again', () => {
    const cache = new KeyedStateCache();
    cache.register('op', [valueState<number>('n')]);
    const id: StateRowId = { operatorId: 'op', keyGroup: 0, key: 'k' };
    cache.load([id], []);
    const kept = cache.lookup('op', 'k')!;
    // the key's row read again (a load replaces the entry and marks the old one dropped)
    cache.load([id], []);
    const current = cache.lookup('op', 'k')!;
    expect(current).not.toBe(kept);
    const u = DataUnit.reusable();
    u.value = { k: 'k' };
    u.key = 'k';
    u.state = kept;
    const ids: StateRowId[] = [];
    resolveUnit(u, ids, { keyedOperators: ['op'], keySelectors: [] }, cache);
    expect(ids).toEqual([]);
    expect(u.state).toBe(current);
  });
});
