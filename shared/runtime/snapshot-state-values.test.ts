/**
 * Operator list state and broadcast state travel whole in each snapshot, in MessagePack. A value it
 * would not read back as written (a bigint, a Map, a Set, a cycle) is refused where a record writes
 * it: that record is a dead letter naming the state and where in the value, its effects undone, and
 * every checkpoint completes and restores the rest.
 */
import { describe, expect, it } from 'vitest';
import { collectSink, job, mapState, operatorListState, type KeyedBroadcastProcessFunction } from '../api/index.js';
import { packedValueProblem } from '../util/encodable-values.js';
import { decodePayload, encodePayload } from '../codec/payload.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

/** the value a record of `v` writes: a few a snapshot cannot carry back */
function made(v: number): unknown {
  if (v === 2) return { total: 10n };
  if (v === 3) return { seen: new Map([['a', 1]]) };
  if (v === 4) return [new Set([1])];
  if (v === 5) {
    const o: Record<string, unknown> = {};
    o.self = o;
    return o;
  }
  return { total: v, at: new Date(v), raw: new Uint8Array([v]), ratio: v === 6 ? NaN : Infinity };
}

const refused = [/at \.total: 10n is a bigint/, /at \.seen: a Map is read back .* as an object/, /at \[0\]: a Set is read back .* as an array/, /at \.self: the value holds itself here \(a cycle\), which MessagePack cannot write/];

describe('state a snapshot carries whole', () => {
  it('what MessagePack carries passes the check and reads back equal; what it loses is named', () => {
    for (const v of [1, 6, 7]) {
      expect(packedValueProblem(made(v))).toBeUndefined();
      const back = decodePayload<{ raw: Uint8Array }>(encodePayload(made(v)));
      expect({ ...back, raw: Uint8Array.from(back.raw) }).toEqual(made(v)); // bytes come back as a Buffer
    }
    [2, 3, 4, 5].forEach((v, i) => expect(packedValueProblem(made(v))).toMatch(refused[i]!));
  });

  it('operator list state: a record adding an item the snapshot cannot carry is a dead letter; checkpoints complete across restores', async () => {
    const items = operatorListState<unknown>('items');
    const j = job('oplist-values', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<{ v: number }>({ name: 'in', shards: 1 })
      .process<number>({
        state: [items],
        processElement(r, ctx, out) {
          const l = ctx.getOperatorListState(items);
          out.collect(r.v);
          if (r.v % 2 === 0) l.add(made(r.v));
          else l.addAll([made(1), made(r.v)]);
          out.collect(l.get().length);
        },
      })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { environments: 2, recycleProbability: 0.5, batchSize: 2, seed: 4 });
    r.produce('in', [1, 2, 3, 4, 5, 6, 7].map((v) => ({ v })));
    await r.drain();
    await r.checkpoint();
    r.produce('in', [{ v: 7 }]);
    await r.drain();

    const reasons = r.deadLetters().map((l) => l.reason);
    expect(reasons).toHaveLength(4);
    refused.forEach((re) => expect(reasons.some((x) => /operator list state "items"/.test(x) && re.test(x))).toBe(true));
    // v=1 adds 2 items, 6 adds 1, 7 adds 2 (twice); a refused record's outputs and items are undone
    expect(r.published<number>('out')).toEqual([1, 2, 6, 3, 7, 5, 7, 7]);
  });

  it('broadcast state: a rule the snapshot cannot carry is a dead letter; the rules before it still apply after restores', async () => {
    interface Rule {
      type: string;
      v: number;
    }
    const rules = mapState<string, unknown>('rules');
    const fn: KeyedBroadcastProcessFunction<string, { k: string }, Rule, string> = {
      processElement(t, ctx, out) {
        out.collect(`${t.k}:${[...ctx.getBroadcastState(rules).entries()].map(([k]) => k).sort().join(',')}`);
      },
      processBroadcastElement(rule, ctx) {
        ctx.getBroadcastState(rules).put(rule.type, made(rule.v));
      },
    };
    const j = job('broadcast-values', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    const b = j.source<Rule>({ name: 'rules', shards: 1 }).broadcast(rules as never);
    j.source<{ k: string }>({ name: 'in', shards: 1 }).keyBy((t) => t.k).connect(b).process(fn).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { environments: 2, recycleProbability: 0.5, batchSize: 2, seed: 6 });
    r.produce('rules', [1, 2, 3, 4, 5, 6].map((v) => ({ type: `r${v}`, v })));
    await r.drain();
    await r.checkpoint();
    r.produce('in', [{ k: 'a' }]);
    await r.drain();

    const reasons = r.deadLetters().map((l) => l.reason);
    expect(reasons).toHaveLength(4);
    refused.forEach((re) => expect(reasons.some((x) => /broadcast state "rules".*key "r\d"/.test(x) && re.test(x))).toBe(true));
    expect(r.published<string>('out')).toEqual(['a:r1,r6']);
  });
});
