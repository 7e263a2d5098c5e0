import { describe, expect, it } from 'vitest';
import { decodePacket } from '../codec/envelope.js';
import { evenHashRanges } from '../adapters/memory/memory-ports.js';
import { hashKeyOfKeyGroup } from '../plan/key-groups.js';
import { makeDestination, Outbox } from './outbox.js';
import type { ShardInfo } from './ports.js';

const MP = 16;
const MAX_HASH = (1n << 128n) - 1n;

function shards(n: number): ShardInfo[] {
  return evenHashRanges(n).map((r, i) => ({ shardId: `shardId-${String(i).padStart(12, '0')}`, startingHashKey: r.start.toString(), endingHashKey: r.end.toString() }));
}
const shard = (i: number, start: bigint, end: bigint): ShardInfo => ({ shardId: `shardId-${String(i).padStart(12, '0')}`, startingHashKey: start.toString(), endingHashKey: end.toString() });
const h = (g: number) => BigInt(hashKeyOfKeyGroup(g, MP));

describe('makeDestination: hash key ranges are inclusive at both ends', () => {
  it('a key group whose hash key is exactly a shard\'s first or last hash key goes to that shard', () => {
    // a split can happen at any hash key, also at the one a key group's records carry
    const d = makeDestination('st', [shard(0, 0n, h(5) - 1n), shard(1, h(5), h(9)), shard(2, h(9) + 1n, MAX_HASH)], MP);
    expect(Array.from(d.shardOfKeyGroup)).toEqual(Array.from({ length: MP }, (_, g) => (g < 5 ? 0 : g <= 9 ? 1 : 2)));
  });

  it('fails when the open shards leave key groups uncovered below them, or between them', () => {
    const [low, high] = shards(2) as [ShardInfo, ShardInfo];
    expect(() => makeDestination('st', [high], MP)).toThrow('no open shard of st covers key group 0');
    expect(() => makeDestination('st', [shard(0, 0n, h(3)), shard(1, h(5), MAX_HASH)], MP)).toThrow('no open shard of st covers key group 4');
    expect(makeDestination('st', [high, low], MP).shards).toEqual([low, high]);
  });
});

describe('switching a destination to the shards of its resharded stream', () => {
  it('is refused once records of the epoch were routed by the old shards, on every one of them or some', () => {
    for (const emit of [(o: Outbox) => o.emitBroadcast('s1', undefined, new Uint8Array([1])), (o: Outbox) => o.emitKeyed('s1', 0, undefined, new Uint8Array([1]))]) {
      const o = new Outbox('p');
      o.addDestination('s1', makeDestination('st', shards(2), MP), 1);
      emit(o);
      expect(() => o.replaceDestination('s1', makeDestination('st', shards(4), MP))).toThrow(expect.objectContaining({ code: 'RESHARD_UNCOORDINATED' }));
    }
  });

  it('is allowed before any record of the epoch went out: the next records and the barrier go by the new shards', () => {
    const o = new Outbox('p');
    o.addDestination('s1', makeDestination('st', shards(2), MP), 1);
    o.closeEpoch(1, [1, 2], false);
    o.take();
    const next = shards(4);
    o.replaceDestination('s1', makeDestination('st', next, MP));
    o.emitBroadcast('s1', undefined, new Uint8Array([1]));
    o.emitBroadcast('s1', undefined, new Uint8Array([2]));
    o.closeEpoch(2, [1, 4], false);
    const recs = o.take().records[0]!.waves.flat();
    expect(recs.map((r) => r.hashKey).sort()).toEqual(next.map((s) => s.startingHashKey).sort());
    // every shard: its two broadcasts numbered 0 and 1, then a barrier counting them
    for (const r of recs) {
      expect(decodePacket(r.data).envelopes.map((e) => (e.kind === 'data' ? e.seq : e.kind === 'barrier' ? `barrier ${e.count}` : e.kind))).toEqual([0, 1, 'barrier 2']);
    }
  });
});
