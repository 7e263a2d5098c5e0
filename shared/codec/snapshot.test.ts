import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import type { StateRow } from '../runtime/ports.js';
import { TimerIndex, type Timer } from '../runtime/timers.js';
import { encodePayload } from './payload.js';
import { decodeDelta, deltaValue, encodeDelta, type SnapshotExtras } from './snapshot.js';

const valuesArb = fc.dictionary(fc.constantFrom('count', 'sum', 'list', 'ü', 'a b'), fc.uint8Array({ maxLength: 24 }), { maxKeys: 3 });
const rowArb: fc.Arbitrary<StateRow> = fc.record({
  operatorId: fc.constantFrom('op', 'window-1', 'join'),
  keyGroup: fc.nat(127),
  key: fc.string({ maxLength: 10, unit: 'grapheme' }),
  values: valuesArb,
});
const extrasArb: fc.Arbitrary<SnapshotExtras> = fc.record(
  {
    timers: fc.array(fc.tuple(fc.constantFrom('event-time' as const, 'processing-time' as const), fc.constant('op'), fc.string({ maxLength: 6 }), fc.nat(127), fc.nat())),
    channels: fc.array(fc.tuple(fc.string({ maxLength: 12 }), fc.integer(), fc.boolean())),
    watermark: fc.option(fc.integer(), { nil: null }),
    processingTime: fc.nat(),
    source: fc.option(fc.record({ maxTs: fc.integer(), emitted: fc.integer(), idle: fc.boolean(), lastActive: fc.nat(), dataSinceTick: fc.boolean() }), { nil: null }),
    ended: fc.array(fc.string({ maxLength: 8 })),
    finished: fc.boolean(),
    reshard: fc.array(fc.nat(9)),
    topology: fc.array(fc.integer({ min: 1, max: 8 })),
  },
  { requiredKeys: ['timers', 'channels', 'watermark', 'processingTime', 'source'] },
);

/** msgpackr alone, with the payload codec's options */
const reference = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number' });

const timerArb: fc.Arbitrary<Timer> = fc.record({
  domain: fc.constantFrom('event-time' as const, 'processing-time' as const),
  operatorId: fc.constantFrom('op', 'window-1', 'jöin'),
  key: fc.oneof(fc.string({ maxLength: 8, unit: 'grapheme' }), fc.string({ maxLength: 40 }), fc.constantFrom('k1', 'k2', 'k3')),
  keyGroup: fc.oneof(fc.nat(127), fc.nat(70_000)),
  time: fc.oneof(fc.nat(20), fc.integer({ min: -(2 ** 40), max: 2 ** 40 }), fc.constantFrom(1.7e12, 2 ** 32, 0.5, -1)),
});

/** a row as a restore compares it: values as plain byte arrays */
const plain = (r: StateRow) => ({ ...r, values: Object.fromEntries(Object.entries(r.values).map(([k, v]) => [k, [...v]])) });

describe('checkpoint delta codec', () => {
  it('a restore reads back every row and everything else the snapshot held', () => {
    fc.assert(
      fc.property(fc.array(rowArb, { maxLength: 12 }), fc.option(extrasArb, { nil: undefined }), (rows, extras) => {
        const back = decodeDelta(encodeDelta(rows, extras));
        expect(back.rows.map(plain)).toEqual(rows.map(plain));
        // state values come back as byte arrays the state cache can keep and compare
        for (const r of back.rows) for (const v of Object.values(r.values)) expect(Object.getPrototypeOf(v)).toBe(Uint8Array.prototype);
        expect(back.extras).toEqual(extras);
      }),
      { numRuns: 200 },
    );
  });

  it('rows written straight are the bytes of the delta value encoded whole (stored deltas stay readable)', () => {
    // cleared keys (no values), several states, non-ASCII keys and state names, empty values, Buffers
    const bytesArb = fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ maxLength: 8 }).map((b) => Buffer.from(b)));
    const anyRow: fc.Arbitrary<StateRow> = fc.record({
      operatorId: fc.constantFrom('op', 'window-1', 'jöin', 'x'.repeat(40)),
      keyGroup: fc.oneof(fc.nat(127), fc.nat(70_000)),
      key: fc.oneof(fc.string({ maxLength: 10, unit: 'grapheme' }), fc.string({ maxLength: 300 })),
      values: fc.dictionary(fc.constantFrom('count', 'sum', 'list', 'ü', 'a b', '1', '__proto__'), bytesArb, { maxKeys: 4 }),
    });
    fc.assert(
      fc.property(fc.array(anyRow, { maxLength: 20 }), fc.option(extrasArb, { nil: undefined }), (rows, extras) => {
        expect([...encodeDelta(rows, extras)]).toEqual([...encodePayload(deltaValue(rows, extras))]);
      }),
      { numRuns: 300 },
    );
    // more rows than fit the writer's chunk
    const many: StateRow[] = Array.from({ length: 5000 }, (_, i) => ({ operatorId: 'op', keyGroup: i % 128, key: `user-${i}`, values: i % 9 ? { count: new Uint8Array(20).fill(i) } : ({} as Record<string, Uint8Array>) }));
    expect([...encodeDelta(many)]).toEqual([...encodePayload(deltaValue(many))]);
  });

  it("timers written from the bytes kept on them are msgpackr's bytes of their plain rows, delta after delta", () => {
    const base = { channels: [], watermark: null, processingTime: 0, source: null };
    const check = (idx: TimerIndex, rows: readonly StateRow[]) => {
      const bytes = encodeDelta(rows, { ...base, timers: idx.snapshotRows() });
      // compared whole (a diff of two long byte lists takes long to print and shrink)
      expect(Buffer.from(bytes).equals(reference.pack(deltaValue(rows, { ...base, timers: idx.toJSON() })))).toBe(true);
      expect(decodeDelta(bytes).extras?.timers).toEqual(idx.toJSON());
    };
    // timers added and deleted between deltas: most are written again from their kept bytes
    const step = fc.tuple(fc.array(timerArb, { maxLength: 12 }), fc.array(fc.nat(), { maxLength: 4 }));
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 6 }), fc.array(rowArb, { maxLength: 4 }), (steps, rows) => {
        const idx = new TimerIndex();
        const added: Timer[] = [];
        for (const [adds, deletes] of steps) {
          for (const t of adds) {
            idx.add(t);
            added.push(t);
          }
          for (const d of deletes) if (added.length) idx.delete(added.splice(d % added.length, 1)[0]!);
          check(idx, rows);
        }
      }),
      { numRuns: 300 },
    );
    // more rows than fit the writer's chunk, written twice
    const idx = new TimerIndex();
    for (let i = 0; i < 6000; i++) idx.add({ domain: i % 3 ? 'event-time' : 'processing-time', operatorId: 'window-1', key: `user-${i}-${'x'.repeat(i % 30)}`, keyGroup: i % 128, time: 1.7e12 + (i % 7) * 10_000 });
    const rows: StateRow[] = Array.from({ length: 300 }, (_, i) => ({ operatorId: 'window-1', keyGroup: i % 128, key: `user-${i}`, values: { w: new Uint8Array(30).fill(i) } }));
    check(idx, rows);
    check(idx, rows);
    for (let i = 0; i < 6000; i += 5) idx.add({ domain: 'event-time', operatorId: 'window-1', key: `later-${i}`, keyGroup: i % 128, time: 1.7e12 + i });
    check(idx, rows);
  });

  it('a spill part (rows, no extras) reads back with no extras, not an empty snapshot', () => {
    const rows: StateRow[] = [{ operatorId: 'op', keyGroup: 3, key: 'k', values: { count: new Uint8Array([7]) } }];
    const back = decodeDelta(encodeDelta(rows));
    expect(back.extras).toBeUndefined();
    expect(back.rows.map(plain)).toEqual(rows.map(plain));
  });

  it('refuses bytes that are not a delta of this format (another version, no rows, nothing) as corrupt', () => {
    const corrupt = expect.objectContaining({ code: 'DELTA_CORRUPT', message: 'corrupt checkpoint delta' });
    for (const value of [null, 0, { v: 1, rows: [], extras: null }, { rows: [], extras: null }, { v: 2, rows: 'rows', extras: null }, { v: 2, extras: null }]) {
      expect(() => decodeDelta(encodePayload(value))).toThrow(corrupt);
    }
    expect(decodeDelta(encodePayload({ v: 2, rows: [], extras: null }))).toEqual({ rows: [], extras: undefined });
  });
});
