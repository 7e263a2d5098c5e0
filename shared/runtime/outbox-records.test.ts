import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePacket, type Envelope } from '../codec/envelope.js';
import { evenHashRanges } from '../adapters/memory/memory-ports.js';
import { makeDestination, Outbox } from './outbox.js';
import type { ShardInfo } from './ports.js';

const MP = 16;

function shards(n: number): ShardInfo[] {
  return evenHashRanges(n).map((r, i) => ({ shardId: `shardId-${String(i).padStart(12, '0')}`, startingHashKey: r.start.toString(), endingHashKey: r.end.toString() }));
}

type Emit =
  | { kind: 'keyed'; stage: string; g: number; ts: number | undefined; input: number }
  | { kind: 'rebalance'; stage: string; ts: number | undefined; input: number }
  | { kind: 'broadcast'; stage: string; ts: number | undefined; input: number }
  | { kind: 'control'; watermark: number }
  | { kind: 'upsert'; sink: string; key: string }
  | { kind: 'collect'; sink: string; value: number };

const stageArb = fc.constantFrom('s1', 's2');
const tsArb = fc.option(fc.nat(10_000), { nil: undefined });
const emitArb: fc.Arbitrary<Emit> = fc.oneof(
  fc.record({ kind: fc.constant('keyed' as const), stage: stageArb, g: fc.nat(MP - 1), ts: tsArb, input: fc.nat(2) }),
  fc.record({ kind: fc.constant('rebalance' as const), stage: stageArb, ts: tsArb, input: fc.nat(2) }),
  fc.record({ kind: fc.constant('broadcast' as const), stage: stageArb, ts: tsArb, input: fc.nat(2) }),
  fc.record({ kind: fc.constant('control' as const), watermark: fc.nat(10_000) }),
  fc.record({ kind: fc.constant('upsert' as const), sink: fc.constantFrom('t1', 't2'), key: fc.constantFrom('a', 'b', 'c') }),
  fc.record({ kind: fc.constant('collect' as const), sink: fc.constantFrom('c1', 'c2'), value: fc.nat(99) }),
);
/** a record: what it emits while applied, and whether its function then succeeds */
const recordArb = fc.record({ emits: fc.array(emitArb, { maxLength: 6 }), ok: fc.boolean() });

function outbox(routed: boolean): Outbox {
  const o = new Outbox('p');
  o.addDestination('s1', makeDestination('one', shards(2), MP), 1);
  o.addDestination('s2', makeDestination('two', shards(3), MP), 2);
  o.closeEpoch(1, [1, 2, 3], false, routed ? [2] : []);
  o.take();
  return o;
}

let n = 0;
function emit(o: Outbox, e: Emit): void {
  const body = new Uint8Array([n++ & 0xff, 7]);
  if (e.kind === 'keyed') o.emitKeyed(e.stage, e.g, e.ts, body, e.input);
  else if (e.kind === 'rebalance') o.emitRebalance(e.stage, e.ts, body, e.input);
  else if (e.kind === 'broadcast') o.emitBroadcast(e.stage, e.ts, body, e.input);
  else if (e.kind === 'control') o.emitControl({ kind: 'watermark', epoch: 1, watermark: e.watermark, idle: false });
  else if (e.kind === 'upsert') o.upsert(e.sink, `table-${e.sink}`, 'pk', e.key, { v: body[0] });
  else o.collect(e.sink, e.value);
}

/**
 * Data envelopes an emit counts for the RecordsOut metric: one, or one per shard for a broadcast
 * (routed by key group: one, as each receiving shard applies it once whatever key groups it holds).
 */
function dataEnvelopes(e: Emit, routed: boolean): number {
  if (e.kind === 'keyed' || e.kind === 'rebalance') return 1;
  if (e.kind === 'broadcast') return routed && e.stage === 's2' ? 1 : e.stage === 's1' ? 2 : 3;
  return 0;
}

/** what a flush hands out, decoded: per stream, per wave, per hash key, the envelopes in order */
function flushed(o: Outbox) {
  const t = o.take();
  return {
    records: t.records.map((r) => ({ stream: r.stream, waves: r.waves.map((w) => w.map((x) => ({ hashKey: x.hashKey, envelopes: decodePacket(x.data).envelopes as Envelope[] }))) })),
    upserts: t.upserts,
    collected: t.collected,
  };
}

describe('Outbox: a record emits only if it succeeds', () => {
  // A record's outputs wait until its function returns: one that throws emits nothing and takes no
  // sequence number, so a replay that skips it (its record goes to the dead letters) numbers every
  // other output the same. The oracle emits the succeeding records' outputs straight away.
  it('outputs of records applied one by one equal the outputs of only the records that succeeded, in order', () => {
    fc.assert(
      fc.property(fc.boolean(), fc.array(recordArb, { maxLength: 25 }), fc.nat(25), (routed, records, flushAt) => {
        const staged = outbox(routed);
        const direct = outbox(routed);
        let recordsOut = 0;
        const got: unknown[] = [];
        const want: unknown[] = [];
        records.forEach((r, i) => {
          staged.beginRecord();
          n = i * 16;
          for (const e of r.emits) emit(staged, e);
          // nothing leaves while the record is applied
          expect(staged.pending).toBe(direct.pending);
          if (r.ok) staged.commitRecord();
          else staged.rollbackRecord();
          n = i * 16;
          if (r.ok) for (const e of r.emits) emit(direct, e);
          expect(staged.pending).toBe(direct.pending);
          expect(staged.dataOut).toBe(direct.dataOut);
          if (r.ok) recordsOut += r.emits.reduce((a, e) => a + dataEnvelopes(e, routed), 0);
          expect(staged.dataOut).toBe(recordsOut);
          if (i === flushAt) {
            got.push(flushed(staged));
            want.push(flushed(direct));
          }
        });
        got.push(flushed(staged));
        want.push(flushed(direct));
        expect(got).toEqual(want);
      }),
      { numRuns: 300 },
    );
  });

  it('a record that fails after emitting leaves the next record numbered as if it had never run', () => {
    const o = outbox(false);
    o.beginRecord();
    o.emitKeyed('s1', 0, 1, new Uint8Array([1]));
    o.collect('c1', 'lost');
    o.rollbackRecord();
    o.beginRecord();
    o.emitKeyed('s1', 0, 2, new Uint8Array([2]));
    o.collect('c1', 'kept');
    o.commitRecord();
    const t = flushed(o);
    expect(t.records.flatMap((r) => r.waves.flat().flatMap((x) => x.envelopes))).toEqual([expect.objectContaining({ kind: 'data', seq: 0, timestamp: 2 })]);
    expect(t.collected).toEqual([{ sink: 'c1', outputs: [{ producer: 'p', epoch: 1, seq: 0, value: 'kept' }] }]);
  });

  it('after a record failed, what is emitted outside any record (a watermark, a barrier) goes out at once', () => {
    const o = outbox(false);
    o.beginRecord();
    o.emitKeyed('s1', 0, 1, new Uint8Array([1]));
    o.rollbackRecord();
    o.emitControl({ kind: 'watermark', epoch: 1, watermark: 9, idle: false });
    expect(o.pending).toBe(5);
    const t = flushed(o);
    expect(t.records.flatMap((r) => r.waves.flat().flatMap((x) => x.envelopes))).toEqual(Array.from({ length: 5 }, () => ({ kind: 'watermark', epoch: 1, watermark: 9, idle: false })));
  });
});

describe('Outbox: upsert generations and what a flush drops', () => {
  it('upserts carry the generation of a child that took over from its parents, in that epoch only', () => {
    const o = new Outbox('child');
    o.startEpoch(4);
    o.upsert('t', 'T', 'pk', 'a', { v: 1 });
    o.generation = 2;
    o.upsert('t', 'T', 'pk', 'b', { v: 2 });
    o.closeEpoch(5, [1], false);
    o.upsert('t', 'T', 'pk', 'c', { v: 3 });
    expect(o.pending).toBe(3);
    expect(o.take().upserts).toEqual([
      {
        table: 'T',
        keyAttribute: 'pk',
        writes: [
          { key: 'a', item: { v: 1 }, producer: 'child', epoch: 4, seq: 0 },
          { key: 'b', item: { v: 2 }, producer: 'child', epoch: 4, seq: 1, generation: 2 },
          { key: 'c', item: { v: 3 }, producer: 'child', epoch: 5, seq: 0 },
        ],
      },
    ]);
  });

  it('a parent replayed only to hand over its state emits nothing: discard drops every pending output', () => {
    const o = outbox(true);
    o.emitKeyed('s1', 3, undefined, new Uint8Array([1]));
    o.emitKeyed('s2', 3, undefined, new Uint8Array([1]));
    o.emitControl({ kind: 'tick', epoch: 1, time: 5 });
    o.upsert('t', 'T', 'pk', 'a', {});
    o.collect('c', 1);
    expect(o.pending).toBeGreaterThan(0);
    o.discard();
    expect(o.pending).toBe(0);
    expect(o.take()).toEqual({ records: [], upserts: [], collected: [] });
  });

  it('pending counts sink writes, and control envelopes of an epoch routed by key group once per key group', () => {
    const o = new Outbox('p');
    o.addDestination('s1', makeDestination('st', shards(2), MP), 1);
    o.closeEpoch(1, [1, 2], false, [1]);
    o.take();
    o.upsert('t', 'T', 'pk', 'a', {});
    o.upsert('t', 'T', 'pk', 'b', {});
    o.collect('c', 1);
    expect(o.pending).toBe(3);
    o.emitControl({ kind: 'tick', epoch: 1, time: 5 });
    o.emitControl({ kind: 'tick', epoch: 1, time: 6 });
    expect(o.pending).toBe(3 + MP);
  });

  it('a destination that is not there is named when asked to switch shards', () => {
    expect(() => new Outbox('p').replaceDestination('s9', makeDestination('st', shards(1), MP))).toThrow(/p has no destination for stage s9/);
  });
});
