import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { awsError, MemoryKinesis, memoryKinesisApi, throttled } from './memory/memory-ports.js';
import { chunkForPut, MAX_BYTES_PER_PUT, putRecordsUntilAccepted, type KinesisApi, type PutEntry } from './put-records.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const noPause = async () => {};
const entry = (i: number, size = 4): PutEntry => ({ data: enc.encode(`r${i}`.padEnd(size, '.')), partitionKey: `k${i}` });

/** The twin's service under a fault schedule: whole requests throttled, single entries rejected. */
function faulty(schedule: { throttleRequest: boolean[]; reject: boolean[] }) {
  let req = 0;
  let ent = 0;
  const k = new MemoryKinesis({ faults: { rejectPutEntry: () => schedule.reject[ent++ % schedule.reject.length] ?? false } });
  k.createStream('s', 3);
  const inner = memoryKinesisApi(k);
  const api: KinesisApi = {
    ...inner,
    putRecords: async (stream, entries, attempt) => {
      if (schedule.throttleRequest[req++ % schedule.throttleRequest.length]) throw throttled();
      return inner.putRecords(stream, entries, attempt);
    },
  };
  const stored = () => k.listShards('s').flatMap((s) => k.records('s', s.shardId).map((r) => ({ shardId: s.shardId, seq: r.sequenceNumber, text: dec.decode(r.data) })));
  return { k, api, stored };
}

describe('putRecordsUntilAccepted', () => {
  it('lands every entry exactly once, reports where, and keeps chunk order, under any schedule of throttles and rejections', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 1_300 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 7 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 13 }).map((a) => [...a, false]), // some entry gets through
        fc.integer({ min: 1, max: 500 }),
        async (n, throttleRequest, reject, maxRecordsPerRequest) => {
          const f = faulty({ throttleRequest: [...throttleRequest, false], reject });
          const entries = Array.from({ length: n }, (_, i) => entry(i));
          const afterChunk: number[] = [];
          let retried = 0;
          const positions = await putRecordsUntilAccepted(f.api, 's', entries, {
            pause: noPause,
            maxRecordsPerRequest,
            onRetry: (k) => (retried += k),
            afterChunk: (end) => void afterChunk.push(end),
          });
          const stored = f.stored();
          // exactly once
          expect(stored.map((s) => s.text).sort()).toEqual(entries.map((e) => dec.decode(e.data)).sort());
          // each position names where its entry landed
          const bySeq = new Map(stored.map((s) => [s.seq, s]));
          positions.forEach((p, i) => expect(bySeq.get(p.sequenceNumber)).toEqual({ shardId: p.shardId, seq: p.sequenceNumber, text: dec.decode(entries[i]!.data) }));
          // chunks one at a time: every entry of a chunk lands before any entry of the next
          const chunkOf = (i: number) => Math.floor(i / maxRecordsPerRequest);
          for (let i = 1; i < n; i++) if (chunkOf(i) > chunkOf(i - 1)) expect(positions[i]!.sequenceNumber > positions[i - 1]!.sequenceNumber).toBe(true);
          expect(afterChunk).toEqual(Array.from({ length: Math.ceil(n / maxRecordsPerRequest) }, (_, c) => Math.min(n, (c + 1) * maxRecordsPerRequest)));
          expect(retried).toBe(f.k.stats.rejectedEntries);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('sends again only the rejected entries, which may then land after later ones', async () => {
    const f = faulty({ throttleRequest: [false], reject: [false, true, false, false] });
    const sent: string[][] = [];
    const api: KinesisApi = { ...f.api, putRecords: (s, e, a) => (sent.push(e.map((x) => dec.decode(x.data))), f.api.putRecords(s, e, a)) };
    await putRecordsUntilAccepted(api, 's', [0, 1, 2].map((i) => entry(i, 2)), { pause: noPause });
    expect(sent).toEqual([['r0', 'r1', 'r2'], ['r1']]);
  });

  it('retries a throttled request after a pause, and gives up on other errors at once', async () => {
    const pauses: number[] = [];
    let calls = 0;
    const k = new MemoryKinesis();
    k.createStream('s', 1);
    const inner = memoryKinesisApi(k);
    const api: KinesisApi = { ...inner, putRecords: async (s, e, a) => (++calls <= 3 ? Promise.reject(throttled()) : inner.putRecords(s, e, a)) };
    await putRecordsUntilAccepted(api, 's', [entry(0)], { pause: async (a) => void pauses.push(a) });
    expect(pauses).toEqual([0, 1, 2]);
    const broken: KinesisApi = { ...inner, putRecords: () => Promise.reject(awsError('ResourceNotFoundException')) };
    await expect(putRecordsUntilAccepted(broken, 's', [entry(0)], { pause: noPause })).rejects.toThrow('ResourceNotFoundException');
    const forever: KinesisApi = { ...inner, putRecords: () => Promise.reject(throttled()) };
    await expect(putRecordsUntilAccepted(forever, 's', [entry(0)], { pause: noPause, maxThrottleRetries: 5 })).rejects.toThrow('Rate exceeded');
  });

  it('sends parallel chunks at once', async () => {
    const k = new MemoryKinesis();
    k.createStream('s', 1);
    const inner = memoryKinesisApi(k);
    let inFlight = 0;
    let most = 0;
    const api: KinesisApi = {
      ...inner,
      putRecords: async (s, e, a) => {
        most = Math.max(most, ++inFlight);
        await new Promise((r) => setImmediate(r));
        inFlight--;
        return inner.putRecords(s, e, a);
      },
    };
    await putRecordsUntilAccepted(api, 's', Array.from({ length: 1_200 }, (_, i) => entry(i)), { parallel: true });
    expect(most).toBe(3);
  });
});

describe('chunkForPut', () => {
  it('keeps each request within 500 entries and 5 MiB of data and partition keys, in order', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 1024 * 1024 - 10 }), { maxLength: 40 }), fc.integer({ min: 0, max: 700 }), (big, small) => {
        const entries = [...big.map((size, i) => entry(i, size)), ...Array.from({ length: small }, (_, i) => entry(1_000 + i))];
        const chunks = chunkForPut(entries);
        expect(chunks.flatMap((c) => c.entries)).toEqual(entries);
        let start = 0;
        for (const c of chunks) {
          expect(c.start).toBe(start);
          start += c.entries.length;
          expect(c.entries.length).toBeLessThanOrEqual(500);
          expect(c.entries.reduce((a, e) => a + e.data.length + e.partitionKey.length, 0)).toBeLessThanOrEqual(MAX_BYTES_PER_PUT);
        }
      }),
      { numRuns: 40 },
    );
  });
});
