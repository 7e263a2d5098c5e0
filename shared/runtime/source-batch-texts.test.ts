/**
 * A source decodes the JSON or text of a whole batch at once (`batchTexts`) when all of it is
 * ASCII, and each record parses its substring. A record's text must be the very string decoding it
 * alone gives, and a record that is not UTF-8 must still go to the dead letters alone.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { collectSink, job } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { encodeSourceControl } from '../codec/envelope.js';
import type { PlanSource } from '../plan/plan.js';
import type { StoredRecord } from './ports.js';
import { batchTexts } from './source-decoding.js';
import { SourceRecordReader } from './source-records.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });
const enc = new TextEncoder();

type Layout = 'own' | 'adjacent' | 'gaps';
const layout = fc.constantFrom<Layout>('own', 'adjacent', 'gaps');

/**
 * records over `datas`: each in its own buffer, one after the other in one buffer (as
 * `kinesisBatch` makes them), or in one buffer with a byte between them
 */
function records(datas: readonly Uint8Array[], how: Layout): StoredRecord[] {
  const all = new Uint8Array(datas.reduce((a, d) => a + d.length + 1, 8)).fill(0x78);
  let at = 3; // not at the buffer's start
  return datas.map((d, i) => {
    let data = new Uint8Array(d);
    if (how !== 'own') {
      all.set(d, at);
      data = new Uint8Array(all.buffer, at, d.length);
      at += d.length + (how === 'gaps' ? 1 : 0);
    }
    return { sequenceNumber: String(100 + i), partitionKey: 'p', data };
  });
}

const jsonSource: PlanSource = { id: 'src', kind: 'kinesis', name: 'in', shards: 1, format: 'json', deaggregate: true };

describe('a batch\'s texts decoded at once', () => {
  it('give an all-ASCII batch each record\'s own text, wherever its records lie', () => {
    const ascii = fc.string({ unit: fc.integer({ min: 0, max: 0x7f }).map((c) => String.fromCharCode(c)), maxLength: 30 });
    fc.assert(
      fc.property(fc.array(ascii, { minLength: 1, maxLength: 10 }), layout, (texts, how) => {
        // one starting with NUL is left out (as a control record would be), to be decoded alone
        const want = texts.map((t) => (t.startsWith('\u0000') ? undefined : t));
        expect(batchTexts(records(texts.map((t) => enc.encode(t)), how))).toEqual(want.some((t) => t !== undefined) ? want : undefined);
      }),
    );
  });

  it('leave out the control records among the data: the others keep their texts', () => {
    const ascii = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 30 });
    const control = encodeSourceControl({ kind: 'barrier', checkpointId: 7, topology: [1, 2], savepoint: false, time: 1_767_225_600_000 });
    expect([...control].some((b) => b >= 0x80)).toBe(true);
    fc.assert(
      fc.property(fc.array(fc.option(ascii, { nil: undefined }), { minLength: 1, maxLength: 10 }), layout, (texts, how) => {
        fc.pre(texts.some((t) => t !== undefined));
        // undefined: a control record there
        expect(batchTexts(records(texts.map((t) => (t === undefined ? control : enc.encode(t))), how))).toEqual(texts);
      }),
    );
  });

  it('leave a batch with any other byte to be decoded record by record (a text, if any, is the record\'s own decoding)', () => {
    const data = fc.oneof(
      fc.string({ maxLength: 20 }).map((t) => enc.encode(t)),
      fc.constant(new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d])), // a byte-order mark, then {}
      fc.uint8Array({ maxLength: 20 }),
    );
    fc.assert(
      fc.property(fc.array(data, { minLength: 1, maxLength: 8 }), layout, (datas, how) => {
        const rs = records(datas, how);
        const texts = batchTexts(rs);
        // one starting with NUL (a string "\u0000…" among them) is left to be decoded alone, as a control record is
        if (texts) rs.forEach((r, i) => expect(texts[i]).toBe(r.data[0] === 0 ? undefined : utf8.decode(r.data)));
      }),
    );
  });

  it('send a JSON record that is not UTF-8 to the dead letters alone', () => {
    for (const how of ['own', 'adjacent', 'gaps'] as const) {
      const rs = records([enc.encode('{"k":"a"}'), new Uint8Array([...enc.encode('{"k":"'), 0xff, ...enc.encode('"}')]), enc.encode('{"k":"c"}')], how);
      const seen: unknown[] = [];
      const reader = new SourceRecordReader('shardId-000000000001', jsonSource, undefined, (v) => seen.push(v), { sourceRecord: () => undefined }, { recordsIn: 0 });
      const texts = reader.texts(rs);
      expect(rs.map((r, i) => reader.read(r, undefined, texts?.[i])?.reason)).toEqual([undefined, expect.stringContaining('cannot decode json record'), undefined]);
      expect(seen).toEqual([{ k: 'a' }, { k: 'c' }]);
    }
  });

  it('are what the reader parses, not the bytes again', () => {
    const seen: unknown[] = [];
    const reader = new SourceRecordReader('shardId-000000000001', jsonSource, undefined, (v) => seen.push(v), { sourceRecord: () => undefined }, { recordsIn: 0 });
    // bytes that would not decode: only the text can give the value
    expect(reader.read({ sequenceNumber: '1', partitionKey: 'p', data: new Uint8Array([0xff, 0xff]) }, undefined, '{"k":"t"}')).toBeUndefined();
    expect(seen).toEqual([{ k: 't' }]);
  });

  afterEach(() => vi.restoreAllMocks());

  it('reach the reader from the instance: every data record of an all-ASCII batch is read with its text', async () => {
    const read = vi.spyOn(SourceRecordReader.prototype, 'read');
    const j = job('source-texts');
    j.source<{ k: string }>({ name: 'in', shards: 1, format: 'json' }).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    const input = ['{"k":"a"}', '{"k": "broken', '{"k":"c"}'];
    r.produce('in', input.map((t) => enc.encode(t)));
    await r.drain();
    expect(r.published('out')).toEqual([{ k: 'a' }, { k: 'c' }]);
    expect(r.deadLetters().map((l) => l.reason)).toEqual([expect.stringMatching(/^cannot decode json record: SyntaxError/)]);
    // (a failed record is read once more, resuming after its dead letter: nothing is left to decode then)
    const first = read.mock.calls.filter(([, resume]) => resume === undefined);
    expect(first.map(([record, , text]) => [utf8.decode(record.data), text])).toEqual(input.map((t) => [t, t]));
  });
});
