/**
 * Append buffers (an interval join's rows at one event time): every version of a buffer keeps its
 * own items whatever is appended to it or to another version later — what a record's undo needs,
 * since it puts an older version back — and a map of buffers is stored exactly as a map of arrays.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { appendBufferMapSerializer, appended, bufferItems, type AppendBuffer } from './append-buffer.js';
import { job, WatermarkStrategies } from './index.js';
import { jsonSerializer } from './serializers.js';

describe('append buffers', () => {
  it('every version keeps its items, against copied arrays (appends to any earlier version, in any order)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(), fc.integer()), { maxLength: 60 }), (steps) => {
        const versions: Array<AppendBuffer<number> | undefined> = [undefined];
        const oracle: number[][] = [[]];
        for (const [pick, v] of steps) {
          const at = pick % versions.length;
          versions.push(appended(versions[at], v));
          oracle.push([...oracle[at]!, v]);
        }
        versions.forEach((b, i) => expect(b ? bufferItems(b) : []).toEqual(oracle[i]));
      }),
      { numRuns: 300, seed: 5 },
    );
  });

  it("a map of buffers is stored as the JSON of a map of plain arrays, and either reads back", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer(), fc.array(fc.string(), { minLength: 1, maxLength: 5 }), fc.nat(3)), { maxLength: 6 }), (entries) => {
        // a buffer whose backing array ran on (a later version appended to it) stores only its own items
        const pairs = entries.map(([k, items, extra]): [number, AppendBuffer<string>] => {
          let b: AppendBuffer<string> | undefined;
          for (const x of items) b = appended(b, x);
          let later = b!;
          for (let i = 0; i < extra; i++) later = appended(later, `later${i}`);
          return [k, b!];
        });
        const plain = pairs.map(([k, b]): [number, string[]] => [k, bufferItems(b)]);
        const s = appendBufferMapSerializer<number, string>();
        const bytes = s.encode(pairs);
        expect(bytes).toEqual(jsonSerializer().encode(plain));
        expect(s.decode(jsonSerializer().encode(plain)).map(([k, b]) => [k, bufferItems(b)])).toEqual(plain);
      }),
      { numRuns: 200, seed: 6 },
    );
  });

  it("the interval join's buffers are stored as maps of plain arrays (the bytes of snapshots and savepoints before buffers)", () => {
    const j = job('ij');
    const wm = WatermarkStrategies.boundedOutOfOrderness(0);
    const a = j.source<{ k: string; t: number }>({ name: 'a', timestamp: (e) => e.t, watermarks: wm }).keyBy((e) => e.k);
    const b = j.source<{ k: string; t: number }>({ name: 'b', timestamp: (e) => e.t, watermarks: wm }).keyBy((e) => e.k);
    a.intervalJoin(b, { lowerMs: 0, upperMs: 0 }).process((l, r, _c, out) => out.collect([l, r]));
    const states = j.nodes.flatMap((n) => ('state' in n ? n.state : [])).filter((d) => d.name.startsWith('interval-join'));
    expect(states.map((d) => d.name).sort()).toEqual(['interval-join-left', 'interval-join-right']);
    const buf = appended(appended(undefined, { k: 'x', t: 1 }), { k: 'x', t: 1 });
    for (const d of states) expect(d.serializer.encode([[1, buf]])).toEqual(jsonSerializer().encode([[1, [{ k: 'x', t: 1 }, { k: 'x', t: 1 }]]]));
  });
});
