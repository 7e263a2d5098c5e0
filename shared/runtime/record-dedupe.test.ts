/**
 * The inner stage's record dedupe against a plain oracle (a set of "producer|epoch|seq" strings):
 * random runs of admits — consecutive ones often in the same channel, the case the dedupe caches —,
 * counts, forgetting of old epochs and hand-overs to a child shard's instance.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RecordDedupe } from './record-dedupe.js';

type Op =
  | { readonly kind: 'admit'; readonly producer: string; readonly epoch: number; readonly seq: number }
  | { readonly kind: 'forget'; readonly below: number }
  | { readonly kind: 'handover' };

const producers = ['s0/shardId-0', 's0/shardId-1', 's1|x'];

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 12, arbitrary: fc.record({ kind: fc.constant('admit' as const), producer: fc.constantFrom(...producers), epoch: fc.integer({ min: 0, max: 4 }), seq: fc.integer({ min: 0, max: 12 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('forget' as const), below: fc.integer({ min: 0, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('handover' as const) }) },
);

/** The oracle: what a dedupe must answer, written without the engine's data structures. */
class Oracle {
  seen = new Set<string>();
  floor = 0;
  admit(p: string, e: number, s: number): boolean {
    const id = `${p}|${e}|${s}`;
    if (this.seen.has(id)) return false;
    this.seen.add(id);
    return true;
  }
  count(p: string, e: number): number {
    return [...this.seen].filter((id) => id.startsWith(`${p}|${e}|`)).length;
  }
  forget(below: number): void {
    this.floor = Math.max(this.floor, below);
    this.seen = new Set([...this.seen].filter((id) => Number(id.split('|').at(-2)) >= below));
  }
}

describe('record dedupe (per channel: producer and epoch)', () => {
  it('admits each record once, counts distinct records per channel, forgets old epochs and hands its sets to a child (property, against an oracle)', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120 }), (ops) => {
        let d = new RecordDedupe();
        const o = new Oracle();
        for (const x of ops) {
          if (x.kind === 'admit') {
            // records of forgotten epochs never arrive again (the instance's epoch is past them)
            const epoch = Math.max(x.epoch, o.floor);
            expect(d.admit(x.producer, epoch, x.seq)).toBe(o.admit(x.producer, epoch, x.seq));
          } else if (x.kind === 'forget') {
            d.forgetBefore(x.below);
            o.forget(x.below);
          } else {
            // a child shard's instance takes over the parent's sets: the same answers from there on
            const child = new RecordDedupe();
            child.adopt([d.handOver()]);
            d = child;
          }
          for (const p of producers) for (let e = o.floor; e <= 4; e++) expect(d.count(p, e)).toBe(o.count(p, e));
        }
      }),
      { numRuns: 300, seed: 11 },
    );
  });

  it('a child of two parents counts a record both delivered once', () => {
    const a = new RecordDedupe();
    const b = new RecordDedupe();
    for (const s of [1, 2, 3]) a.admit('p', 2, s);
    for (const s of [3, 4]) b.admit('p', 2, s);
    b.admit('q', 2, 9);
    const child = new RecordDedupe();
    child.admit('p', 2, 5); // the child's own record before the hand-over
    child.adopt([a.handOver(), b.handOver()]);
    expect(child.count('p', 2)).toBe(5);
    expect(child.count('q', 2)).toBe(1);
    expect(child.admit('p', 2, 4)).toBe(false);
    expect(child.admit('p', 2, 6)).toBe(true);
    expect(child.count('p', 2)).toBe(6);
  });

  it('forgetting drops the sets and counts of epochs below n only', () => {
    const d = new RecordDedupe();
    d.admit('p', 1, 1);
    d.admit('p', 2, 1);
    d.admit('p', 3, 1);
    d.forgetBefore(2);
    expect(d.count('p', 1)).toBe(0);
    expect(d.count('p', 2)).toBe(1);
    expect([...d.handOver().keys()].sort()).toEqual(['p|2', 'p|3']);
    expect(d.admit('p', 2, 1)).toBe(false);
  });
});
