import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePacket, decodePacketColumns, encodePacket, PacketColumns, type DataEnvelope } from '../codec/envelope.js';
import { DataUnit } from './inner-packets.js';

const data: fc.Arbitrary<DataEnvelope> = fc.record(
  {
    kind: fc.constant('data' as const),
    epoch: fc.nat({ max: 2 ** 40 }),
    seq: fc.nat({ max: 2 ** 40 }),
    keyGroup: fc.nat({ max: 32_767 }),
    timestamp: fc.option(fc.integer({ min: -(2 ** 47), max: 2 ** 47 }), { nil: undefined }),
    payload: fc.uint8Array({ maxLength: 60 }),
    input: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
  },
  { requiredKeys: ['kind', 'epoch', 'seq', 'keyGroup', 'timestamp', 'payload'] },
);
const plain = (e: DataEnvelope) => ({ epoch: e.epoch, seq: e.seq, keyGroup: e.keyGroup, timestamp: e.timestamp, payload: [...e.payload], input: e.input || undefined });

describe('DataUnit (one unit pointed at each data record of a packet in turn)', () => {
  it('pointed at row i, is the envelope decodePacket gives; a copy keeps it after the unit moves on', () => {
    fc.assert(
      fc.property(fc.string(), fc.array(data, { minLength: 1, maxLength: 30 }), (producer, envelopes) => {
        const bytes = encodePacket(producer, envelopes);
        const want = decodePacket(bytes).envelopes as DataEnvelope[];
        const cols = new PacketColumns();
        decodePacketColumns(bytes, cols);
        const unit = DataUnit.reusable();
        const copies: DataUnit[] = [];
        for (let i = 0; i < cols.count; i++) {
          unit.point(cols, i, `pos${i}`);
          expect(plain(unit)).toEqual(plain(want[i]!));
          expect([unit.producer, unit.position, unit.index]).toEqual([producer, `pos${i}`, i]);
          copies.push(unit.copy());
        }
        copies.forEach((c, i) => expect([plain(c), c.position, c.index]).toEqual([plain(want[i]!), `pos${i}`, i]));
      }),
    );
  });
});
