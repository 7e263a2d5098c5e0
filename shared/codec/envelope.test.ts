import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  DATA_KIND,
  decodePacket,
  decodePacketColumns,
  decodeSourceControl,
  encodePacket,
  encodeSourceControl,
  isPacket,
  PacketBuilder,
  PacketColumns,
  type DataEnvelope,
  type Envelope,
  type SourceControl,
} from './envelope.js';
import { decodePayload, decodePayloadAt, encodePayload } from './payload.js';

const nat = fc.nat({ max: 2 ** 40 });
/** event times in ms: integers, within ±2^47 so deltas between them stay codable */
const timestamp = fc.option(fc.integer({ min: -(2 ** 47), max: 2 ** 47 }), { nil: undefined });

const dataEnvelope: fc.Arbitrary<DataEnvelope> = fc.record({
  kind: fc.constant('data' as const),
  epoch: nat,
  seq: nat,
  keyGroup: fc.nat({ max: 32_767 }),
  timestamp,
  payload: fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.uint8Array({ minLength: 65, maxLength: 300 })),
});

const envelope: fc.Arbitrary<Envelope> = fc.oneof(
  { arbitrary: dataEnvelope, weight: 4 },
  fc.record({
    kind: fc.constant('barrier' as const),
    checkpointId: nat,
    count: nat,
    topology: fc.array(fc.nat({ max: 10_000 }), { maxLength: 6 }),
    savepoint: fc.boolean(),
    reshard: fc.array(fc.nat({ max: 20 }), { minLength: 1, maxLength: 3 }),
  }, { requiredKeys: ['kind', 'checkpointId', 'count', 'topology', 'savepoint'] }),
  fc.record({ kind: fc.constant('watermark' as const), epoch: nat, watermark: fc.integer({ min: -(2 ** 51), max: 2 ** 51 }), idle: fc.boolean() }),
  fc.record({ kind: fc.constant('tick' as const), epoch: nat, time: fc.maxSafeNat() }),
  fc.record({ kind: fc.constant('end' as const), epoch: nat }),
);

/** A stream of data envelopes as an instance emits them: one epoch, consecutive seqs, nearby times. */
const typicalRun = fc
  .record({
    epoch: fc.nat({ max: 100_000 }),
    firstSeq: fc.nat({ max: 1_000_000 }),
    start: fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 }),
    items: fc.array(
      fc.record({ keyGroup: fc.nat({ max: 127 }), dt: fc.integer({ min: -5_000, max: 60_000 }), payload: fc.uint8Array({ minLength: 20, maxLength: 120 }) }),
      { minLength: 2, maxLength: 100 },
    ),
  })
  .map(({ epoch, firstSeq, start, items }) => {
    let ts = start;
    return items.map((it, i): DataEnvelope => {
      ts += it.dt;
      return { kind: 'data', epoch, seq: firstSeq + i, keyGroup: it.keyGroup, timestamp: ts, payload: it.payload };
    });
  });

const norm = (envs: readonly Envelope[]) => envs.map((e) => (e.kind === 'data' ? { ...e, payload: [...e.payload] } : e));

describe('packets', () => {
  it('round-trip every envelope kind, in any mix and order', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60, unit: 'grapheme' }), fc.array(envelope, { maxLength: 60 }), (producer, envs) => {
        const p = decodePacket(encodePacket(producer, envs));
        expect(p.producer).toBe(producer);
        expect(norm(p.envelopes)).toEqual(norm(envs));
      }),
      { numRuns: 300 },
    );
  });

  it('PacketBuilder grows incrementally and agrees with encodePacket', () => {
    fc.assert(
      fc.property(fc.array(envelope, { maxLength: 30 }), (envs) => {
        const b = new PacketBuilder('s0:shardId-000000000001');
        let size = b.size;
        for (const e of envs) {
          b.add(e);
          expect(b.size).toBeGreaterThan(size);
          size = b.size;
        }
        expect(b.envelopes).toBe(envs.length);
        expect([...b.finish()]).toEqual([...encodePacket('s0:shardId-000000000001', envs)]);
      }),
    );
  });

  it('builders open side by side and finished in any order keep their packets (finished buffers are reused)', () => {
    // payloads up to 3 KB, so that packets outgrow a builder's first buffer and finished ones get reused
    const big = fc.record({ kind: fc.constant('data' as const), epoch: nat, seq: nat, keyGroup: fc.nat({ max: 127 }), timestamp, payload: fc.uint8Array({ maxLength: 3_000 }) });
    const step = fc.record({ builder: fc.nat({ max: 3 }), finish: fc.boolean(), e: fc.oneof({ arbitrary: big, weight: 3 }, envelope) });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 80 }), (steps) => {
        const open: Array<{ b: PacketBuilder; envs: Envelope[] } | undefined> = [undefined, undefined, undefined, undefined];
        const done: Array<{ packet: Uint8Array; copy: number[]; producer: string; envs: Envelope[] }> = [];
        const finish = (i: number) => {
          const o = open[i]!;
          const packet = o.b.finish();
          done.push({ packet, copy: [...packet], producer: o.b.producer, envs: o.envs });
          open[i] = undefined;
          expect(() => o.b.add({ kind: 'end', epoch: 0 })).toThrow(/after finish/);
        };
        for (const [n, s] of steps.entries()) {
          if (s.finish && open[s.builder]) finish(s.builder);
          else {
            const o = (open[s.builder] ??= { b: new PacketBuilder(`p${n}`), envs: [] });
            o.b.add(s.e);
            o.envs.push(s.e);
          }
        }
        for (let i = 0; i < open.length; i++) if (open[i]) finish(i);
        for (const d of done) {
          expect([...d.packet]).toEqual(d.copy);
          const p = decodePacket(d.packet);
          expect(p.producer).toBe(d.producer);
          expect(norm(p.envelopes)).toEqual(norm(d.envs));
        }
      }),
      { numRuns: 200 },
    );
  });

  it('keeps the per-envelope overhead of typical data envelopes at 12 bytes or less', () => {
    fc.assert(
      fc.property(typicalRun, (envs) => {
        const b = new PacketBuilder('s0:shardId-000000000003');
        let total = 0;
        envs.forEach((e, i) => {
          const before = b.size;
          b.add(e);
          const overhead = b.size - before - e.payload.length;
          total += overhead;
          // the first envelope of a packet carries its epoch, seq and full timestamp
          if (i > 0) expect(overhead).toBeLessThanOrEqual(12);
        });
        expect(total / envs.length).toBeLessThanOrEqual(12);
        expect(norm(decodePacket(b.finish()).envelopes)).toEqual(norm(envs));
      }),
    );
  });

  it('a packed msgpack record costs little more than its payload', () => {
    const envs: DataEnvelope[] = Array.from({ length: 500 }, (_, i) => ({
      kind: 'data',
      epoch: 17,
      seq: i,
      keyGroup: i % 64,
      timestamp: 1_700_000_000_000 + i * 37,
      payload: encodePayload({ userId: `u${i % 50}`, url: `/product/${i}`, ts: 1_700_000_000_000 + i * 37 }),
    }));
    const payloadBytes = envs.reduce((a, e) => a + e.payload.length, 0);
    const packet = encodePacket('s0:shardId-000000000000', envs);
    expect((packet.length - payloadBytes) / envs.length).toBeLessThanOrEqual(8);
  });

  it('isPacket recognises packets and nothing else it will meet', () => {
    fc.assert(
      fc.property(fc.array(envelope, { maxLength: 5 }), (envs) => {
        expect(isPacket(encodePacket('p', envs))).toBe(true);
      }),
    );
    const enc = new TextEncoder();
    expect(isPacket(new Uint8Array([]))).toBe(false);
    expect(isPacket(new Uint8Array([0x53]))).toBe(false);
    expect(isPacket(new Uint8Array([0x53, 0x02]))).toBe(false);
    expect(isPacket(enc.encode('{"userId":"a"}'))).toBe(false);
    expect(isPacket(enc.encode('SLUICE'))).toBe(false);
    expect(isPacket(encodeSourceControl({ kind: 'end' }))).toBe(false);
  });

  it('fails with a RangeError on a bad magic or version', () => {
    expect(() => decodePacket(new TextEncoder().encode('{"a":1}'))).toThrow(RangeError);
    const p = encodePacket('p', [{ kind: 'end', epoch: 1 }]);
    p[1] = 9;
    expect(() => decodePacket(p)).toThrow(/bad magic or version/);
  });

  it('fails with a RangeError on every truncation of a packet', () => {
    fc.assert(
      fc.property(fc.array(envelope, { minLength: 1, maxLength: 10 }), (envs) => {
        const p = encodePacket('producer', envs);
        for (let cut = 2; cut < p.length; cut++) expect(() => decodePacket(p.subarray(0, cut))).toThrow(RangeError);
      }),
      { numRuns: 50 },
    );
  });

  it('fails with a RangeError on an unknown envelope kind', () => {
    const p = encodePacket('p', [{ kind: 'end', epoch: 1 }]);
    const header = p.length - 2; // [header, varint epoch=1]
    expect(p[header]).toBe(4);
    p[header] = 7;
    expect(() => decodePacket(p)).toThrow(/unknown envelope kind 7/);
  });

  it('never fails with anything but a RangeError on random bytes after the magic', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (tail) => {
        const bytes = new Uint8Array([0x53, 0x01, ...tail]);
        try {
          decodePacket(bytes);
        } catch (err) {
          expect(err).toBeInstanceOf(RangeError);
        }
      }),
      { numRuns: 500 },
    );
  });

  // ENGINE BUG (envelope.ts, PacketBuilder.add): add() counts the envelope and writes its header
  // before encoding the fields; when a field cannot be encoded (a fractional or non-finite event
  // timestamp, e.g. `timestamp: (c) => c.ts` with ts = 1700000000000.25) it throws and leaves a
  // half-written envelope in the packet. The outbox keeps using that builder, so every envelope of
  // the packet is lost downstream (the whole packet becomes a "malformed packet" dead letter) and
  // the channel's barrier count can never be met. Fix: validate (or encode into a scratch writer)
  // before touching count and buffer, and have the source reject or normalise bad timestamps.
  it('writes the bytes it wrote before data envelopes were added from their fields (a fixed sample, by digest)', () => {
    // digest of these packets as written by the commit before `addData` (64c5a0c); any change to a
    // data envelope's bytes (flags, deltas, the input) changes it
    const data = fc.record(
      {
        kind: fc.constant('data' as const),
        epoch: fc.oneof(nat, fc.nat({ max: 3 })),
        seq: fc.oneof(nat, fc.nat({ max: 5 })),
        keyGroup: fc.nat({ max: 32_767 }),
        timestamp,
        payload: fc.uint8Array({ maxLength: 100 }),
        input: fc.option(fc.nat({ max: 300 }), { nil: undefined }),
      },
      { requiredKeys: ['kind', 'epoch', 'seq', 'keyGroup', 'timestamp', 'payload'] },
    );
    const env = fc.oneof(
      { arbitrary: data, weight: 5 },
      fc.record({ kind: fc.constant('watermark' as const), epoch: nat, watermark: fc.integer({ min: -(2 ** 51), max: 2 ** 51 }), idle: fc.boolean() }),
      fc.record({ kind: fc.constant('barrier' as const), checkpointId: nat, count: nat, topology: fc.array(fc.nat({ max: 99 }), { maxLength: 4 }), savepoint: fc.boolean() }),
    );
    const h = createHash('sha256');
    for (const envs of fc.sample(fc.array(env, { maxLength: 40 }), { seed: 42, numRuns: 500 })) {
      const b = new PacketBuilder('p');
      for (const e of envs) b.add(e);
      h.update(b.finish());
    }
    expect(h.digest('hex')).toBe('d41606bbe6791205cd179ad46dc3475d0b3b47f3a54bfbc15a852b0d89a0efb4');
  });

  it('addData writes what add writes of the same envelope, and a bad field leaves the packet intact', () => {
    const field = fc.record({ epoch: fc.nat({ max: 3 }), seq: fc.nat({ max: 5 }), keyGroup: fc.nat({ max: 300 }), timestamp, payload: fc.uint8Array({ maxLength: 80 }), input: fc.nat({ max: 2 }), bad: fc.boolean() });
    fc.assert(
      fc.property(fc.array(field, { maxLength: 30 }), (fs) => {
        const byFields = new PacketBuilder('p');
        const byObjects = new PacketBuilder('p');
        for (const f of fs) {
          if (f.bad) {
            // a fractional timestamp cannot be written: nothing of it stays, and the next delta is from the last good one
            expect(() => byFields.addData(f.epoch, f.seq, f.keyGroup, 0.5, f.payload, f.input)).toThrow(RangeError);
            continue;
          }
          byFields.addData(f.epoch, f.seq, f.keyGroup, f.timestamp, f.payload, f.input);
          byObjects.add({ kind: 'data', epoch: f.epoch, seq: f.seq, keyGroup: f.keyGroup, timestamp: f.timestamp, payload: f.payload, ...(f.input ? { input: f.input } : {}) });
        }
        expect(byFields.envelopes).toBe(byObjects.envelopes);
        expect(byFields.finish()).toEqual(byObjects.finish());
      }),
    );
  });

  it('an envelope that cannot be encoded leaves the packet intact', () => {
    const ok = (seq: number): DataEnvelope => ({ kind: 'data', epoch: 1, seq, keyGroup: 3, timestamp: 1_700_000_000_000, payload: new Uint8Array([1]) });
    const b = new PacketBuilder('p');
    b.add(ok(0));
    expect(() => b.add({ ...ok(1), timestamp: 1_700_000_000_000.25 })).toThrow(RangeError);
    b.add(ok(2));
    expect(norm(decodePacket(b.finish()).envelopes)).toEqual(norm([ok(0), ok(2)]));
  });
});

describe('PacketBuilder.addData of a range of a larger array', () => {
  it('writes the bytes addData writes of that range alone (small payloads copied byte by byte, large ones at once)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ before: fc.uint8Array({ maxLength: 40 }), payload: fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.uint8Array({ minLength: 65, maxLength: 300 })), after: fc.uint8Array({ maxLength: 40 }), seq: fc.nat(3) }), { minLength: 1, maxLength: 20 }),
        (rows) => {
          const ranged = new PacketBuilder('p');
          const whole = new PacketBuilder('p');
          let seq = 0;
          for (const r of rows) {
            seq += r.seq;
            const big = new Uint8Array([...r.before, ...r.payload, ...r.after]);
            ranged.addData(0, seq, 1, seq * 3, big, 0, r.before.length, r.before.length + r.payload.length);
            whole.addData(0, seq, 1, seq * 3, r.payload.slice(), 0);
          }
          expect(Buffer.from(ranged.finish()).equals(Buffer.from(whole.finish()))).toBe(true);
        },
      ),
      { numRuns: 200, seed: 20_261_204 },
    );
  });
});

describe('source control records', () => {
  const control: fc.Arbitrary<SourceControl> = fc.oneof(
    fc.record({
      kind: fc.constant('barrier' as const),
      checkpointId: fc.maxSafeNat(),
      topology: fc.array(fc.nat({ max: 100_000 }), { maxLength: 8 }),
      savepoint: fc.boolean(),
      reshard: fc.array(fc.nat({ max: 20 }), { minLength: 1, maxLength: 3 }),
      time: fc.maxSafeNat(),
    }, { requiredKeys: ['kind', 'checkpointId', 'topology', 'savepoint', 'time'] }),
    fc.record({ kind: fc.constant('tick' as const), time: fc.maxSafeNat() }),
    fc.record({ kind: fc.constant('end' as const) }),
  );

  it('round-trip', () => {
    fc.assert(
      fc.property(control, (c) => {
        expect(decodeSourceControl(encodeSourceControl(c))).toEqual(c);
      }),
    );
  });

  it('are never confused with user records (JSON, text, packets)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(decodeSourceControl(new TextEncoder().encode(JSON.stringify(v)))).toBeUndefined();
      }),
    );
    fc.assert(
      fc.property(fc.string(), (s) => {
        expect(decodeSourceControl(new TextEncoder().encode(s))).toBeUndefined();
      }),
    );
    expect(decodeSourceControl(encodePacket('p', [{ kind: 'end', epoch: 0 }]))).toBeUndefined();
    // the prefix alone is not a control record
    expect(decodeSourceControl(new TextEncoder().encode('\u0000SLUICE\u0000'))).toBeUndefined();
  });

  it('start with a NUL byte, which JSON and KPL records never do', () => {
    for (const c of [{ kind: 'end' }, { kind: 'tick', time: 5 }] as SourceControl[]) expect(encodeSourceControl(c)[0]).toBe(0);
  });

  it('fail with a RangeError on an unknown kind', () => {
    const b = encodeSourceControl({ kind: 'end' });
    b[b.length - 1] = 6;
    expect(() => decodeSourceControl(b)).toThrow(RangeError);
  });
});

describe('decodePacketColumns (the engine hot path: one reused set of columns)', () => {
  /** row i of the columns as the envelope it stands for */
  const row = (c: PacketColumns, i: number): unknown => {
    if (c.kind[i] !== DATA_KIND) return c.control[i];
    const t = c.timestamp[i]!;
    return { kind: 'data', epoch: c.epoch[i], seq: c.seq[i], keyGroup: c.keyGroup[i], timestamp: Number.isNaN(t) ? undefined : t, payload: [...c.bytes.subarray(c.payloadStart[i], c.payloadEnd[i])], input: c.input[i] || undefined };
  };
  const plain = (e: Envelope) => (e.kind === 'data' ? { kind: e.kind, epoch: e.epoch, seq: e.seq, keyGroup: e.keyGroup, timestamp: e.timestamp, payload: [...e.payload], input: e.input || undefined } : e);

  it('gives every packet of a sequence the envelopes it was encoded from, decoded into the same columns', () => {
    const packet = fc.record({ producer: fc.string(), envelopes: fc.array(envelope, { maxLength: 40 }) });
    fc.assert(
      fc.property(fc.array(packet, { minLength: 1, maxLength: 6 }), (packets) => {
        const c = new PacketColumns();
        for (const p of packets) {
          decodePacketColumns(encodePacket(p.producer, p.envelopes), c);
          expect(c.producer).toBe(p.producer);
          expect(Array.from({ length: c.count }, (_, i) => row(c, i))).toEqual(p.envelopes.map(plain));
        }
      }),
    );
  });

  it('names the producer of each packet, also after a packet of another producer of the same length or a malformed one', () => {
    const c = new PacketColumns();
    const names = ['ab', 'ab', 'ac', '', 'ac', 'ab'];
    for (const p of names) {
      decodePacketColumns(encodePacket(p, [{ kind: 'end', epoch: 0 }]), c);
      expect(c.producer).toBe(p);
      const broken = encodePacket('zz', [{ kind: 'end', epoch: 0 }]);
      expect(() => decodePacketColumns(broken.subarray(0, broken.length - 1), c)).toThrow(RangeError);
    }
  });

  it('fails on truncated packets as decodePacket does, leaving no rows', () => {
    const bytes = encodePacket('p', [{ kind: 'data', epoch: 0, seq: 0, keyGroup: 1, timestamp: 5, payload: encodePayload({ a: 1 }) }, { kind: 'end', epoch: 0 }]);
    const c = new PacketColumns();
    for (let n = 0; n < bytes.length; n++) {
      const cut = bytes.subarray(0, n);
      decodePacketColumns(bytes, c);
      let expected: unknown;
      try {
        decodePacket(cut);
      } catch (err) {
        expected = err;
      }
      expect(expected).toBeInstanceOf(RangeError);
      expect(() => decodePacketColumns(cut, c)).toThrow((expected as Error).message);
      expect(c.count).toBe(0);
    }
  });
});

describe('decodePayloadAt', () => {
  it('decodePayloadAt reads the value at a range of the packet, as decodePayload reads a copy', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.uint8Array({ maxLength: 20 }), fc.uint8Array({ maxLength: 20 }), (value, before, after) => {
        const p = encodePayload(value);
        const buf = new Uint8Array([...before, ...p, ...after]);
        expect(decodePayloadAt(buf, before.length, before.length + p.length)).toEqual(decodePayload(p));
      }),
    );
    // an empty range is malformed either way
    expect(() => decodePayloadAt(new Uint8Array([0x90, 0x90]), 1, 1)).toThrow();
  });
});

