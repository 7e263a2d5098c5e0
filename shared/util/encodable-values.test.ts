/**
 * The JSON serializer's check against JSON itself: what it passes is written and read back as it
 * was; what it refuses (a bigint, a Map or Set, a cycle, anywhere in the value) is named by path.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonValueProblem } from './encodable-values.js';
import { jsonSerializer } from '../api/serializers.js';

const json = jsonSerializer<unknown>();

/** `v` with `bad` put at the end of a path of object fields and array places; the path as the check spells it */
function planted(v: unknown, steps: Array<string | number>, bad: unknown): [unknown, string] {
  let root: unknown = bad;
  let path = '';
  for (let i = steps.length - 1; i >= 0; i--) {
    const s = steps[i]!;
    root = typeof s === 'number' ? [...Array.from({ length: s }, () => v), root] : { pad: v, [s]: root };
  }
  for (const s of steps) path += typeof s === 'number' ? `[${s}]` : `.${s}`;
  return [root, path];
}

describe('jsonValueProblem', () => {
  it('passes every JSON value, which the serializer gives back as it was', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(jsonValueProblem(v)).toBeUndefined();
        expect(json.decode(json.encode(v))).toEqual(JSON.parse(JSON.stringify(v)));
      }),
      { seed: 4101, numRuns: 300 },
    );
  });

  it('refuses a bigint, a Map, a Set anywhere, naming where; JSON itself fails or loses it', () => {
    const bad = fc.constantFrom<unknown>(10n, new Map([['a', 1]]), new Set([1]));
    const step = fc.oneof(fc.constantFrom('a', 'b_1', 'x'), fc.integer({ min: 0, max: 3 }));
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 1 }), fc.array(step, { maxLength: 5 }), bad, (pad, steps, b) => {
        const [v, path] = planted(pad, steps, b);
        const why = jsonValueProblem(v);
        expect(why).toMatch(path === '' ? /^(\S+n is a bigint|a (Map|Set) is written)/ : new RegExp(`^at ${path.replace(/[[\].]/g, '\\$&')}: `));
        // the oracle: JSON throws on it, or what it reads back differs from what was written
        let lost: boolean;
        try {
          lost = JSON.stringify(JSON.parse(JSON.stringify(v))) !== JSON.stringify(v) || b instanceof Map || b instanceof Set;
        } catch {
          lost = true;
        }
        expect(lost).toBe(true);
      }),
      { seed: 4102, numRuns: 300 },
    );
  });

  it('refuses a cycle; passes what writes itself (a Date) and what JSON leaves out', () => {
    const o: Record<string, unknown> = { a: 1 };
    o.self = { back: o };
    expect(jsonValueProblem(o)).toBe('at .self.back: the value holds itself here (a cycle), which JSON cannot write');
    // deep but no cycle: named as deep
    let deep: unknown = 1;
    for (let i = 0; i < 70; i++) deep = [deep];
    expect(jsonValueProblem(deep)).toMatch(/^at (\[0\]){64}: nested deeper than 64 levels, which JSON cannot write$/);
    expect(jsonValueProblem({ at: new Date(0), f: undefined, l: [1, 'x', null] })).toBeUndefined();
    expect(jsonValueProblem(Number.NaN)).toBeUndefined();
  });
});
