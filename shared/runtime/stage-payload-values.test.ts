/**
 * Records between stages travel in MessagePack. A value it would not read back as written — a
 * bigint (a number at the next stage), a Map (an object), a Set (an array), a cycle — is refused
 * where the record is sent on: a dead letter naming where in the value, not a changed value at the
 * next stage. What it carries — non-ASCII text, NaN, a Date, bytes, nesting past the fast writer's
 * 64 levels — arrives as sent.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface Out {
  k: string;
  v: unknown;
}

function deep(n: number): unknown {
  let v: unknown = 'bottom';
  for (let i = 0; i < n; i++) v = { d: v };
  return v;
}

/** the value record `i` sends on */
function made(i: number): unknown {
  switch (i) {
    case 1:
      return { total: 5n };
    case 2:
      return { seen: new Map([[1, 'a']]) };
    case 3:
      return [new Set(['x'])];
    case 4: {
      const o: Record<string, unknown> = {};
      o.self = { back: o };
      return o;
    }
    case 5:
      return { text: 'żółw ⚡', n: NaN, at: new Date(5), raw: new Uint8Array([1, 2]) };
    case 6:
      return deep(100);
    default:
      return { plain: i };
  }
}

describe('values sent on to the next stage', () => {
  it.each([
    ['keyed', true],
    ['rebalanced', false],
  ])('%s: what MessagePack would change is a dead letter; the rest arrives as sent', async (_what, keyed) => {
    const j = job('payload-values', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    const sent = j.source<{ i: number }>({ name: 'in', shards: 1 }).map((r): Out => ({ k: `k${r.i}`, v: made(r.i) }));
    (keyed ? sent.keyBy((o) => o.k).process<Out>({ processElement: (o, _c, out) => out.collect(o) }) : sent.rebalance().map((o) => o)).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { batchSize: 3 });
    r.produce('in', [0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ i })));
    await r.drain();

    const reasons = r.deadLetters().map((l) => l.reason);
    expect(reasons).toHaveLength(4);
    for (const re of [/at \.v\.total: 5n is a bigint, which MessagePack reads back as a number/, /at \.v\.seen: a Map is read back from MessagePack as an object/, /at \.v\[0\]: a Set is read back from MessagePack as an array/, /at \.v\.self\.back: the value holds itself here \(a cycle\)/]) {
      expect(reasons.some((x) => re.test(x))).toBe(true);
    }
    const got = new Map(r.published<Out>('out').map((o) => [o.k, o.v]));
    expect([...got.keys()].sort()).toEqual(['k0', 'k5', 'k6', 'k7']);
    const five = got.get('k5') as { raw: Uint8Array };
    expect({ ...five, raw: Uint8Array.from(five.raw) }).toEqual(made(5));
    expect(got.get('k6')).toEqual(deep(100));
  });
});
