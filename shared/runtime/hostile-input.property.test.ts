/**
 * Bad input gets a clear error and loses nothing, as a property: hostile source records (bytes that
 * are not JSON, JSON that is not an object, fields missing or of the wrong type, keys and event times
 * at and beyond what numbers and the wire carry, odd unicode) and user functions that throw on some
 * values or return strings UTF-8 cannot carry, through three keyed job shapes and a SQL GROUP BY. Each run must drain (every checkpoint completes: the
 * MemoryJobRunner throws if one cannot), and every record is accounted for exactly once: in the
 * output, as an oracle written apart from the engine computes it, or as a dead letter holding its
 * own bytes and a reason.
 *
 * Seeded (SEED below), so a failure reproduces; fast-check prints the shrunk counterexample. To
 * explore further: HSEED=<n> HRUNS=<runs> npx vitest run shared/runtime/hostile-input.property.test.ts
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectSink, dynamoUpsertSink, job, listState, OutputTag, textSerializer, TumblingEventTimeWindows, valueState, WatermarkStrategies } from '../api/index.js';
import { decodePayload } from '../codec/payload.js';
import { compileSql } from '../sql/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

/** fixed: change it to explore, keep it fixed so a failure reproduces */
const SEED = Number(process.env.HSEED ?? 20261204);
const RUNS = Number(process.env.HRUNS ?? 60);

const enc = new TextEncoder();
const MAX = Number.MAX_SAFE_INTEGER;

/** A record as the test made it: its bytes, and the value they hold if they are JSON. */
interface Made {
  readonly bytes: Uint8Array;
  readonly value?: unknown;
}

const hostileNumber = fc.constantFrom(0, -0, 1, -1, 0.5, -1.5, 13, 2 ** 31, 2 ** 50, 2 ** 50 + 1, -(2 ** 50), -(2 ** 50) - 0.5, 2 ** 51, -(2 ** 52), 2 ** 53, 2 ** 53 - 1, -(2 ** 53) + 1, -(2 ** 60), 2 ** 60, 1e300, -1e300, 5e-324, MAX + 2);
const hostileString = fc.oneof(
  fc.constantFrom('', 'a', 'b', 'NaN', 'Infinity', '-0', '1', '1e300', '\u0000', '\u0000s', '\uD800', '\uDC00', '\uD83D\uDE00', 'é', 'e\u0301'),
  fc.string({ maxLength: 4 }),
  fc.string({ unit: 'grapheme', maxLength: 4 }),
  fc.string({ unit: 'binary', maxLength: 4 }), // lone surrogates included
  fc.nat({ max: 3 }).map((n) => 'x'.repeat(10_000 + n)),
);
const hostileValue = fc.oneof(
  { weight: 4, arbitrary: hostileNumber },
  { weight: 3, arbitrary: hostileString },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], [1], {}, { a: 1 }, { k: 'a' }) },
);
// mostly well-formed records over few keys and close times, so state and windows are shared
const plainKey = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('a', 'b', 'c') },
  { weight: 3, arbitrary: fc.constantFrom(1, 2, -0) },
  // halves of a surrogate pair, and a whole one: a key that changed on the wire would be another key
  { weight: 1, arbitrary: fc.constantFrom('\uDC00', 'a\uD800', '\uD83D\uDE00') },
);
const plainTs = fc.integer({ min: -3_000, max: 5_000 });
const plainV = fc.integer({ min: 0, max: 15 }); // 13: the user functions refuse it; 14: they make a lone surrogate; 11, 12, 15: see below

const field = <T>(plain: fc.Arbitrary<T>, hostile: fc.Arbitrary<unknown> = hostileValue) =>
  fc.oneof({ weight: 6, arbitrary: plain.map((v) => ({ v })) }, { weight: 2, arbitrary: hostile.map((v) => ({ v })) }, { weight: 1, arbitrary: fc.constant(undefined) });
// event times are where records broke the engine so far: more of the edge numbers there
const hostileTs = fc.oneof({ weight: 3, arbitrary: hostileNumber }, { weight: 1, arbitrary: hostileValue });

const objectRecord = fc.record({ k: field(plainKey), ts: field(plainTs, hostileTs), v: field(plainV) }).map(({ k, ts, v }) => {
  const o: Record<string, unknown> = {};
  if (k) o.k = k.v;
  if (ts) o.ts = ts.v;
  if (v) o.v = v.v;
  return o;
});

const made: fc.Arbitrary<Made> = fc.oneof(
  { weight: 10, arbitrary: objectRecord.map((value) => ({ value, bytes: enc.encode(JSON.stringify(value)) })) },
  { weight: 1, arbitrary: hostileValue.map((value) => ({ value, bytes: enc.encode(JSON.stringify(value)) })) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 12 }).map((bytes) => ({ bytes })) },
  { weight: 1, arbitrary: fc.constantFrom('{"k": "a", "ts": 1', 'NaN', '{"k":1,"ts":1,"v":1}}', '\uD800', 'undefined', '{"k":"a","ts":-0,"v":1e400}').map((s) => ({ bytes: enc.encode(s) })) },
);

/** What the bytes hold once decoded, as JSON.parse gives it (the value made may not survive the trip). */
function decoded(m: Made): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(m.bytes));
  } catch {
    return undefined;
  }
}

interface Rec {
  readonly k: string | number;
  readonly ts: number;
  readonly v: number;
  readonly id: number;
}

/** No string of the value (nor key) holds half a surrogate pair: checked by code unit. */
function wellFormed(value: unknown): boolean {
  if (Array.isArray(value)) return value.every(wellFormed);
  if (typeof value === 'object' && value !== null) return Object.entries(value).every(([k, v]) => wellFormed(k) && wellFormed(v));
  if (typeof value !== 'string') return true;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff) return false;
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    }
  }
  return true;
}

/**
 * The oracle of the source and the key: which records the engine must take (the others are dead
 * letters). A record is taken when it is a JSON object whose `ts` floors to an integer within ±2^50
 * (the documented range of a source's event times), that holds no lone surrogate, and whose `k` is
 * a string or a finite number; its `v` is for the user functions to judge (`refused`).
 */
function taken(m: Made, id: number): Rec | undefined {
  const value = decoded(m);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  // half a surrogate pair anywhere (UTF-8 has no such character): the record is refused whole
  if (!wellFormed(value)) return undefined;
  const { k, ts, v } = value as { k: unknown; ts: unknown; v: number };
  if (typeof ts !== 'number' || !(Math.abs(Math.floor(ts)) <= 2 ** 50)) return undefined;
  if (!(typeof k === 'string' || (typeof k === 'number' && Number.isFinite(k)))) return undefined;
  return { k, ts: Math.floor(ts), v, id };
}

/** The engine's key identity: a number and its string differ; -0 is 0. */
const keyId = (k: unknown) => (typeof k === 'number' ? `n${String(k)}` : `s${String(k)}`);
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Tags each record with its index (a field the engine ignores), so outputs name the records they hold. */
function withIds(records: readonly Made[]): Made[] {
  return records.map((m, id) => {
    const value = decoded(m);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return m;
    const tagged = { ...(value as object), id };
    return { value: tagged, bytes: enc.encode(JSON.stringify(tagged)) };
  });
}

/**
 * Where the oracle expects a record's dead letter: at the source stage, holding the record's own
 * bytes, or at the keyed stage, holding the value that stage received (`sent`, in the stages' payload
 * encoding). Each once, each with a reason and a position.
 */
type Dead = Map<number, 'source' | 'keyed'>;
function expectLetters(r: MemoryJobRunner, records: readonly Made[], dead: Dead, sent: (value: Record<string, unknown>) => unknown): void {
  const sourceStage = r.plan.stages.find((s) => s.input.kind === 'source')!.id;
  const letters = r.deadLetters();
  for (const l of letters) {
    expect(l.reason).toMatch(/\S/);
    expect(l.sequenceNumber).toBeTruthy();
  }
  const got = letters.map((l) => (l.stage === sourceStage ? `source ${hex(l.data)}` : `keyed ${JSON.stringify(decodePayload(l.data))}`));
  const want = [...dead].map(([i, at]) => (at === 'source' ? `source ${hex(records[i]!.bytes)}` : `keyed ${JSON.stringify(sent(decoded(records[i]!) as Record<string, unknown>))}`));
  expect(got.sort()).toEqual(want.sort());
}

const source = (j: ReturnType<typeof job>, shards = 2) =>
  j.source<Rec>({ name: 'in', shards, format: 'json', timestamp: (v) => v.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(500) });

/**
 * A `v` of 14 makes the user functions return half a surrogate pair (a map's result, a key
 * selector's key): the record fails where the function ran, at the source stage, as a dead letter.
 */
const SURROGATE_V = 14;

/**
 * Values a function writes that the engine must refuse at the write, the record a dead letter with
 * its earlier effects undone: a `v` of 15 writes half a surrogate pair to text state (the text
 * serializer cannot carry it), 12 uses a state under its declared name with another kind, and (to
 * an upsert sink) 12 writes an empty set, 11 an item beyond DynamoDB's 400 KB.
 */
const TEXT_SURROGATE_V = 15;
const MISMATCH_V = 12;
const EMPTY_SET_V = 12;
const BIG_ITEM_V = 11;

/**
 * The oracle of the upsert sink, apart from the engine: what DynamoDB (and its document client)
 * refuses of a row made from a record — a key beyond 2048 bytes of UTF-8, a number that is not
 * finite, beyond ±(2^53 − 1) or non-zero below 1E-130 in magnitude, half a surrogate pair, an empty
 * set, an item beyond 400 KB.
 */
function upsertRefused(key: string, row: { k: unknown; v: unknown }): boolean {
  if (enc.encode(key).length > 2048) return true;
  const badNumber = (x: unknown) => typeof x === 'number' && (!Number.isFinite(x) || Math.abs(x) > 2 ** 53 - 1 || (x !== 0 && Math.abs(x) < 1e-130));
  if (badNumber(row.k) || badNumber(row.v)) return true;
  return row.v === SURROGATE_V || row.v === EMPTY_SET_V || row.v === BIG_ITEM_V;
}

/** What the user functions refuse (they throw): a `v` that is not an integer, or 13. */
const refused = (v: unknown) => typeof v !== 'number' || !Number.isInteger(v) || v === 13;
const refuse = (v: unknown) => {
  if (refused(v)) throw new Error(`${String(v)} is refused`);
};

async function run(r: MemoryJobRunner, records: readonly Made[]): Promise<void> {
  // two halves with a checkpoint between: the second must also find every stage at its barrier
  const half = Math.floor(records.length / 2);
  r.produce('in', records.slice(0, half).map((m) => m.bytes));
  await r.drain();
  r.produce('in', records.slice(half).map((m) => m.bytes));
  await r.drain();
  r.endOfInput();
  await r.drain();
}

const params = { seed: SEED, numRuns: RUNS };
const input = fc.array(made, { minLength: 1, maxLength: 40 }).map(withIds);

describe('hostile source records: every checkpoint completes, every record is output or a dead letter, once', () => {
  it('source → keyBy → reduce', async () => {
    await fc.assert(
      fc.asyncProperty(input, async (records) => {
        const j = job('hostile-reduce', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
        // one shard: the oracle knows which record of a key comes first (it is not reduced)
        source(j, 1)
          .map((v) => {
            if (typeof v.v !== 'number' || !Number.isInteger(v.v)) throw new Error(`${String(v.v)} is not an integer`);
            return { k: v.k, ids: [v.id], sum: v.v, ...(v.v === SURROGATE_V ? { tag: 'made \uDC00' } : {}) };
          })
          .keyBy((o) => o.k, { parallelism: 2 })
          .reduce((a, b) => {
            refuse(b.sum);
            return { k: a.k, ids: [...a.ids, ...b.ids], sum: a.sum + b.sum };
          })
          .sinkTo(collectSink('out'));
        const r = new MemoryJobRunner(j, { batchSize: 7 });
        await run(r, records);

        // the oracle: per key, in input order
        const dead: Dead = new Map();
        const kept = new Map<string, Rec[]>();
        records.forEach((m, i) => {
          const rec = taken(m, i);
          if (!rec || typeof rec.v !== 'number' || !Number.isInteger(rec.v) || rec.v === SURROGATE_V) return void dead.set(i, 'source');
          const list = kept.get(keyId(rec.k)) ?? [];
          // the first of a key is not reduced, so it is never refused
          if (list.length > 0 && refused(rec.v)) return void dead.set(i, 'keyed');
          list.push(rec);
          kept.set(keyId(rec.k), list);
        });
        expectLetters(r, records, dead, (v) => ({ k: v.k, ids: [v.id], sum: v.v }));
        const out = r.published<{ k: string | number; ids: number[]; sum: number }>('out');
        // each record taken is reduced into its key's state once: the last result per key holds them all
        const last = new Map<string, { ids: number[]; sum: number }>();
        for (const o of out) last.set(keyId(o.k), { ids: [...o.ids].sort((x, y) => x - y), sum: o.sum });
        const want = new Map([...kept].map(([k, list]) => [k, { ids: list.map((x) => x.id).sort((x, y) => x - y), sum: list.reduce((s, x) => s + x.v, 0) }]));
        expect(new Map([...last].sort())).toEqual(new Map([...want].sort()));
        expect(out).toHaveLength([...kept.values()].reduce((n, l) => n + l.length, 0));
      }),
      params,
    );
  }, 60_000);

  it('source → keyBy → tumbling window aggregate (late records to a side output)', async () => {
    await fc.assert(
      fc.asyncProperty(input, async (records) => {
        const late = new OutputTag<Rec>('late');
        const j = job('hostile-window', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
        const windowed = source(j)
          .keyBy((v) => v.k, { parallelism: 2 })
          .window(TumblingEventTimeWindows.of(1_000), { lateOutput: late })
          .aggregate(
            {
              createAccumulator: (): number[] => [],
              add: (v: Rec, acc: number[]) => {
                refuse(v.v);
                return [...acc, v.id];
              },
              getResult: (a: number[]) => a,
              merge: (a: number[], b: number[]) => [...a, ...b],
            },
            { result: (key, w, ids) => ({ key, start: w.start, end: w.end, ids }) },
          );
        windowed.sinkTo(collectSink('out'));
        windowed.sideOutput(late).sinkTo(collectSink('late'));
        const r = new MemoryJobRunner(j, { batchSize: 7 });
        await run(r, records);

        const byId = new Map<number, Rec>();
        const dead: Dead = new Map();
        records.forEach((m, i) => {
          const rec = taken(m, i);
          if (rec) byId.set(i, rec);
          else dead.set(i, 'source');
        });
        const lateIds = r.published<Rec>('late').map((v) => v.id);
        // a late record is not added to a window, so not refused; one on time may be
        for (const [i, rec] of byId) if (refused(rec.v) && !lateIds.includes(i)) dead.set(i, 'keyed');
        expectLetters(r, records, dead, (v) => v);
        const windows = r.published<{ key: string | number; start: number; end: number; ids: number[] }>('out');
        const seen: number[] = [...lateIds];
        for (const w of windows) {
          expect(w.end - w.start).toBe(1_000);
          for (const id of w.ids) {
            const rec = byId.get(id)!;
            expect(rec).toBeDefined();
            expect(keyId(w.key)).toBe(keyId(rec.k));
            expect(rec.ts >= w.start && rec.ts < w.end).toBe(true);
            seen.push(id);
          }
        }
        // taken and not refused: in exactly one window or late, once
        const want = [...byId.keys()].filter((i) => !dead.has(i));
        expect(seen.sort((x, y) => x - y)).toEqual(want.sort((x, y) => x - y));
      }),
      params,
    );
  }, 60_000);

  it('source → keyBy → process function with event-time timers', async () => {
    await fc.assert(
      fc.asyncProperty(input, async (records) => {
        const j = job('hostile-timers', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
        const text = valueState<string>('text', { serializer: textSerializer });
        const sameNameOtherKind = listState<string>('text');
        source(j)
          .keyBy((v) => (v.v === SURROGATE_V ? `${String(v.k)}\uD800` : v.k), { parallelism: 2 })
          .process<{ key: string | number; id?: number; at?: number }>({
            state: [text],
            processElement(v, ctx, out) {
              out.collect({ key: v.k, id: v.id });
              // the record's event time, as the source floored it (v.ts is the raw field)
              ctx.timerService.registerEventTimeTimer(ctx.timestamp!);
              // after its output and timer: a refused record must take both back
              if (v.v === MISMATCH_V) ctx.getListState(sameNameOtherKind).add('x');
              ctx.getState(text).update(v.v === TEXT_SURROGATE_V ? `made \uD800 ${v.id}` : `${v.id}`);
              refuse(v.v);
            },
            onTimer(time, ctx, out) {
              out.collect({ key: ctx.key as string | number, at: time });
            },
          })
          .sinkTo(collectSink('out'));
        const r = new MemoryJobRunner(j, { batchSize: 7 });
        await run(r, records);

        const dead: Dead = new Map();
        const kept: Rec[] = [];
        records.forEach((m, i) => {
          const rec = taken(m, i);
          if (!rec || rec.v === SURROGATE_V) dead.set(i, 'source');
          else if (refused(rec.v) || rec.v === MISMATCH_V || rec.v === TEXT_SURROGATE_V) dead.set(i, 'keyed');
          else kept.push(rec);
        });
        expectLetters(r, records, dead, (v) => v);
        const out = r.published<{ key: string | number; id?: number; at?: number }>('out');
        const ids = out.flatMap((o) => (o.id === undefined ? [] : [o.id]));
        expect(ids.sort((x, y) => x - y)).toEqual(kept.map((x) => x.id));
        // one timer per key and time, each fired once by the end of input
        const fired = out.flatMap((o) => (o.at === undefined ? [] : [`${keyId(o.key)}@${o.at}`]));
        const want = [...new Set(kept.map((x) => `${keyId(x.k)}@${x.ts}`))];
        expect(fired.sort()).toEqual(want.sort());
      }),
      params,
    );
  }, 60_000);

  it('source → keyBy → process → DynamoDB upsert sink: rows DynamoDB would refuse are dead letters, not failed flushes', async () => {
    await fc.assert(
      fc.asyncProperty(input, async (records) => {
        const j = job('hostile-upsert', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
        // one shard: the oracle knows the last record of a key
        source(j, 1)
          .keyBy((v) => v.k, { parallelism: 2 })
          .process<Record<string, unknown>>({
            processElement(v, _ctx, out) {
              out.collect({
                k: v.k,
                id: v.id,
                v: v.v,
                ...(v.v === SURROGATE_V ? { tag: 'made \uDC00' } : {}),
                ...(v.v === EMPTY_SET_V ? { tags: new Set() } : {}),
                ...(v.v === BIG_ITEM_V ? { blob: 'x'.repeat(400 * 1024) } : {}),
              });
            },
          })
          .sinkTo(dynamoUpsertSink({ name: 'rows', key: (o) => keyId(o.k) }));
        const r = new MemoryJobRunner(j, { batchSize: 7 });
        await run(r, records);

        const dead: Dead = new Map();
        const last = new Map<string, number>();
        records.forEach((m, i) => {
          const rec = taken(m, i);
          if (!rec) return void dead.set(i, 'source');
          if (upsertRefused(keyId(rec.k), rec)) return void dead.set(i, 'keyed');
          last.set(keyId(rec.k), i);
        });
        expectLetters(r, records, dead, (v) => v);
        const sourceStage = r.plan.stages.find((st) => st.input.kind === 'source')!.id;
        for (const l of r.deadLetters()) if (l.stage !== sourceStage) expect(l.reason).toMatch(/sink "rows": (key|item)/);
        const rows = new Map([...r.upserts('rows')].map(([k, row]) => [k, row.id]));
        expect(new Map([...rows].sort())).toEqual(new Map([...last].sort()));
      }),
      params,
    );
  }, 60_000);

  it('a SQL GROUP BY (its columns coerced by the SQL source): every record is counted in one row or is a dead letter', async () => {
    const sql = `CREATE TABLE t (k VARCHAR, v BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'kinesis', 'shards' = '2', 'event_time' = 'ts');
CREATE TABLE o (k VARCHAR, n BIGINT, total BIGINT) WITH ('connector' = 'dynamodb');
INSERT INTO o SELECT k, COUNT(*) AS n, SUM(v) AS total FROM t GROUP BY k;`;
    await fc.assert(
      fc.asyncProperty(input, async (records) => {
        const r = new MemoryJobRunner(compileSql(sql, { name: 'hostile-sql' }).job, { batchSize: 7 });
        r.produce('t', records.map((m) => m.bytes));
        await r.drain();
        r.endOfInput();
        await r.drain();
        // the SQL source's coercions are its own (a number as VARCHAR, a missing column as NULL):
        // the oracle only accounts, each record in one row's count or one dead letter of its bytes
        const rows = [...r.upserts('o').values()];
        const counted = rows.reduce((n, row) => n + (row.n as number), 0);
        const letters = r.deadLetters();
        expect(counted + letters.length).toBe(records.length);
        // a SUM beyond ±(2^53 − 1) would lose digits (and DynamoDB's client would refuse it at every
        // flush): the record that makes it is a dead letter of the keyed stage, its count undone
        for (const row of rows) if (row.total !== null && row.total !== undefined) expect(Math.abs(row.total as number)).toBeLessThanOrEqual(2 ** 53 - 1);
        const sourceStage = r.plan.stages.find((st) => st.input.kind === 'source')!.id;
        const left = records.map((m) => hex(m.bytes));
        for (const l of letters) {
          expect(l.reason).toMatch(/\S/);
          if (l.stage !== sourceStage) {
            expect(l.reason).toMatch(/SUM: the BIGINT sum .*2\^53|sink "o": key .*2048/);
            continue;
          }
          const at = left.indexOf(hex(l.data));
          expect(at).toBeGreaterThanOrEqual(0);
          left.splice(at, 1);
        }
      }),
      params,
    );
  }, 60_000);
});
