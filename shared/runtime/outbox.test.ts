import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePacket, type Envelope } from '../codec/envelope.js';
import { evenHashRanges } from '../adapters/memory/memory-ports.js';
import { hashKeyOfKeyGroup } from '../plan/key-groups.js';
import { makeDestination, Outbox } from './outbox.js';
import type { OutgoingRecord, ShardInfo } from './ports.js';

const MP = 16;

function shards(n: number): ShardInfo[] {
  return evenHashRanges(n).map((r, i) => ({ shardId: `shardId-${String(i).padStart(12, '0')}`, startingHashKey: r.start.toString(), endingHashKey: r.end.toString() }));
}

/** Envelopes per shard index, in emission order, decoded from what the outbox hands out. */
function byShard(records: readonly OutgoingRecord[], sh: readonly ShardInfo[]): Map<number, Envelope[]> {
  const out = new Map<number, Envelope[]>();
  for (const r of records) {
    const i = sh.findIndex((s) => s.startingHashKey === r.hashKey);
    expect(i).toBeGreaterThanOrEqual(0);
    const p = decodePacket(r.data);
    out.set(i, [...(out.get(i) ?? []), ...p.envelopes]);
  }
  return out;
}

const payload = (n: number) => new Uint8Array([n & 0xff]);

describe('makeDestination', () => {
  it('sorts shards by starting hash key and maps every key group to the shard holding its hash key', () => {
    const sh = shards(3);
    const d = makeDestination('st', [sh[2]!, sh[0]!, sh[1]!], MP);
    expect(d.shards.map((s) => s.shardId)).toEqual(sh.map((s) => s.shardId));
    for (let g = 0; g < MP; g++) {
      const s = d.shards[d.shardOfKeyGroup[g]!]!;
      const h = BigInt(hashKeyOfKeyGroup(g, MP));
      expect(h >= BigInt(s.startingHashKey) && h <= BigInt(s.endingHashKey)).toBe(true);
    }
  });

  it('fails when no open shard covers a key group', () => {
    expect(() => makeDestination('st', [shards(2)[0]!], MP)).toThrow(/no open shard of st covers key group/);
  });
});

describe('Outbox', () => {
  it('numbers data envelopes per channel, and each barrier counts its channel', () => {
    fc.assert(
      fc.property(fc.array(fc.nat({ max: MP - 1 }), { maxLength: 80 }), fc.integer({ min: 1, max: 5 }), (groups, n) => {
        const sh = shards(n);
        const o = new Outbox('s0:shardId-000000000000');
        o.addDestination('s1', makeDestination('stream-s1', sh, MP));
        o.epoch = 4;
        groups.forEach((g, i) => o.emitKeyed('s1', g, 1000 + i, payload(i)));
        o.closeEpoch(5, [1, n], false);
        expect(o.epoch).toBe(5);
        o.emitKeyed('s1', groups[0] ?? 0, undefined, payload(99));
        const { records } = o.take();
        expect(records.map((r) => r.stream)).toEqual(['stream-s1']);
        const d = o.destination('s1');
        const envs = byShard(records[0]!.waves.flat(), sh);
        for (let i = 0; i < n; i++) {
          const list = envs.get(i) ?? [];
          const sent = groups.filter((g) => d.shardOfKeyGroup[g] === i);
          const before = list.findIndex((e) => e.kind === 'barrier');
          expect(before).toBe(sent.length); // data of epoch 4, then the barrier
          expect(list.slice(0, before).map((e) => (e.kind === 'data' ? [e.epoch, e.seq, e.keyGroup] : e.kind))).toEqual(sent.map((g, k) => [4, k, g]));
          expect(list[before]).toEqual({ kind: 'barrier', checkpointId: 5, count: sent.length, topology: [1, n], savepoint: false });
          // after the barrier, epoch 5 starts at seq 0
          for (const e of list.slice(before + 1)) expect(e).toMatchObject({ kind: 'data', epoch: 5, seq: 0 });
        }
        expect(o.dataOut).toBe(groups.length + 1);
        expect(o.pending).toBe(0);
      }),
    );
  });

  it('closeEpoch resets seqs, round-robin cursors and sink seqs; startEpoch too, without a barrier', () => {
    const sh = shards(3);
    const o = new Outbox('p');
    o.addDestination('s2', makeDestination('rb', sh, MP));
    o.emitRebalance('s2', undefined, payload(0));
    o.emitRebalance('s2', undefined, payload(1));
    o.collect('out', 'a');
    o.upsert('tbl', 'T', 'pk', 'k', { v: 1 });
    o.closeEpoch(1, [3], true);
    o.emitRebalance('s2', undefined, payload(2)); // back to shard 0
    o.collect('out', 'b');
    const t = o.take();
    const envs = byShard(t.records[0]!.waves.flat(), sh);
    expect(envs.get(0)!.map((e) => e.kind)).toEqual(['data', 'barrier', 'data']);
    expect(envs.get(0)![2]).toMatchObject({ epoch: 1, seq: 0 });
    expect(envs.get(1)!.map((e) => e.kind)).toEqual(['data', 'barrier']);
    expect(envs.get(2)!).toEqual([{ kind: 'barrier', checkpointId: 1, count: 0, topology: [3], savepoint: true }]);
    expect(t.collected).toEqual([{ sink: 'out', outputs: [{ producer: 'p', epoch: 0, seq: 0, value: 'a' }, { producer: 'p', epoch: 1, seq: 0, value: 'b' }] }]);
    expect(t.upserts).toEqual([{ table: 'T', keyAttribute: 'pk', writes: [{ key: 'k', item: { v: 1 }, producer: 'p', epoch: 0, seq: 0 }] }]);

    o.emitRebalance('s2', undefined, payload(3));
    o.collect('out', 'c');
    o.startEpoch(7);
    o.emitRebalance('s2', undefined, payload(4));
    o.collect('out', 'd');
    const u = o.take();
    const envs2 = byShard(u.records[0]!.waves.flat(), sh);
    expect(envs2.get(1)!.map((e) => (e.kind === 'data' ? [e.epoch, e.seq] : e.kind))).toEqual([[1, 0]]);
    expect(envs2.get(0)!.map((e) => (e.kind === 'data' ? [e.epoch, e.seq] : e.kind))).toEqual([[7, 0]]);
    expect(u.collected[0]!.outputs.map((x) => [x.epoch, x.seq, x.value])).toEqual([
      [1, 1, 'c'],
      [7, 0, 'd'],
    ]);
  });

  it('counts sink seqs per sink, shared by nothing else', () => {
    const o = new Outbox('p');
    o.collect('a', 1);
    o.collect('b', 2);
    o.collect('a', 3);
    o.upsert('c', 'tc', 'id', 'k1', { x: 1 });
    o.upsert('c', 'tc', 'id', 'k2', { x: 2 });
    const t = o.take();
    expect(t.collected.map((c) => [c.sink, c.outputs.map((x) => x.seq)])).toEqual([
      ['a', [0, 1]],
      ['b', [0]],
    ]);
    expect(t.upserts[0]!.writes.map((w) => w.seq)).toEqual([0, 1]);
  });

  it('broadcasts to every shard and sends control envelopes everywhere', () => {
    const sh = shards(2);
    const o = new Outbox('p');
    o.addDestination('s1', makeDestination('x', sh, MP));
    o.addDestination('s2', makeDestination('y', shards(3), MP));
    o.emitBroadcast('s1', 5, payload(1));
    o.emitControl({ kind: 'tick', epoch: 0, time: 99 });
    expect(o.dataOut).toBe(2);
    const t = o.take();
    expect(t.records.map((r) => [r.stream, r.waves.flat().length])).toEqual([
      ['x', 2],
      ['y', 3],
    ]);
    for (const [i, list] of byShard(t.records[0]!.waves.flat(), sh)) {
      expect(list).toEqual([
        { kind: 'data', epoch: 0, seq: 0, keyGroup: 0, timestamp: 5, payload: expect.anything() },
        { kind: 'tick', epoch: 0, time: 99 },
      ]);
      expect(i).toBeLessThan(2);
    }
  });

  it('take groups by stream, empties the outbox, and hands out nothing twice', () => {
    const o = new Outbox('p');
    o.addDestination('s1', makeDestination('one', shards(2), MP));
    o.addDestination('s2', makeDestination('two', shards(1), MP));
    expect(o.take()).toEqual({ records: [], upserts: [], collected: [] });
    o.emitKeyed('s2', 3, undefined, payload(1));
    expect(o.pending).toBe(1);
    const t = o.take();
    expect(t.records.map((r) => r.stream)).toEqual(['two']);
    expect(o.pending).toBe(0);
    expect(o.take().records).toEqual([]);
    // seqs continue across takes within the epoch
    o.emitKeyed('s2', 3, undefined, payload(2));
    expect(decodePacket(o.take().records[0]!.waves.flat()[0]!.data).envelopes[0]).toMatchObject({ seq: 1 });
  });

  it('splits a channel into several packets past 512 KiB, keeping the order', () => {
    const o = new Outbox('p');
    const sh = shards(1);
    o.addDestination('s1', makeDestination('big', sh, MP));
    const big = new Uint8Array(100 * 1024);
    for (let i = 0; i < 12; i++) o.emitKeyed('s1', 0, undefined, big);
    o.closeEpoch(1, [1], false);
    const recs = o.take().records[0]!.waves.flat();
    expect(recs.length).toBeGreaterThan(1);
    for (const r of recs) expect(r.data.length).toBeLessThan(1024 * 1024);
    const envs = recs.flatMap((r) => decodePacket(r.data).envelopes);
    expect(envs.map((e) => (e.kind === 'data' ? e.seq : e.kind))).toEqual([...Array.from({ length: 12 }, (_, i) => i), 'barrier']);
  });

  it('fails clearly for a stage it has no destination for', () => {
    expect(() => new Outbox('p').destination('s9')).toThrow(/p has no destination for stage s9/);
  });
});

describe('routing by key group while a destination is resharded', () => {
  const shardOfHash = (sh: readonly ShardInfo[], hashKey: string) => {
    const h = BigInt(hashKey);
    return sh.findIndex((s) => h >= BigInt(s.startingHashKey) && h <= BigInt(s.endingHashKey));
  };

  it('every packet holds one key group, and the barrier tells each new shard exactly what it received', () => {
    type Op = { kind: 'keyed'; g: number } | { kind: 'rebalance' } | { kind: 'broadcast' } | { kind: 'control' };
    const op: fc.Arbitrary<Op> = fc.oneof(
      { arbitrary: fc.nat({ max: MP - 1 }).map((g) => ({ kind: 'keyed' as const, g })), weight: 6 },
      fc.constant({ kind: 'rebalance' as const }),
      fc.constant({ kind: 'broadcast' as const }),
      fc.constant({ kind: 'control' as const }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 6 }), fc.array(op, { maxLength: 120 }), fc.nat({ max: 3 }), (before, after, ops, cut) => {
        const old = shards(before);
        const next = shards(after);
        const o = new Outbox('p');
        o.addDestination('s1', makeDestination('st', old, MP), 1);
        // barrier 1 announces the reshard of stage 1: epoch 1 routes by key group
        o.closeEpoch(1, [1, before], false, [1]);
        const sent: OutgoingRecord[] = [...o.take().records.flatMap((r) => r.waves.flat())];
        ops.forEach((x, i) => {
          if (x.kind === 'keyed') o.emitKeyed('s1', x.g, undefined, payload(i));
          else if (x.kind === 'rebalance') o.emitRebalance('s1', undefined, payload(i));
          else if (x.kind === 'broadcast') o.emitBroadcast('s1', undefined, payload(i));
          else o.emitControl({ kind: 'watermark', epoch: 1, watermark: i, idle: false });
          // some packets go out before the stream is resharded, some after
          if (i === cut) sent.push(...o.take().records.flatMap((r) => r.waves.flat()));
        });
        // the stream now has its new shards; barrier 2 (plain) closes the routed epoch
        o.replaceDestination('s1', makeDestination('st', next, MP));
        o.closeEpoch(2, [1, after], false);
        sent.push(...o.take().records.flatMap((r) => r.waves.flat()));
        const seqs = next.map(() => new Set<number>());
        const barriers = new Map<number, number>();
        for (const r of sent) {
          const p = decodePacket(r.data);
          const data = p.envelopes.filter((e) => e.kind === 'data');
          const groups = new Set(data.map((e) => (e.kind === 'data' ? e.keyGroup : -1)));
          expect(groups.size).toBeLessThanOrEqual(1);
          const i = shardOfHash(next, r.hashKey);
          for (const e of p.envelopes) {
            if (e.kind === 'data' && e.epoch === 1) {
              // the packet lands in the shard owning its key group, in the old layout and in the new one
              expect(shardOfHash(next, hashKeyOfKeyGroup(e.keyGroup, MP))).toBe(i);
              expect(shardOfHash(old, hashKeyOfKeyGroup(e.keyGroup, MP))).toBe(shardOfHash(old, r.hashKey));
              seqs[i]!.add(e.seq);
            }
            if (e.kind === 'barrier' && e.checkpointId === 2) barriers.set(i, e.count);
          }
        }
        expect([...barriers.keys()].sort()).toEqual(next.map((_, i) => i));
        for (let i = 0; i < next.length; i++) expect(barriers.get(i)).toBe(seqs[i]!.size);
      }),
      { numRuns: 200 },
    );
  });

  it('a watermark never lands in a shard before data emitted ahead of it, whatever a partial PutRecords failure refuses (waves)', () => {
    // A writer that, for each call, accepts a random subset first and retries the refused entries
    // after them; a wave goes out only once the one before it was accepted. Without the waves, one key
    // group's watermark lands before another group's refused data in the same shard, which is then late.
    type Op = { kind: 'keyed'; g: number } | { kind: 'watermark' } | { kind: 'flush' };
    const op: fc.Arbitrary<Op> = fc.oneof(
      { arbitrary: fc.nat({ max: MP - 1 }).map((g) => ({ kind: 'keyed' as const, g })), weight: 6 },
      { arbitrary: fc.constant({ kind: 'watermark' as const }), weight: 2 },
      fc.constant({ kind: 'flush' as const }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.boolean(), fc.array(op, { maxLength: 80 }), fc.array(fc.boolean(), { minLength: 64, maxLength: 64 }), (n, routed, ops, refusals) => {
        const sh = shards(n);
        const o = new Outbox('p');
        o.addDestination('s1', makeDestination('st', sh, MP), 1);
        o.closeEpoch(1, [1, n], false, routed ? [1] : []);
        let r = 0;
        const landed = sh.map(() => [] as Envelope[]);
        const write = () => {
          for (const { waves } of o.take().records) {
            for (const wave of waves) {
              // accepted first: the entries not refused; then the refused ones, retried
              const refused = wave.filter(() => refusals[r++ % refusals.length]);
              for (const rec of [...wave.filter((x) => !refused.includes(x)), ...refused]) landed[shardOfHash(sh, rec.hashKey)]!.push(...decodePacket(rec.data).envelopes);
            }
          }
        };
        let emitted = 0;
        ops.forEach((x) => {
          if (x.kind === 'keyed') o.emitKeyed('s1', x.g, emitted, payload(emitted++));
          else if (x.kind === 'watermark') o.emitControl({ kind: 'watermark', epoch: 1, watermark: emitted++, idle: false });
          else write();
        });
        write();
        for (const list of landed) {
          let wm = -1;
          for (const e of list) {
            if (e.kind === 'watermark') wm = Math.max(wm, e.watermark);
            // every data envelope was emitted before any watermark that came ahead of it
            if (e.kind === 'data') expect(e.timestamp!).toBeGreaterThan(wm);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a watermark after a flush outgrew its first packet waits for the second wave', () => {
    const o = new Outbox('p');
    o.addDestination('s1', makeDestination('big', shards(1), MP));
    for (let i = 0; i < 6; i++) o.emitKeyed('s1', 0, undefined, new Uint8Array(100 * 1024));
    o.emitControl({ kind: 'watermark', epoch: 0, watermark: 5, idle: false });
    o.emitKeyed('s1', 0, undefined, payload(1));
    const [first, second, ...rest] = o.take().records[0]!.waves;
    expect(rest).toEqual([]);
    expect(first!.flatMap((r) => decodePacket(r.data).envelopes).map((e) => e.kind)).toEqual(Array.from({ length: 7 }, () => 'data'));
    expect(second!.flatMap((r) => decodePacket(r.data).envelopes)).toEqual([{ kind: 'watermark', epoch: 0, watermark: 5, idle: false }]);
  });

  it('in an epoch routed by key group a control envelope reaches every shard, in the second wave after the data, also when the epoch ends before the flush', () => {
    const sh = shards(2);
    // per shard (by hash key range), the kinds of envelope a wave brings it
    const kinds = (wave: readonly OutgoingRecord[] | undefined) => {
      const out = new Map<number, Set<string>>();
      for (const r of wave ?? []) for (const e of decodePacket(r.data).envelopes) out.set(shardOfHash(sh, r.hashKey), (out.get(shardOfHash(sh, r.hashKey)) ?? new Set()).add(e.kind));
      return [...out].map(([i, k]) => `${i}:${[...k].join('+')}`).sort();
    };
    for (const endEpochFirst of [false, true]) {
      const o = new Outbox('p');
      o.addDestination('s1', makeDestination('st', sh, MP), 1);
      o.closeEpoch(1, [1, 2], false, [1]);
      o.take();
      expect(o.pending).toBe(0);
      o.emitKeyed('s1', 0, undefined, payload(1));
      o.emitKeyed('s1', MP - 1, undefined, payload(2));
      o.emitControl({ kind: 'watermark', epoch: 1, watermark: 7, idle: false });
      // one data packet per key group used, one control packet per key group
      expect(o.pending).toBe(2 + MP);
      if (endEpochFirst) {
        o.closeEpoch(2, [1, 2], false);
        expect(o.pending).toBe(2 + MP + 2); // the routing's packets wait for the flush, with a barrier per shard
      }
      const [first, second, ...rest] = o.take().records[0]!.waves;
      expect(rest).toEqual([]);
      expect(kinds(first)).toEqual(endEpochFirst ? ['0:data+barrier', '1:data+barrier'] : ['0:data', '1:data']);
      expect(kinds(second)).toEqual(['0:watermark', '1:watermark']);
      expect(o.pending).toBe(0);
    }
    // without control envelopes there is no second wave
    const o = new Outbox('p');
    o.addDestination('s1', makeDestination('st', sh, MP), 1);
    o.closeEpoch(1, [1, 2], false, [1]);
    o.take();
    o.emitKeyed('s1', 0, undefined, payload(1));
    expect(o.take().records[0]!.waves).toHaveLength(1);
  });

  it('pending counts the packets a flush would write: open and full ones, and control envelopes deferred to the second wave', () => {
    const o = new Outbox('p');
    o.addDestination('s1', makeDestination('big', shards(1), MP));
    expect(o.pending).toBe(0);
    for (let i = 0; i < 6; i++) o.emitKeyed('s1', 0, undefined, new Uint8Array(100 * 1024));
    expect(o.pending).toBe(1); // a full packet
    o.emitControl({ kind: 'watermark', epoch: 0, watermark: 5, idle: false });
    expect(o.pending).toBe(2); // and the watermark deferred to the second wave
    o.emitKeyed('s1', 0, undefined, payload(1));
    expect(o.pending).toBe(3); // and the open packet
    o.take();
    expect(o.pending).toBe(0);
  });

  it('refuses to switch shards in the middle of an epoch routed by the old ones', () => {
    const o = new Outbox('p');
    o.addDestination('s1', makeDestination('st', shards(2), MP), 1);
    o.emitKeyed('s1', 3, undefined, payload(1));
    expect(() => o.replaceDestination('s1', makeDestination('st', shards(4), MP))).toThrow(/RESHARD_UNCOORDINATED|rescale --in-place/);
  });

  it('an output whose event time the wire cannot carry fails where it is emitted, and takes no sequence number', () => {
    const sh = shards(1);
    const o = new Outbox('s0:shardId-000000000000');
    o.addDestination('s1', makeDestination('stream-s1', sh, MP));
    o.epoch = 2;
    // outside a record it fails at the write; the next output takes the number it did not
    expect(() => o.emitKeyed('s1', 3, 1.5, payload(1))).toThrow(RangeError);
    expect(() => o.emitRebalance('s1', 2 ** 60, payload(2))).toThrow(RangeError);
    // inside a record it fails at the emit, while the record can still be undone whole
    o.beginRecord();
    o.emitKeyed('s1', 3, 1_000, payload(3));
    expect(() => o.emitKeyed('s1', 3, Number.NaN, payload(4))).toThrow(/event time must be a whole number of ms/);
    expect(() => o.emitBroadcast('s1', Number.POSITIVE_INFINITY, payload(5))).toThrow(/event time must be a whole number of ms/);
    o.rollbackRecord();
    o.emitKeyed('s1', 3, 2_000, payload(6));
    o.closeEpoch(3, [1, 1], false);
    const list = byShard(o.take().records[0]!.waves.flat(), sh).get(0)!;
    // a gap in the numbers, or a barrier counting an envelope never written, would hold the next stage at this barrier
    expect(list.map((e) => (e.kind === 'data' ? [e.seq, e.payload[0]] : [e.kind, e.kind === 'barrier' ? e.count : -1]))).toEqual([
      [0, 6],
      ['barrier', 1],
    ]);
  });
});
