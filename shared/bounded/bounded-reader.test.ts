/**
 * Bounded input: object decoding (JSON lines, CSV, gzip), and the main claim — a job over objects
 * read by the BoundedReader ends with the same results as the same job fed the same records as a
 * stream (in-process, on the in-memory twins).
 */
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { collectSink, dynamoUpsertSink, job, TumblingEventTimeWindows, valueState, WatermarkStrategies, type KeyedProcessFunction } from '../api/index.js';
import { decodeSourceControl } from '../codec/envelope.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { BoundedReader, HOLD_UNTIL_END, recordsOfObject } from './bounded-reader.js';
import { memorySourceWriter, MemoryObjectStore } from './memory.js';

interface Ev {
  user: string;
  ts: number;
  amount: number;
}

const dec = new TextDecoder();

describe('recordsOfObject', () => {
  it('splits JSON lines, skipping blanks and CRs, and gunzips by magic bytes whatever the name', () => {
    const text = '{"a":1}\r\n\n{"a":2}\n';
    expect(recordsOfObject('x.jsonl', new TextEncoder().encode(text)).map((r) => dec.decode(r))).toEqual(['{"a":1}', '{"a":2}']);
    expect(recordsOfObject('x.bin', new Uint8Array(gzipSync(text))).map((r) => dec.decode(r))).toEqual(['{"a":1}', '{"a":2}']);
  });

  it('turns CSV lines into JSON objects by header, or passes them as text', () => {
    const csv = 'user,ts,note\nann,5,"a, ""quoted"" note"\nbob,6,\n';
    const asJson = recordsOfObject('d.csv.gz', new Uint8Array(gzipSync(csv)), { csvColumns: true }).map((r) => JSON.parse(dec.decode(r)));
    expect(asJson).toEqual([
      { user: 'ann', ts: '5', note: 'a, "quoted" note' },
      { user: 'bob', ts: '6', note: '' },
    ]);
    expect(recordsOfObject('d.csv', new TextEncoder().encode(csv), { csvHeader: true }).map((r) => dec.decode(r))).toEqual(['ann,5,"a, ""quoted"" note"', 'bob,6,']);
  });
});

/** Spending per user: 1 s tumbling windows, and a running total upserted by user. */
function spendingJob(watermarks = WatermarkStrategies.boundedOutOfOrderness(0)) {
  const j = job('spending', { maxParallelism: 16 });
  const src = j.source<Ev>({
    name: 'payments',
    shards: 3,
    parse: (r) => {
      const o = r as Record<string, unknown>;
      return { user: String(o['user']), ts: Number(o['ts']), amount: Number(o['amount']) };
    },
    timestamp: (e) => e.ts,
    watermarks,
  });
  src
    .keyBy((e) => e.user, { parallelism: 2 })
    .window(TumblingEventTimeWindows.of(1000))
    .aggregate(
      { createAccumulator: () => 0, add: (e: Ev, a: number) => a + e.amount, getResult: (a: number) => a, merge: (a: number, b: number) => a + b },
      { result: (user, w, sum) => ({ user, start: w.start, sum }) },
    )
    .sinkTo(collectSink('per-second'));
  const total = valueState<number>('total');
  const running: KeyedProcessFunction<string, Ev, { user: string; total: number }> = {
    state: [total],
    processElement(e, ctx, out) {
      const t = (ctx.getState(total).value() ?? 0) + e.amount;
      ctx.getState(total).update(t);
      out.collect({ user: e.user, total: t });
    },
  };
  src.keyBy((e) => e.user, { parallelism: 2 }).process(running).sinkTo(dynamoUpsertSink({ name: 'totals', key: (r) => r.user }));
  return j;
}

function events(n: number): Ev[] {
  const users = ['ann', 'bob', 'cid', 'dee', 'eve'];
  return Array.from({ length: n }, (_, i) => ({ user: users[(i * 7) % users.length]!, ts: 1_000_000 + i * 37, amount: 1 + ((i * 13) % 50) }));
}

/** The events as objects under a prefix: time-ordered parts, JSON lines (some gzipped) and CSV with a header. */
function asObjects(evs: Ev[], store: MemoryObjectStore, bucket: string): void {
  const parts = 6;
  const size = Math.ceil(evs.length / parts);
  for (let p = 0; p < parts; p++) {
    const chunk = evs.slice(p * size, (p + 1) * size);
    const key = `input/part-${String(p).padStart(3, '0')}`;
    if (p % 3 === 2) store.put(bucket, `${key}.csv`, ['user,ts,amount', ...chunk.map((e) => `${e.user},${e.ts},${e.amount}`)].join('\n'));
    else {
      const text = chunk.map((e) => JSON.stringify(e)).join('\n');
      store.put(bucket, p % 2 ? `${key}.jsonl.gz` : `${key}.jsonl`, p % 2 ? new Uint8Array(gzipSync(text)) : text);
    }
  }
  store.put(bucket, 'elsewhere/ignored.jsonl', '{"user":"zed","ts":1,"amount":1000}');
}

const sortRows = (rows: Array<Record<string, unknown>>) => rows.map((r) => JSON.stringify(r)).sort();

async function streamed(evs: Ev[]) {
  const r = new MemoryJobRunner(spendingJob(), { seed: 5, environments: 2 });
  for (let i = 0; i < evs.length; i += 250) {
    r.produce('payments', evs.slice(i, i + 250));
    await r.runUntilIdle();
    await r.checkpoint();
  }
  r.endOfInput();
  await r.drain();
  return r;
}

async function bounded(evs: Ev[], options: { concurrency: number; ordered: boolean; hold?: boolean }) {
  const r = new MemoryJobRunner(spendingJob(options.hold ? HOLD_UNTIL_END : undefined), { seed: 9, environments: 2, recycleProbability: 0.2 });
  const store = new MemoryObjectStore();
  asObjects(evs, store, 'data');
  const reader = new BoundedReader(store, memorySourceWriter(r.mem.kinesis));
  const stream = r.names.sourceStream(r.plan.sources[0]!);
  const seen: string[] = [];
  const stats = await reader.run({ bucket: 'data', prefix: 'input/', stream, concurrency: options.concurrency, ordered: options.ordered, csvColumns: true, onObject: (k) => seen.push(k) });
  // the reader ended the input: the last record of every shard is the end-of-input control record
  for (const s of r.mem.kinesis.listShards(stream)) {
    const recs = r.mem.kinesis.records(stream, s.shardId);
    expect(decodeSourceControl(recs[recs.length - 1]!.data)).toEqual({ kind: 'end' });
  }
  await r.drain(); // runs to idle and commits the final checkpoint
  return { r, stats, seen };
}

describe('bounded input, same job', () => {
  const evs = events(1200);

  it('a job over objects under an S3 prefix ends with the same results as the same job fed the records as a stream', async () => {
    const a = await streamed(evs);
    const { r: b, stats, seen } = await bounded(evs, { concurrency: 4, ordered: true });
    expect(stats).toMatchObject({ objects: 6, records: evs.length });
    expect(seen).toEqual([...seen].sort()); // put in key order though fetched 4 at a time
    expect(b.deadLetters()).toEqual([]);
    expect(sortRows(b.published('per-second'))).toEqual(sortRows(a.published('per-second')));
    const totals = (x: MemoryJobRunner) => new Map([...x.upserts('totals')].map(([k, v]) => [k, v['total']]));
    expect(totals(b)).toEqual(totals(a));
    expect(a.published('per-second').length).toBeGreaterThan(40);
  });

  it('objects put out of order lose nothing when the source holds its watermark until the end of input', async () => {
    const a = await streamed(evs);
    const { r: b } = await bounded(evs, { concurrency: 6, ordered: false, hold: true });
    expect(sortRows(b.published('per-second'))).toEqual(sortRows(a.published('per-second')));
  });
});
