/**
 * A source instance points one meta at each user record in turn (source-records.ts). Nothing of one
 * record may reach the next: each record's event time and id (seen through `ctx.timestamp` and
 * `ctx.random()`, which the id seeds) are its own, also right after a record that failed half-way
 * through the chain, one that failed to decode, and inside a KPL aggregate with a bad user record;
 * every failure is a dead letter with its position and reason.
 */
import aggModule from 'aws-kinesis-agg';
import { describe, expect, it } from 'vitest';
import { collectSink, job, WatermarkStrategies } from '../api/index.js';
import { decodeSourceControl } from '../codec/envelope.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { seededRandom } from './random.js';

const kpl = aggModule as unknown as {
  RecordAggregator: new () => { addUserRecord(r: { partitionKey: string; data: Buffer }): void; build(): { data: Buffer } };
};

interface In {
  k: string;
  ts?: number;
  fail?: boolean;
}
interface Seen {
  k: string;
  ts: number | undefined;
  draw: number;
}

const enc = new TextEncoder();
const json = (v: unknown) => enc.encode(JSON.stringify(v));

function aggregate(records: readonly Uint8Array[]): Uint8Array {
  const agg = new kpl.RecordAggregator();
  for (const data of records) agg.addUserRecord({ partitionKey: 'agg', data: Buffer.from(data) });
  return new Uint8Array(agg.build().data);
}

describe('source records: one meta, pointed at each record in turn', () => {
  it('each record sees its own event time and id, around records that fail to decode, fail in the chain, or sit in a KPL aggregate', async () => {
    const j = job('source-meta');
    j.source<In>({ name: 'in', shards: 1, format: 'json', timestamp: (v) => v.ts! })
      .map((v, ctx): Seen => {
        // the draw comes first: a record that then throws has used its meta half-way
        const seen = { k: v.k, ts: ctx.timestamp, draw: ctx.random() };
        if (v.fail) throw new Error(`refused ${v.k}`);
        return seen;
      })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    const input: Uint8Array[] = [
      json({ k: 'a', ts: 1_000 }),
      enc.encode('{"k": "broken'),
      json({ k: 'b', ts: 2_000.7 }),
      json({ k: 'c', ts: 3_000, fail: true }),
      json({ k: 'd' }), // no event time: the timestamp function gives undefined
      json({ k: 'e', ts: 5_000 }),
      aggregate([json({ k: 'f', ts: 6_000 }), enc.encode('not json'), json({ k: 'g', ts: 7_000 }), json({ k: 'h', ts: 8_000, fail: true }), json({ k: 'i', ts: 9_000 })]),
      json({ k: 'j', ts: 10_000 }),
    ];
    // every record in one shard, read in one batch by one instance (the barriers of `drain` come after)
    r.produce('in', input);
    await r.drain();

    const stream = r.names.sourceStream(r.plan.sources[0]!);
    const [shard] = r.mem.kinesis.listShards(stream);
    const seqs = r.mem.kinesis.records(stream, shard!.shardId).flatMap((x) => (decodeSourceControl(x.data) ? [] : [x.sequenceNumber]));
    expect(seqs).toHaveLength(input.length);
    // the oracle: the id is `shard:sequence number:index in the Kinesis record`; it seeds ctx.random()
    const expected = (k: string, ts: number, record: number, index = 0): Seen => ({ k, ts, draw: seededRandom(`${shard!.shardId}:${seqs[record]}:${index}`)() });
    expect(r.published<Seen>('out')).toEqual([
      expected('a', 1_000, 0),
      expected('b', 2_000, 2),
      expected('e', 5_000, 5),
      expected('f', 6_000, 6, 0),
      expected('g', 7_000, 6, 2),
      expected('i', 9_000, 6, 4),
      expected('j', 10_000, 7),
    ]);
    const letters = r
      .deadLetters()
      .map((l) => ({ at: `${seqs.indexOf(l.sequenceNumber)}:${l.subSequence}`, reason: l.reason, data: new TextDecoder().decode(l.data) }))
      .sort((x, y) => x.at.localeCompare(y.at));
    expect(letters).toEqual([
      { at: '1:0', reason: expect.stringMatching(/^cannot decode json record: SyntaxError: .*JSON/), data: '{"k": "broken' },
      { at: '3:0', reason: expect.stringMatching(/^user function failed: UserFunctionError: map \(op\d+-map\): Error: refused c$/), data: JSON.stringify({ k: 'c', ts: 3_000, fail: true }) },
      { at: '4:0', reason: 'cannot decode json record: Error: the timestamp function returned undefined, not a finite number of ms', data: JSON.stringify({ k: 'd' }) },
      { at: '6:1', reason: expect.stringMatching(/^cannot decode json record: SyntaxError: /), data: 'not json' },
      { at: '6:3', reason: expect.stringMatching(/^user function failed: UserFunctionError: map \(op\d+-map\): Error: refused h$/), data: JSON.stringify({ k: 'h', ts: 8_000, fail: true }) },
    ]);
  });

  it('a KPL aggregate that cannot be de-aggregated is one dead letter, and the records around it keep their ids', async () => {
    const j = job('source-kpl-broken');
    j.source<In>({ name: 'in', shards: 1, format: 'json', timestamp: (v) => v.ts! })
      .map((v, ctx): Seen => ({ k: v.k, ts: ctx.timestamp, draw: ctx.random() }))
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    const broken = aggregate([json({ k: 'x', ts: 1 }), json({ k: 'y', ts: 2 })]);
    broken[broken.length - 1]! ^= 0x5a; // its MD5 checksum no longer matches
    r.produce('in', [json({ k: 'a', ts: 1_000 }), broken, json({ k: 'b', ts: 2_000 })]);
    await r.drain();
    const stream = r.names.sourceStream(r.plan.sources[0]!);
    const [shard] = r.mem.kinesis.listShards(stream);
    const seqs = r.mem.kinesis.records(stream, shard!.shardId).flatMap((x) => (decodeSourceControl(x.data) ? [] : [x.sequenceNumber]));
    const expected = (k: string, ts: number, record: number): Seen => ({ k, ts, draw: seededRandom(`${shard!.shardId}:${seqs[record]}:0`)() });
    expect(r.published<Seen>('out')).toEqual([expected('a', 1_000, 0), expected('b', 2_000, 2)]);
    const [letter, ...more] = r.deadLetters();
    expect(more).toEqual([]);
    expect(letter).toMatchObject({ sequenceNumber: seqs[1], subSequence: 0, reason: expect.stringMatching(/^cannot de-aggregate KPL record: /) });
    expect(letter!.data).toEqual(broken);
  });

  it('a record whose event time is too large for the wire is a dead letter, and the next stage still completes its checkpoints', async () => {
    const j = job('source-huge-time');
    j.source<In>({ name: 'in', shards: 1, format: 'json', timestamp: (v) => v.ts! })
      .keyBy((v) => v.k)
      .reduce((a, b) => ({ k: a.k, ts: Math.max(a.ts!, b.ts!) }))
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    r.produce('in', [json({ k: 'a', ts: 1_000 }), json({ k: 'b', ts: 1e300 }), json({ k: 'c', ts: 3_000 })]);
    // a record whose output took a sequence number and was never written held the checkpoint forever
    await r.drain();
    expect(r.published<In>('out').map((v) => v.k).sort()).toEqual(['a', 'c']);
    expect(r.deadLetters().map((l) => [l.reason, new TextDecoder().decode(l.data)])).toEqual([
      [`cannot decode json record: Error: the timestamp function returned 1e+300, beyond ±${2 ** 50} ms`, JSON.stringify({ k: 'b', ts: 1e300 })],
    ]);
  });

  it('an event time the wire carries but only just (−(2^53 − 1)) is a dead letter: its watermark and its difference from the next time could not be written', async () => {
    const j = job('source-low-time');
    j.source<In>({ name: 'in', shards: 1, format: 'json', timestamp: (v) => v.ts! })
      .keyBy((v) => v.k)
      .reduce((a, b) => ({ k: a.k, ts: Math.max(a.ts!, b.ts!) }))
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    r.produce('in', [json({ k: 'a', ts: -(2 ** 53 - 1) }), json({ k: 'a', ts: 0 })]);
    // a safe integer, but its zig-zag varint is not: the batch failed at its watermark, forever
    await r.drain();
    expect(r.published<In>('out')).toEqual([{ k: 'a', ts: 0 }]);
    expect(r.deadLetters().map((l) => [l.reason, new TextDecoder().decode(l.data)])).toEqual([
      [`cannot decode json record: Error: the timestamp function returned ${-(2 ** 53 - 1)}, beyond ±${2 ** 50} ms`, JSON.stringify({ k: 'a', ts: -(2 ** 53 - 1) })],
    ]);
  });

  it('a JSON record holding half a surrogate pair is a dead letter, not a record whose key or value changed on its way to the next stage', async () => {
    const j = job('source-lone-surrogate');
    j.source<In>({ name: 'in', shards: 1, format: 'json', timestamp: (v) => v.ts! })
      .keyBy((v) => v.k)
      .reduce((a) => a)
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    // JSON.stringify writes the escape: {"k":"\udc00","ts":0}
    r.produce('in', [json({ k: '\udc00', ts: 0 }), json({ k: '\ud83d\ude00', ts: 0 })]);
    await r.drain();
    // without the check the first reached the reduce as "\ufffd\ufffd\ufffd": another key, another key group
    expect(r.published<In>('out')).toEqual([{ k: '\ud83d\ude00', ts: 0 }]);
    expect(r.deadLetters().map((l) => [l.reason, new TextDecoder().decode(l.data)])).toEqual([
      ['cannot decode json record: RangeError: the string "\\udc00" holds a lone surrogate, which UTF-8 cannot carry', '{"k":"\\udc00","ts":0}'],
    ]);
  });

  it('an out-of-orderness bound whose watermarks the wire cannot carry is refused when the job is built, not at every batch', () => {
    const source = (bound: number) => job('source-bound').source<In>({ name: 'in', timestamp: (v) => v.ts!, watermarks: WatermarkStrategies.boundedOutOfOrderness(bound) });
    // 1.5 made every watermark a fraction, 2^53 one beyond the wire: each batch failed, forever
    for (const bound of [1.5, 2 ** 53, -5, Number.NaN]) expect(() => source(bound)).toThrow(/source in: watermarks.maxOutOfOrdernessMs must be a whole number of ms from 0 to 1125899906842624/);
    for (const bound of [0, 5_000, 2 ** 50]) expect(() => source(bound)).not.toThrow();
  });
});
