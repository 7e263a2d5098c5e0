/**
 * An inner stage applies each packet in one pass (decode, key, look up, apply, envelope by
 * envelope, through reused columns and a reused unit). What that pass must still do: a re-read of
 * the shard in the middle of a packet (records past the hold bound, after an alignment) must not
 * disturb the rest of the packet; a malformed packet or payload is dead-lettered and the rest is
 * applied; a key not cached reads the keys of the rest of the batch together.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, valueState, WatermarkStrategies, type KeyedProcessFunction } from '../api/index.js';
import { PacketBuilder, type Envelope } from '../codec/envelope.js';
import { encodePayload } from '../codec/payload.js';
import { keyGroupOf } from '../plan/key-groups.js';
import type { DeadLetter, RuntimePorts, StagedOutput, StateRowId } from './ports.js';
import { innerStageOnTwins } from '../testing/inner-stage-on-twins.js';
import { instanceIdOf } from './stage-instance.js';
import { createStageRunner, type StageRunnerOptions } from './stage-runner.js';

interface Ev {
  readonly k: string;
}

const MAX_PARALLELISM = 8;
const A = instanceIdOf('s0', 'shardId-000000000000');
const B = instanceIdOf('s0', 'shardId-000000000001');

/** key selector calls of the keyed stage (each is a record decoded and keyed) */
let keyed = 0;

function countJob() {
  const n = valueState<number>('n');
  const fn: KeyedProcessFunction<string, Ev, string> = {
    state: [n],
    processElement(e, ctx, out) {
      const s = ctx.getState(n);
      const next = (s.value() ?? 0) + 1;
      s.update(next);
      out.collect(`${e.k}:${next}`);
    },
  };
  const j = job('inner-apply', { maxParallelism: MAX_PARALLELISM, poisonPolicy: 'dead-letter' });
  j.source<Ev>({ name: 'ev', shards: 2, timestamp: () => 0, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
    .keyBy(
      (e) => {
        keyed++;
        return e.k;
      },
      { parallelism: 1 },
    )
    .process(fn, { name: 'count' })
    .sinkTo(collectSink('out'));
  return j;
}

const data = (epoch: number, seq: number, k: string): Envelope => ({ kind: 'data', epoch, seq, keyGroup: keyGroupOf(k, MAX_PARALLELISM), timestamp: 0, payload: encodePayload({ k }) });
const barrier = (checkpointId: number, count: number): Envelope => ({ kind: 'barrier', checkpointId, count, topology: [2, 1], savepoint: false });
function packet(producer: string, envs: readonly Envelope[]): Uint8Array {
  const b = new PacketBuilder(producer);
  for (const e of envs) b.add(e);
  return b.finish();
}

/** The keyed stage of `countJob` on the twins, fed `records` (packets or any bytes) as one batch. */
async function runInner(records: readonly Uint8Array[], options: StageRunnerOptions = {}) {
  const j = countJob();
  keyed = 0;
  const { plan, names, mem, stage, shard, stored } = innerStageOnTwins(j, records);
  const outputs: StagedOutput[] = [];
  const letters: DeadLetter[] = [];
  const reads: StateRowId[][] = [];
  const ports: RuntimePorts = {
    ...mem.ports,
    collectSink: { stage: async (_sink, out) => void outputs.push(...out) },
    deadLetters: { put: async (d) => void letters.push(d) },
    state: {
      getRows: (ids) => {
        reads.push([...ids]);
        return mem.ports.state.getRows(ids);
      },
      applyRows: (n, f, rows) => mem.ports.state.applyRows(n, f, rows),
    },
  };
  const runner = createStageRunner({ job: j, plan, stage, names, ports, options });
  await runner.run(shard.shardId, stored);
  return { outputs: outputs.map((o) => o.value as string).sort(), letters, reads, keyed };
}

describe('an inner packet applied in one pass', () => {
  it('a re-read of the shard in the middle of a packet (held records past the bound, after an alignment) leaves the rest of the packet to be applied', async () => {
    // A's epoch-1 records wait for B's barrier: one is held, the other is past the bound (re-read);
    // B's barrier completes the alignment mid-packet, the re-read runs, then B's own epoch-1 records
    const r = await runInner(
      [
        packet(A, [data(0, 0, 'a'), barrier(1, 1), data(1, 0, 'b'), data(1, 1, 'c')]),
        packet(B, [data(0, 0, 'd'), barrier(1, 1), data(1, 0, 'e'), data(1, 1, 'f')]),
      ],
      { maxHeldRecords: 1 },
    );
    expect(r.outputs).toEqual(['a:1', 'b:1', 'c:1', 'd:1', 'e:1', 'f:1']);
  });

  it('a malformed packet and a payload that does not decode are dead-lettered; the rest of the batch is applied', async () => {
    const bad = new Uint8Array([0xc1]); // a MessagePack type byte never used
    const r = await runInner([
      new TextEncoder().encode('not a packet'),
      packet(A, [data(0, 0, 'a'), { kind: 'data', epoch: 0, seq: 1, keyGroup: 0, timestamp: 0, payload: bad }, data(0, 2, 'b')]),
    ]);
    expect(r.outputs).toEqual(['a:1', 'b:1']);
    expect(r.letters.map((d) => d.reason.split(':')[0]).sort()).toEqual(['cannot decode payload from s0', 'malformed packet']);
  });

  it('a key not cached reads the keys of the rest of the batch together, this packet and the next ones', async () => {
    const r = await runInner([packet(A, [data(0, 0, 'a'), data(0, 1, 'b')]), packet(A, [data(0, 2, 'c'), data(0, 3, 'a')]), packet(B, [data(0, 0, 'd')])]);
    expect(r.outputs).toEqual(['a:1', 'a:2', 'b:1', 'c:1', 'd:1']);
    expect(r.reads.map((ids) => ids.map((id) => id.key).sort())).toEqual([['a', 'b', 'c', 'd']]);
    // the records the read ahead decoded are not decoded again in their turn
    expect(r.keyed).toBe(5);
  });

  it('what a read ahead decoded goes to its own record, also past a duplicate, a payload that does not decode and a record held back', async () => {
    const bad: Envelope = { kind: 'data', epoch: 0, seq: 3, keyGroup: 0, timestamp: 0, payload: new Uint8Array([0xc1]) };
    const r = await runInner([
      packet(A, [data(0, 0, 'a'), data(0, 1, 'b'), data(0, 0, 'a'), bad, data(0, 2, 'c'), barrier(1, 4), data(1, 0, 'b')]),
      packet(B, [data(0, 0, 'c'), data(0, 1, 'd'), data(0, 1, 'd'), barrier(1, 2), data(1, 0, 'a')]),
    ]);
    expect(r.outputs).toEqual(['a:1', 'a:2', 'b:1', 'b:2', 'c:1', 'c:2', 'd:1']);
    expect(r.letters.map((d) => d.reason.split(':')[0])).toEqual(['cannot decode payload from s0']);
    // once per data envelope (10: the one that does not decode is keyed too, and fails there), and
    // once more for the record held back for epoch 1 (A's 'b'), when it is released
    expect(r.keyed).toBe(11);
  });
});
