import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { valueState } from '../api/state.js';
import { KeptList, encodePayloadFast } from '../codec/payload-writer.js';
import { KeyedStateCache } from './keyed-state.js';
import { TimerIndex, timerRow, writeTimerRow, type TimeDomain, type Timer } from './timers.js';

/**
 * The reference: a set of timers by id that remembers the order they were added in (a Map's: a
 * timer deleted and added again goes to the end); pop takes the earliest time, the first added of it.
 */
class ModelTimers {
  live = new Map<string, Timer>();
  private id = (t: Pick<Timer, 'domain' | 'operatorId' | 'key' | 'time'>) => JSON.stringify([t.domain, t.operatorId, t.key, t.time]);
  add(t: Timer): void {
    if (!this.live.has(this.id(t))) this.live.set(this.id(t), t);
  }
  has(t: Pick<Timer, 'domain' | 'operatorId' | 'key' | 'time'>): boolean {
    return this.live.has(this.id(t));
  }
  delete(t: Pick<Timer, 'domain' | 'operatorId' | 'key' | 'time'>): void {
    this.live.delete(this.id(t));
  }
  due(domain: TimeDomain, upTo: number): Timer[] {
    return [...this.live.values()].filter((t) => t.domain === domain && t.time <= upTo);
  }
  popDue(domain: TimeDomain, upTo: number): Timer | undefined {
    let best: Timer | undefined;
    for (const t of this.due(domain, upTo)) if (!best || t.time < best.time) best = t;
    if (best) this.delete(best);
    return best;
  }
}

const domainArb = fc.constantFrom<TimeDomain>('event-time', 'processing-time');
/** `fresh`: added, if it is not there, as one its caller knows is new (`registerNew`) */
const timerArbOf = (ops: string[], keys: string[], maxTime: number): fc.Arbitrary<Timer & { fresh: boolean }> =>
  fc.record({
    domain: domainArb,
    operatorId: fc.constantFrom(...ops),
    key: fc.constantFrom(...keys),
    keyGroup: fc.constant(0),
    time: fc.integer({ min: 0, max: maxTime }),
    fresh: fc.boolean(),
  });
const opArbOf = (timerArb: fc.Arbitrary<Timer & { fresh: boolean }>, maxTime: number) =>
  fc.oneof(
    fc.record({ op: fc.constant('add' as const), t: timerArb }),
    fc.record({ op: fc.constant('delete' as const), t: timerArb }),
    // the rows of a snapshot, taken between changes (an index may keep what it sorted for them)
    fc.record({ op: fc.constant('snapshot' as const) }),
    // pop everything due, adding and deleting timers while doing so (as callbacks do)
    // (`afterPeek`: changes between the peek, which starts the due buckets' firing, and the first pop)
    fc.record({
      op: fc.constant('fire' as const),
      domain: domainArb,
      upTo: fc.integer({ min: -1, max: maxTime + 2 }),
      afterPeek: fc.array(fc.record({ del: fc.boolean(), t: timerArb }), { maxLength: 3 }),
      during: fc.array(fc.record({ del: fc.boolean(), snapshot: fc.boolean(), t: timerArb }), { maxLength: 4 }),
    }),
  );
/** many distinct timers */
const wideOps = opArbOf(timerArbOf(['a', 'b', 'window'], ['k1', 'k2', 'k3', 'é', '', 'k10'], 12), 12);
/** few distinct timers: the same one deleted and added again, in a bucket that keeps others (and while it fires) */
const narrowOps = opArbOf(timerArbOf(['a', 'b'], ['k1', 'k2'], 1), 1);

const row = (t: Timer) => [t.domain, t.operatorId, t.key, t.time];

/** every timer by time, event time first at one time, else in the order added (a stable sort of the Map's order) */
const sortedRows = (model: ModelTimers) =>
  [...model.live.values()].sort((a, b) => a.time - b.time || (a.domain === b.domain ? 0 : a.domain === 'event-time' ? -1 : 1)).map((t) => [t.domain, t.operatorId, t.key, t.keyGroup, t.time]);

/** One change to both the index and the model; a timer not there is added as new when `fresh`. */
const change = (idx: TimerIndex, model: ModelTimers, del: boolean, t: Timer & { fresh?: boolean }) => {
  if (del) {
    idx.delete(t);
    model.delete(t);
  } else {
    if (t.fresh && !model.has(t)) idx.registerNew(t.domain, t.operatorId, t.key, t.keyGroup, t.time);
    else idx.add(t);
    model.add(t);
  }
};
/** The index writes the model's timers in firing order. */
const expectRows = (idx: TimerIndex, model: ModelTimers) => expect(idx.toJSON()).toEqual(sortedRows(model));
/** The index finds the model's due timers. */
const expectDue = (idx: TimerIndex, model: ModelTimers, domain: TimeDomain, upTo: number) =>
  expect(new Set(idx.peekDue(domain, upTo).map((t) => JSON.stringify(row(t))))).toEqual(new Set(model.due(domain, upTo).map((t) => JSON.stringify(row(t)))));

describe('TimerIndex', () => {
  it.each([
    ['many', wideOps, 0],
    ['few', narrowOps, 20],
  ] as const)('keeps one timer per (domain, operator, key, time) and fires them by time, then in the order added, like an ordered set (%s distinct timers)', (_, opArb, minLength) => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength, maxLength: 60 }), (ops) => {
        const idx = new TimerIndex();
        const model = new ModelTimers();
        for (const o of ops) {
          if (o.op === 'add' || o.op === 'delete') change(idx, model, o.op === 'delete', o.t);
          else if (o.op === 'snapshot') expectRows(idx, model);
          else {
            expectDue(idx, model, o.domain, o.upTo);
            for (const c of o.afterPeek) {
              change(idx, model, c.del, c.t);
              // the peeked buckets hold what changed since in their firing order
              expectRows(idx, model);
              expectDue(idx, model, o.domain, o.upTo);
            }
            let i = 0;
            for (;;) {
              const a = idx.popDue(o.domain, o.upTo);
              const b = model.popDue(o.domain, o.upTo);
              expect(a && row(a)).toEqual(b && row(b));
              if (!a) break;
              const d = o.during[i++];
              if (d) {
                // a snapshot while a bucket fires
                if (d.snapshot) expectRows(idx, model);
                change(idx, model, d.del, d.t);
              }
            }
          }
          expect(idx.size).toBe(model.live.size);
        }
        const json = idx.toJSON();
        expect(new Set(json.map(([d, o, k, , t]) => JSON.stringify([d, o, k, t])))).toEqual(new Set([...model.live.values()].map((t) => JSON.stringify(row(t)))));
        // a restored index holds the same timers and writes the same rows
        expect(TimerIndex.fromJSON(json).toJSON()).toEqual(json);
        // in firing order
        expect(json).toEqual(sortedRows(model));
      }),
      { numRuns: 300 },
    );
  });

  it('writes its timers by time, then in the order they were registered (event time first at one time), and a restored index fires them in that order', () => {
    const ts: Timer[] = [
      { domain: 'event-time', operatorId: 'b', key: 'x', keyGroup: 1, time: 5 },
      { domain: 'processing-time', operatorId: 'a', key: 'x', keyGroup: 1, time: 5 },
      { domain: 'event-time', operatorId: 'a', key: 'y', keyGroup: 2, time: 5 },
      { domain: 'event-time', operatorId: 'a', key: 'x', keyGroup: 1, time: 5 },
      { domain: 'event-time', operatorId: 'z', key: 'a', keyGroup: 3, time: 1 },
    ];
    const a = new TimerIndex();
    for (const t of ts) a.add(t);
    expect(a.toJSON().map(([d, o, k, , t]) => `${d[0]}${o}${k}${t}`)).toEqual(['eza1', 'ebx5', 'eay5', 'eax5', 'pax5']);
    const b = new TimerIndex();
    for (const t of [...ts].reverse()) b.add(t);
    expect(b.toJSON().map(([d, o, k, , t]) => `${d[0]}${o}${k}${t}`)).toEqual(['eza1', 'eax5', 'eay5', 'ebx5', 'pax5']);
    const fire = (x: TimerIndex) => {
      const out: string[] = [];
      for (let t = x.popDue('event-time', 9); t; t = x.popDue('event-time', 9)) out.push(`${t.operatorId}${t.key}`);
      return out;
    };
    expect(fire(TimerIndex.fromJSON(a.toJSON()))).toEqual(['za', 'bx', 'ay', 'ax']);
    expect(fire(a)).toEqual(['za', 'bx', 'ay', 'ax']);
  });

  it('puts timers from several snapshots in one order, whatever order their rows came in', () => {
    const rows = new TimerIndex();
    for (const [k, t] of [['b', 5], ['a', 5], ['c', 1]] as const) rows.register('event-time', 'w', k, 0, t);
    rows.register('processing-time', 'w', 'a', 0, 5);
    rows.register('event-time', 'v', 'z', 0, 5);
    const json = rows.toJSON();
    const expected = ['ewc1', 'evz5', 'ewa5', 'ewb5', 'pwa5'];
    expect(TimerIndex.inKeyOrder(json).map(([d, o, k, , t]) => `${d[0]}${o}${k}${t}`)).toEqual(expected);
    expect(TimerIndex.inKeyOrder([...json].reverse()).map(([d, o, k, , t]) => `${d[0]}${o}${k}${t}`)).toEqual(expected);
  });

  it('writes the timers added to a bucket while it fires, between two snapshots', () => {
    const idx = new TimerIndex();
    for (const k of ['a', 'b', 'c']) idx.register('event-time', 'w', k, 0, 5);
    expect(idx.popDue('event-time', 5)?.key).toBe('a');
    expect(idx.toJSON().map((r) => r[2])).toEqual(['b', 'c']);
    idx.register('event-time', 'w', 'd', 0, 5);
    idx.register('event-time', 'w', 'a', 0, 5);
    expect(idx.toJSON().map((r) => r[2])).toEqual(['b', 'c', 'd', 'a']);
    const fired: string[] = [];
    for (let t = idx.popDue('event-time', 5); t; t = idx.popDue('event-time', 5)) fired.push(t.key);
    // 'a', added again after it fired, fires after those registered before it
    expect(fired).toEqual(['b', 'c', 'd', 'a']);
  });

  it('finds due timers without touching later ones', () => {
    const idx = new TimerIndex();
    for (let k = 0; k < 1000; k++) idx.register('event-time', 'w', `k${k}`, 0, 10_000 * (1 + (k % 3)) - 1);
    expect(idx.peekDue('event-time', 9_998)).toEqual([]);
    expect(idx.peekDue('event-time', 9_999)).toHaveLength(334);
    let n = 0;
    while (idx.popDue('event-time', 19_999)) n++;
    expect(n).toBe(667);
    expect(idx.size).toBe(333);
    idx.remove('event-time', 'w', 'k2', 29_999);
    expect(idx.size).toBe(332);
  });

  it('keeps the state entry it was registered with: registered again it takes the newer one, undone and re-added it keeps it', () => {
    const c = new KeyedStateCache();
    c.register('w', [valueState('windows')]);
    const first = c.current('w', 'k', 3);
    const idx = new TimerIndex();
    idx.register('event-time', 'w', 'k', 3, 9, first);
    // the key's entry is dropped and loaded again: the timer's record registers it anew
    c.evictClean(0);
    c.load([{ operatorId: 'w', keyGroup: 3, key: 'k' }], []);
    const second = c.current('w', 'k', 3);
    expect(second).not.toBe(first);
    idx.register('event-time', 'w', 'k', 3, 9, second);
    idx.beginRecord();
    idx.remove('event-time', 'w', 'k', 9);
    idx.rollbackRecord();
    const t = idx.popDue('event-time', 9)!;
    expect(t.state).toBe(second);
    // a timer from a snapshot has none
    expect(TimerIndex.fromJSON(idx.toJSON()).popDue('event-time', 9)?.state).toBeUndefined();
  });

  it('fires a bucket in registration order: timers added while it fires fire in the same pass, after the others', () => {
    const idx = new TimerIndex();
    const order = (time: number) => {
      const out: string[] = [];
      for (let t = idx.popDue('event-time', time); t; t = idx.popDue('event-time', time)) {
        out.push(t.key);
        if (t.key === 'b') idx.register('event-time', 'w', 'bb', 0, time);
      }
      return out;
    };
    for (const k of ['d', 'a', 'c', 'b', 'e']) idx.register('event-time', 'w', k, 0, 9);
    expect(order(9)).toEqual(['d', 'a', 'c', 'b', 'e', 'bb']);
    for (const k of ['e', 'f', 'a', 'ab', 'c', '0', 'z']) idx.register('event-time', 'w', k, 0, 19);
    idx.remove('event-time', 'w', 'c', 19);
    expect(idx.toJSON().map((r) => r[2])).toEqual(['e', 'f', 'a', 'ab', '0', 'z']);
    // deleted and registered again: at the end
    idx.register('event-time', 'w', 'c', 0, 19);
    expect(order(19)).toEqual(['e', 'f', 'a', 'ab', '0', 'z', 'c']);
  });

  it("puts back a timer a failed record deleted in its place, also when the record emptied its bucket or registered it again", () => {
    const keys = (x: TimerIndex) => x.toJSON().map((r) => r[2]);
    const idx = new TimerIndex();
    for (const k of ['c', 'a', 'b']) idx.register('event-time', 'w', k, 0, 9);
    idx.beginRecord();
    idx.remove('event-time', 'w', 'a', 9);
    idx.register('event-time', 'w', 'a', 0, 9);
    idx.register('event-time', 'w', 'd', 0, 9);
    expect(keys(idx)).toEqual(['c', 'b', 'a', 'd']);
    idx.rollbackRecord();
    expect(keys(idx)).toEqual(['c', 'a', 'b']);
    // every timer of the bucket deleted (it would be dropped), then one of another time
    idx.beginRecord();
    for (const k of ['c', 'a', 'b']) idx.remove('event-time', 'w', k, 9);
    idx.register('event-time', 'w', 'c', 0, 9);
    idx.rollbackRecord();
    expect(keys(idx)).toEqual(['c', 'a', 'b']);
    expect(idx.size).toBe(3);
    // committed: the emptied bucket goes
    idx.beginRecord();
    for (const k of ['c', 'a', 'b']) idx.remove('event-time', 'w', k, 9);
    idx.commitRecord();
    expect(idx.size).toBe(0);
    expect(idx.peekDue('event-time', 9)).toEqual([]);
    expect(idx.popDue('event-time', 9)).toBeUndefined();
  });

  it('undoes failed records like a copy of the ordered set taken before each (a property)', () => {
    const timerArb = timerArbOf(['a', 'b'], ['k1', 'k2', 'k3'], 2);
    const recordArb = fc.record({ changes: fc.array(fc.record({ del: fc.boolean(), t: timerArb }), { maxLength: 6 }), fails: fc.boolean(), fireUpTo: fc.option(fc.integer({ min: 0, max: 2 })) });
    fc.assert(
      fc.property(fc.array(recordArb, { maxLength: 25 }), (records) => {
        const idx = new TimerIndex();
        const model = new ModelTimers();
        for (const r of records) {
          const before = new Map(model.live);
          idx.beginRecord();
          for (const c of r.changes) change(idx, model, c.del, c.t);
          if (r.fails) {
            idx.rollbackRecord();
            model.live = before;
          } else idx.commitRecord();
          expectRows(idx, model);
          expect(idx.size).toBe(model.live.size);
          if (r.fireUpTo !== null) {
            for (const d of ['event-time', 'processing-time'] as const) {
              for (;;) {
                const a = idx.popDue(d, r.fireUpTo);
                const b = model.popDue(d, r.fireUpTo);
                expect(a && row(a)).toEqual(b && row(b));
                if (!a) break;
              }
            }
          }
        }
      }),
      { seed: 1210, numRuns: 400 },
    );
  });

  it('keeps one timer when one registered as new is there after all, in a bucket that built its map (a restored one)', () => {
    // a savepoint of a job whose windows were another size: an old window's timer on a new one's end
    const idx = TimerIndex.fromJSON([
      ['event-time', 'w', 'a', 0, 19],
      ['event-time', 'w', 'b', 0, 19],
    ]);
    idx.registerNew('event-time', 'w', 'b', 0, 19);
    idx.registerNew('event-time', 'w', 'c', 0, 19);
    expect(idx.size).toBe(3);
    expect(idx.toJSON().map((r) => r[2])).toEqual(['a', 'b', 'c']);
    // a bucket made by new timers alone builds its map at its first lookup, from its order
    idx.registerNew('event-time', 'w', 'x', 0, 29);
    idx.registerNew('event-time', 'w', 'y', 0, 29);
    idx.register('event-time', 'w', 'x', 0, 29);
    idx.delete({ domain: 'event-time', operatorId: 'w', key: 'y', time: 29 });
    expect(idx.toJSON().map((r) => `${r[2]}@${r[4]}`)).toEqual(['a@19', 'b@19', 'c@19', 'x@29']);
  });

  it('keeps a bucket whose timer is deleted and registered again over and over to about its live timers', () => {
    const idx = new TimerIndex();
    idx.register('processing-time', 'p', 'other', 0, 7);
    for (let i = 0; i < 10_000; i++) {
      idx.beginRecord();
      idx.remove('processing-time', 'p', 'k', 7);
      idx.register('processing-time', 'p', 'k', 0, 7);
      idx.commitRecord();
    }
    expect(idx.size).toBe(2);
    expect(idx.heldEntries).toBeLessThan(40);
    expect(idx.toJSON().map((r) => r[2])).toEqual(['other', 'k']);
  });

  it('fires a restored index in the order of the one it was written from', () => {
    fc.assert(
      fc.property(windowsArb, fc.nat(), (windows, at) => {
        const sets = keySets(windows);
        const cut = at % (sets.length + 1);
        const idx = new TimerIndex();
        const fire = (x: TimerIndex, time: number) => {
          const out: string[] = [];
          for (let t = x.popDue('event-time', time); t; t = x.popDue('event-time', time)) out.push(t.key);
          return out;
        };
        // a window's timers at time w, from its `from`th key; the dead ones deleted
        const registerWindow = (x: TimerIndex, w: number, from = 0) => {
          const keys = [...sets[w]!].slice(from);
          for (const [k] of keys) x.register('event-time', 'w', k, 0, w);
          for (const [k, live] of keys) if (!live) x.remove('event-time', 'w', k, w);
        };
        for (let w = 0; w < cut; w++) {
          registerWindow(idx, w);
          if (w % 3 === 1) idx.toJSON();
          fire(idx, w);
        }
        const restored = TimerIndex.fromJSON(idx.toJSON());
        for (let w = cut; w < sets.length; w++) {
          // a checkpoint now and then just after the window began (few keys yet)
          if (w % 2 === 0) {
            for (const x of [idx, restored]) for (const [k] of [...sets[w]!].slice(0, 2)) x.register('event-time', 'w', k, 0, w);
            expect(restored.toJSON()).toEqual(idx.toJSON());
          }
          registerWindow(idx, w);
          registerWindow(restored, w);
          const fired = fire(idx, w);
          expect(fire(restored, w)).toEqual(fired);
          // the window's live keys in the order they were registered
          expect(fired).toEqual([...sets[w]!].filter(([, live]) => live).map(([k]) => k));
        }
      }),
      { seed: 1208, numRuns: 300 },
    );
  });
});


/** Windows of keys, each drawn from the last one's: the same keys, some of them and some others, all new, none, a few. */
const windowsArb = fc.array(
  fc.record({
    kind: fc.constantFrom('same', 'mixed', 'new', 'empty', 'few', 'all'),
    picks: fc.array(fc.nat({ max: 39 }), { maxLength: 40 }),
    dead: fc.array(fc.nat({ max: 39 }), { maxLength: 3 }),
  }),
  { maxLength: 12 },
);
/** A key per number, some beyond ASCII and one a surrogate pair (code-unit order is not code-point order). */
const keyName = (n: number) => ['', 'é', 'z', 'Z', '\u{1F600}', '\uFFFD', 'a'][n % 7]! + String(n % 13) + (n >= 20 ? `-${n}` : '');

/** The key sets of `windows` (key → live), each from the previous as its kind says. */
function keySets(windows: ReadonlyArray<{ kind: string; picks: number[]; dead: number[] }>): Map<string, boolean>[] {
  const sets: Map<string, boolean>[] = [];
  let last: string[] = [];
  windows.forEach((w, i) => {
    let keys: string[];
    if (w.kind === 'same') keys = last;
    else if (w.kind === 'new') keys = w.picks.map((n) => `${keyName(n)}/${i}`);
    else if (w.kind === 'empty') keys = [];
    else if (w.kind === 'few') keys = w.picks.slice(0, 2).map(keyName);
    else if (w.kind === 'all') keys = Array.from({ length: 40 }, (_, n) => keyName(n));
    else keys = [...last.filter((_, j) => w.picks.includes(j)), ...w.picks.map(keyName)];
    const set = new Map<string, boolean>(keys.map((k) => [k, true]));
    const names = [...set.keys()];
    for (const d of w.dead) if (names.length) set.set(names[d % names.length]!, false);
    sets.push(set);
    last = names;
  });
  return sets;
}

describe("a timer's snapshot row written straight", () => {
  /** msgpackr alone, with the payload codec's options */
  const reference = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number' });
  const isAscii = (s: string) => /^[\x00-\x7f]*$/.test(s);
  const keyArb = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.string({ unit: 'grapheme', maxLength: 6 }),
    fc.string({ minLength: 31, maxLength: 300 }),
    fc.constant(''),
    fc.constantFrom('user-1', 'user-2'),
  );
  const timeArb = fc.oneof(
    fc.integer({ min: -40, max: 300 }),
    fc.integer({ min: -(2 ** 40), max: 2 ** 40 }),
    fc.constantFrom(2 ** 32, 2 ** 32 - 1, -(2 ** 31), -(2 ** 31) - 1, 1.7e12, 0.5, -0, Number.MAX_SAFE_INTEGER, -1.25e-7),
    fc.double({ noNaN: true }),
  );
  const timerArb = fc.record({
    domain: fc.constantFrom<TimeDomain>('event-time', 'processing-time'),
    // the same domain and operator in runs, and changing between them
    operatorId: fc.constantFrom('window-1', 'w', 'o'.repeat(40), 'jöin', ''),
    key: keyArb,
    keyGroup: fc.oneof(fc.nat(127), fc.nat(300), fc.nat(70_000), fc.constant(2 ** 32 - 1)),
    time: timeArb,
  });
  const kept = (t: Timer) => ({ ...t, keptBytes: undefined as Uint8Array | undefined, keptLength: 0 });

  it("is msgpackr's bytes of the plain row, or gives up where the generic writer would", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(timerArb, fc.integer({ min: 1, max: 4 })), { maxLength: 30 }), (runs) => {
        const timers = runs.flatMap(([t, n]) => Array.from({ length: n }, (_, i) => ({ ...t, key: t.key + (i ? i : '') })));
        const plain = timers.map(timerRow);
        // written three times: straight, straight again (its bytes kept), from the kept bytes
        const items = timers.map(kept);
        for (let pass = 0; pass < 3; pass++) {
          const bytes = encodePayloadFast(new KeptList(items, timerRow, writeTimerRow));
          const generic = encodePayloadFast(plain);
          if (plain.every((r) => isAscii(r[1]) && isAscii(r[2]))) {
            expect(bytes).toBeDefined();
            expect(Buffer.from(bytes!).equals(reference.pack(plain))).toBe(true);
            expect(Buffer.from(bytes!).equals(Buffer.from(generic!))).toBe(true);
          } else {
            // the whole value is msgpackr's (encodePayload), as with the plain rows
            expect(bytes).toBeUndefined();
            expect(generic).toBeUndefined();
          }
        }
      }),
      { seed: 1209, numRuns: 500 },
    );
  });

  it("keeps the bytes of timers written across the writer's chunks", () => {
    // more rows than a 64 KB chunk holds, the domain and operator changing every few rows
    const timers = Array.from({ length: 9000 }, (_, i) => ({
      domain: (i % 7 < 3 ? 'event-time' : 'processing-time') as TimeDomain,
      operatorId: i % 11 < 5 ? 'window-1' : 'session-operator',
      key: `user-${i}-${'x'.repeat(i % 37)}`,
      keyGroup: i % 300,
      time: i % 5 ? 1.7e12 + i : i - 100.5,
    }));
    const items = timers.map(kept);
    const expected = reference.pack(timers.map(timerRow));
    for (let pass = 0; pass < 3; pass++) expect(Buffer.from(encodePayloadFast(new KeptList(items, timerRow, writeTimerRow))!).equals(expected)).toBe(true);
  });
});
