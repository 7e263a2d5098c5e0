import { describe, expect, it } from 'vitest';
import { deadLetterKey } from '../aws/s3-dead-letters.js';
import { hashKeyOfEvenShard, hashKeyOfKeyGroup, keyGroupsOfHashRange } from '../../plan/key-groups.js';
import type { SnapshotPointer, StateRow, StoredRecord } from '../../runtime/ports.js';
import { compareSeq } from '../../runtime/positions.js';
import { FencedError } from '../../util/errors.js';
import { CountingTelemetry } from '../telemetry.js';
import {
  awsError,
  createMemoryPorts,
  evenHashRanges,
  HASH_SPACE,
  hashKeyOfPartitionKey,
  MemoryKinesis,
  memoryDeadLetterKey,
  throttled,
  withHooks,
  type PortOp,
} from './memory-ports.js';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

async function readAll(it: AsyncIterable<StoredRecord[]>): Promise<StoredRecord[][]> {
  const pages: StoredRecord[][] = [];
  for await (const p of it) pages.push(p);
  return pages;
}

describe('MemoryKinesis', () => {
  it('splits the hash space evenly and contiguously, as CreateStream does', () => {
    for (const n of [1, 2, 3, 5, 7, 64]) {
      const r = evenHashRanges(n);
      expect(r[0]!.start).toBe(0n);
      expect(r[n - 1]!.end).toBe(HASH_SPACE - 1n);
      for (let i = 1; i < n; i++) expect(r[i]!.start).toBe(r[i - 1]!.end + 1n);
    }
    // AWS' own split of 3 shards
    expect(evenHashRanges(3).map((x) => x.start.toString())).toEqual([
      '0',
      '113427455640312821154458202477256070485',
      '226854911280625642308916404954512140970',
    ]);
  });

  it('places a record by ExplicitHashKey and by the MD5 of its partition key', () => {
    const k = new MemoryKinesis();
    k.createStream('s', 4);
    for (let i = 0; i < 4; i++) {
      const r = k.putRecord('s', { data: bytes(`x${i}`), partitionKey: 'p', explicitHashKey: hashKeyOfEvenShard(i, 4) });
      expect(r.shardId).toBe(k.listShards('s')[i]!.shardId);
    }
    const pk = 'user-42';
    const h = hashKeyOfPartitionKey(pk);
    const expected = k.listShards('s').find((s) => h >= BigInt(s.startingHashKey) && h <= BigInt(s.endingHashKey))!.shardId;
    expect(k.putRecord('s', { data: bytes('y'), partitionKey: pk }).shardId).toBe(expected);
    // MD5("") = d41d8cd98f00b204e9800998ecf8427e
    expect(hashKeyOfPartitionKey('').toString(16)).toBe('d41d8cd98f00b204e9800998ecf8427e');
  });

  it('gives increasing 56-digit sequence numbers that compare as strings', () => {
    const k = new MemoryKinesis({ seed: 7 });
    k.createStream('s', 2);
    const seqs: string[] = [];
    for (let i = 0; i < 200; i++) seqs.push(k.putRecord('s', { data: bytes(String(i)), partitionKey: `k${i}` }).sequenceNumber);
    for (const s of seqs) expect(s).toMatch(/^49\d{54}$/);
    for (let i = 1; i < seqs.length; i++) {
      expect(compareSeq(seqs[i - 1]!, seqs[i]!)).toBeLessThan(0);
      expect(BigInt(seqs[i]!) > BigInt(seqs[i - 1]!)).toBe(true);
    }
    // gaps: neighbours are not always +1
    expect(seqs.some((s, i) => i > 0 && BigInt(s) - BigInt(seqs[i - 1]!) > 1n)).toBe(true);
  });

  it('rejects requests Kinesis rejects', () => {
    const k = new MemoryKinesis();
    k.createStream('s', 1);
    expect(() => k.putRecords('s', [])).toThrow(expect.objectContaining({ name: 'ValidationException' }));
    expect(() => k.putRecords('s', Array.from({ length: 501 }, () => ({ data: bytes('a'), partitionKey: 'p' })))).toThrow(
      expect.objectContaining({ name: 'ValidationException' }),
    );
    expect(() => k.putRecord('s', { data: new Uint8Array(1024 * 1024), partitionKey: 'p' })).toThrow(expect.objectContaining({ name: 'ValidationException' }));
    expect(() => k.putRecord('s', { data: bytes('a'), partitionKey: 'p', explicitHashKey: (HASH_SPACE).toString() })).toThrow(
      expect.objectContaining({ name: 'ValidationException' }),
    );
    expect(() => k.putRecord('s', { data: bytes('a'), partitionKey: 'p', explicitHashKey: '-1' })).toThrow(expect.objectContaining({ name: 'ValidationException' }));
    expect(() => k.putRecord('nope', { data: bytes('a'), partitionKey: 'p' })).toThrow(expect.objectContaining({ name: 'ResourceNotFoundException' }));
    expect(() => k.createStream('s', 1)).toThrow(expect.objectContaining({ name: 'ResourceInUseException' }));
  });

  it('keeps its own copy of the data', () => {
    const k = new MemoryKinesis();
    k.createStream('s', 1);
    const d = bytes('abc');
    k.putRecord('s', { data: d, partitionKey: 'p' });
    d[0] = 0x7a;
    expect(text(k.records('s', 'shardId-000000000000')[0]!.data)).toBe('abc');
  });

  it('answers PutRecords per entry when the fault hook rejects some', () => {
    const k = new MemoryKinesis({ faults: { rejectPutEntry: (e) => e.index % 2 === 1 } });
    k.createStream('s', 1);
    const r = k.putRecords('s', [0, 1, 2, 3].map((i) => ({ data: bytes(String(i)), partitionKey: 'p' })));
    expect(r.map((x) => x.errorCode ?? 'ok')).toEqual(['ok', 'ProvisionedThroughputExceededException', 'ok', 'ProvisionedThroughputExceededException']);
    expect(k.records('s', 'shardId-000000000000').map((x) => text(x.data))).toEqual(['0', '2']);
    expect(k.stats.rejectedEntries).toBe(2);
  });

  it('reshards: parents close, children split the space evenly and name their parents', () => {
    const k = new MemoryKinesis();
    k.createStream('s', 2);
    k.putRecord('s', { data: bytes('a'), partitionKey: 'p', explicitHashKey: '0' });
    k.reshard('s', 3);
    const all = k.listShards('s');
    expect(all).toHaveLength(5);
    expect(all[0]!.endingSequenceNumber).toBeDefined();
    expect(all[1]!.endingSequenceNumber).toBeDefined();
    const open = all.filter((s) => !s.endingSequenceNumber);
    expect(open.map((s) => s.parentShardId)).toEqual(['shardId-000000000000', 'shardId-000000000000', 'shardId-000000000001']);
    expect(open[1]!.adjacentParentShardId).toBe('shardId-000000000001');
    expect(k.putRecord('s', { data: bytes('b'), partitionKey: 'p', explicitHashKey: '0' }).shardId).toBe('shardId-000000000002');
  });
});

describe('shard directory, writer and reader', () => {
  it('lists open shards only', async () => {
    const m = createMemoryPorts();
    m.kinesis.createStream('s', 2);
    m.kinesis.reshard('s', 1);
    expect((await m.ports.shards.openShards('s')).map((s) => s.shardId)).toEqual(['shardId-000000000002']);
    await expect(m.ports.shards.openShards('missing')).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
  });

  it('retries rejected entries until all land; retried ones land after later ones', async () => {
    const telemetry = new CountingTelemetry();
    const m = createMemoryPorts({ telemetry });
    m.kinesis.createStream('s', 1);
    const h = hashKeyOfEvenShard(0, 1);
    m.faults.rejectPutEntry = (e) => e.attempt === 0 && text(e.data) === 'r1';
    await m.ports.writer.putAll('s', ['r0', 'r1', 'r2', 'r3'].map((d) => ({ hashKey: h, data: bytes(d) })));
    expect(m.kinesis.records('s', 'shardId-000000000000').map((r) => text(r.data))).toEqual(['r0', 'r2', 'r3', 'r1']);
    expect(telemetry.get('PutRecordsRetried')).toBe(1);
  });

  it('lets other writers land between a rejection and its retry', async () => {
    const m = createMemoryPorts();
    m.kinesis.createStream('s', 1);
    const h = hashKeyOfEvenShard(0, 1);
    m.faults.rejectPutEntry = (e) => e.attempt < 2 && text(e.data) === 'a1';
    await Promise.all([
      m.ports.writer.putAll('s', [{ hashKey: h, data: bytes('a1') }]),
      m.ports.writer.putAll('s', [{ hashKey: h, data: bytes('b1') }]),
    ]);
    expect(m.kinesis.records('s', 'shardId-000000000000').map((r) => text(r.data))).toEqual(['b1', 'a1']);
  });

  it('chunks large writes within the PutRecords limits', async () => {
    const m = createMemoryPorts();
    m.kinesis.createStream('s', 2);
    const recs = Array.from({ length: 1201 }, (_, i) => ({ hashKey: hashKeyOfEvenShard(i % 2, 2), data: bytes(`r${i}`) }));
    await m.ports.writer.putAll('s', recs);
    expect(m.kinesis.stats.putRequests).toBe(3);
    expect(m.kinesis.records('s', 'shardId-000000000000')).toHaveLength(601);
  });

  it('reads pages from start, at and after a position, up to a bound', async () => {
    const m = createMemoryPorts({ pageSize: 3 });
    m.kinesis.createStream('s', 1);
    for (let i = 0; i < 10; i++) m.kinesis.putRecord('s', { data: bytes(`r${i}`), partitionKey: 'p' });
    const recs = m.kinesis.records('s', 'shardId-000000000000');
    const all = await readAll(m.ports.reader.read('s', 'shardId-000000000000', { from: 'start' }, undefined));
    expect(all.map((p) => p.length)).toEqual([3, 3, 3, 1]);
    const at = (await readAll(m.ports.reader.read('s', 'shardId-000000000000', { from: 'at', sequenceNumber: recs[4]!.sequenceNumber }, recs[8]!.sequenceNumber))).flat();
    expect(at.map((r) => text(r.data))).toEqual(['r4', 'r5', 'r6', 'r7']);
    const after = (await readAll(m.ports.reader.read('s', 'shardId-000000000000', { from: 'after', sequenceNumber: recs[4]!.sequenceNumber }, recs[6]!.sequenceNumber))).flat();
    expect(after.map((r) => text(r.data))).toEqual(['r5']);
    // a replay point names a record of the shard: a position between two records cannot be checked
    const between = (BigInt(recs[2]!.sequenceNumber) + 1n).toString();
    await expect(readAll(m.ports.reader.read('s', 'shardId-000000000000', { from: 'at', sequenceNumber: between }, recs[4]!.sequenceNumber))).rejects.toMatchObject({
      code: 'REPLAY_TRIMMED',
    });
  });

  it('backs off and retries when throttled', async () => {
    const m = createMemoryPorts({ pageSize: 2 });
    m.kinesis.createStream('s', 1);
    for (let i = 0; i < 5; i++) m.kinesis.putRecord('s', { data: bytes(`r${i}`), partitionKey: 'p' });
    let calls = 0;
    m.faults.before = (op) => {
      if (op === 'kinesis.getRecords' && calls++ % 2 === 0) throw throttled();
    };
    const all = (await readAll(m.ports.reader.read('s', 'shardId-000000000000', { from: 'start' }, undefined))).flat();
    expect(all).toHaveLength(5);
    expect(calls).toBeGreaterThan(3);
  });

  it('fails loudly when the record a replay point names was trimmed, even though the shard answers', async () => {
    const m = createMemoryPorts();
    m.kinesis.createStream('s', 1);
    const shard = 'shardId-000000000000';
    for (let i = 0; i < 5; i++) m.kinesis.putRecord('s', { data: bytes(`r${i}`), partitionKey: 'p' });
    const recs = [...m.kinesis.records('s', shard)];
    m.kinesis.trim('s', shard, 2);
    // like Kinesis, a trimmed position is not refused: the records start at the oldest retained one
    expect(m.kinesis.getRecords('s', shard, { from: 'at', sequenceNumber: recs[0]!.sequenceNumber }, 10).map((r) => text(r.data))).toEqual(['r2', 'r3', 'r4']);
    for (const from of ['at', 'after'] as const) {
      for (const until of [undefined, recs[4]!.sequenceNumber]) {
        const err = await readAll(m.ports.reader.read('s', shard, { from, sequenceNumber: recs[1]!.sequenceNumber }, until)).catch((e: unknown) => e);
        expect(err, `${from} ${until}`).toMatchObject({ code: 'REPLAY_TRIMMED', retryable: false });
        expect((err as Error).message).toContain(`${shard}`);
        expect((err as Error).message).toContain(recs[1]!.sequenceNumber);
        expect((err as Error).message).toContain(`first record available is ${recs[2]!.sequenceNumber}`);
      }
    }
    // a shard emptied by retention: nothing at all from the replay point on
    m.kinesis.trim('s', shard, 3);
    await expect(readAll(m.ports.reader.read('s', shard, { from: 'after', sequenceNumber: recs[4]!.sequenceNumber }, undefined))).rejects.toMatchObject({
      code: 'REPLAY_TRIMMED',
      message: expect.stringContaining('holds no record from there on'),
    });
  });

  it('replays from a retained record: at it, just after it, after the last record of the shard', async () => {
    const m = createMemoryPorts({ pageSize: 2 });
    m.kinesis.createStream('s', 1);
    const shard = 'shardId-000000000000';
    for (let i = 0; i < 5; i++) m.kinesis.putRecord('s', { data: bytes(`r${i}`), partitionKey: 'p' });
    const recs = [...m.kinesis.records('s', shard)];
    m.kinesis.trim('s', shard, 1);
    const read = async (from: 'at' | 'after', i: number, until?: number) =>
      (await readAll(m.ports.reader.read('s', shard, { from, sequenceNumber: recs[i]!.sequenceNumber }, until === undefined ? undefined : recs[until]!.sequenceNumber)))
        .flat()
        .map((r) => text(r.data));
    expect(await read('at', 1)).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(await read('after', 1)).toEqual(['r2', 'r3', 'r4']);
    expect(await read('at', 2, 4)).toEqual(['r2', 'r3']);
    expect(await read('after', 2, 3)).toEqual([]);
    expect(await read('after', 4)).toEqual([]);
    // the replay point was the last record when it was taken; the shard has grown since
    m.kinesis.putRecord('s', { data: bytes('r5'), partitionKey: 'p' });
    m.kinesis.putRecord('s', { data: bytes('r6'), partitionKey: 'p' });
    recs.push(...m.kinesis.records('s', shard).slice(-2));
    expect(await read('after', 4, 6)).toEqual(['r5']);
  });

  it('reports a replay that can never reach its bound', async () => {
    const m = createMemoryPorts();
    m.kinesis.createStream('s', 1);
    const r = m.kinesis.putRecord('s', { data: bytes('a'), partitionKey: 'p' });
    const beyond = (BigInt(r.sequenceNumber) + 10n).toString();
    await expect(readAll(m.ports.reader.read('s', 'shardId-000000000000', { from: 'start' }, beyond))).rejects.toMatchObject({ code: 'REPLAY_STALLED', retryable: true });
  });
});

const pointer = (n: number, extra: Partial<SnapshotPointer> = {}): SnapshotPointer => ({
  checkpointId: n,
  replayPoint: { from: 'after', sequenceNumber: '49' + String(n).padStart(54, '0') },
  delta: { store: 'inline', key: `delta#i|${n}` },
  meta: {},
  ...extra,
});

describe('MemoryControlStore', () => {
  it('fences: takeover bumps, stale fences are refused', async () => {
    const { control } = createMemoryPorts();
    expect(await control.readLease('s1:a')).toEqual({ fence: 0, lastPosition: undefined, snapshot: undefined });
    // fence 0 cannot write before a takeover (the row has no fence yet), as in DynamoDB
    await expect(control.commitPosition('s1:a', 0, '1')).rejects.toBeInstanceOf(FencedError);
    expect(await control.takeOver('s1:a', 0)).toEqual({ fence: 1, lastPosition: undefined, snapshot: undefined });
    await expect(control.takeOver('s1:a', 0)).rejects.toBeInstanceOf(FencedError);
    await control.commitPosition('s1:a', 1, '42');
    await control.publishSnapshot('s1:a', 1, pointer(1));
    // the takeover answers with the lease after the bump, pointer parsed
    expect(await control.takeOver('s1:a', 1)).toEqual({ fence: 2, lastPosition: '42', snapshot: pointer(1) });
    await expect(control.commitPosition('s1:a', 1, '43')).rejects.toBeInstanceOf(FencedError);
    await expect(control.publishSnapshot('s1:a', 1, pointer(2))).rejects.toBeInstanceOf(FencedError);
    const lease = await control.readLease('s1:a');
    expect(lease).toEqual({ fence: 2, lastPosition: '42', snapshot: pointer(1) });
    expect(control.published.map((p) => p.pointer.checkpointId)).toEqual([1]);
  });

  it('keeps the pointer as JSON (non-finite numbers do not survive), as DynamoDB does', async () => {
    const { control } = createMemoryPorts();
    await control.takeOver('x', 0);
    await control.publishSnapshot('x', 1, pointer(1, { meta: { watermark: Number.NEGATIVE_INFINITY, t: 5 } }));
    expect((await control.readLease('x')).snapshot!.meta).toEqual({ watermark: null, t: 5 });
  });

  it('stores small deltas inline and large ones "in S3", under the AWS store keys', async () => {
    const { control } = createMemoryPorts();
    const small = await control.writeDelta('s1:shardId-000000000001', 7, new Uint8Array(10));
    expect(small).toEqual({ store: 'inline', key: 'delta#s1:shardId-000000000001|000000000007' });
    const big = await control.writeDelta('s1:shardId-000000000001', 8, new Uint8Array(300 * 1024 + 1).fill(3));
    expect(big).toEqual({ store: 's3', key: 'deltas/s1/shardId-000000000001/000000000008.bin' });
    expect((await control.readDelta(big))[5]).toBe(3);
    await expect(control.readDelta({ store: 'inline', key: 'delta#nope|000000000001' })).rejects.toThrow(/missing/);
    await expect(control.readDelta({ store: 's3', key: 'nope' })).rejects.toMatchObject({ name: 'NoSuchKey' });
    // a rewrite with other bytes is a determinism conflict
    await control.writeDelta('s1:shardId-000000000001', 7, new Uint8Array(10));
    expect(control.deltaConflicts).toBe(0);
    await control.writeDelta('s1:shardId-000000000001', 7, new Uint8Array(10).fill(1));
    expect(control.deltaConflicts).toBe(1);
  });

  it('acks into a set: duplicates do not count; every ack that finds the set complete reports it', async () => {
    const { control } = createMemoryPorts();
    expect(await control.ack(1, 'a')).toEqual({ completedBy: false }); // no checkpoint record
    const n = control.allocateCheckpoint([1, 2]);
    expect(() => control.allocateCheckpoint([1, 2])).toThrow(/in flight/);
    expect(control.setTaskToken(n, 'tok')).toBe(false);
    expect(await control.ack(n, 'a')).toEqual({ completedBy: false, taskToken: 'tok' });
    expect(await control.ack(n, 'a')).toEqual({ completedBy: false, taskToken: 'tok' });
    expect(await control.ack(n, 'b')).toEqual({ completedBy: false, taskToken: 'tok' });
    expect(await control.ack(n, 'c')).toEqual({ completedBy: true, taskToken: 'tok' });
    // a retried ack (the completing instance crashed before SendTaskSuccess) still wakes the coordinator
    expect(await control.ack(n, 'c')).toEqual({ completedBy: true, taskToken: 'tok' });
    control.finishCheckpoint(n, 'COMPLETED');
    expect(await control.ack(n, 'a')).toEqual({ completedBy: false });
    expect(control.checkpoint(n)!.status).toBe('COMPLETED');
    expect(control.allocateCheckpoint([1])).toBe(2);
  });
});

describe('MemoryStateStore', () => {
  const row = (key: string, v: string, op = 'op1'): StateRow => ({ operatorId: op, keyGroup: 3, key, values: v ? { s: bytes(v) } : {} });

  it('writes a row only if no later checkpoint wrote it', async () => {
    const { state } = createMemoryPorts();
    await state.applyRows(2, 1, [row('a', 'two'), row('b', 'two')]);
    await state.applyRows(1, 1, [row('a', 'one')]);
    await state.applyRows(2, 1, [row('b', 'two')]); // a redo
    await state.applyRows(3, 1, [row('b', 'three')]);
    const got = await state.getRows([
      { operatorId: 'op1', keyGroup: 3, key: 'a' },
      { operatorId: 'op1', keyGroup: 3, key: 'b' },
      { operatorId: 'op1', keyGroup: 3, key: 'zzz' },
    ]);
    // zzz has no value, but its item's checkpoint still comes back (a zombie must see it is behind)
    expect(Object.fromEntries(got.map((r) => [r.key, r.values.s ? text(r.values.s) : `cleared@${r.checkpointId}`]))).toEqual({ a: 'two', b: 'three', zzz: 'cleared@3' });
    expect(state.rejectedWrites).toBe(1);
    expect(state.asOf(2).map((r) => `${r.key}=${text(r.values.s!)}`).sort()).toEqual(['a=two', 'b=two']);
    expect(state.asOf(1)).toEqual([]);
    expect(state.conflicts).toBe(0);
    await state.applyRows(3, 1, [row('b', 'other')]);
    expect(state.conflicts).toBe(1);
  });

  it('treats an empty values map as a cleared row', async () => {
    const { state } = createMemoryPorts();
    await state.applyRows(1, 1, [row('a', 'x')]);
    await state.applyRows(2, 1, [row('a', '')]);
    expect(state.asOf(1)).toHaveLength(1);
    expect(state.asOf(2)).toHaveLength(0);
  });

  it('refuses an item over 400 KB, as DynamoDB does', async () => {
    const { state } = createMemoryPorts();
    await expect(state.applyRows(1, 1, [{ operatorId: 'o', keyGroup: 0, key: 'k', values: { s: new Uint8Array(401 * 1024) } }])).rejects.toMatchObject({
      name: 'ValidationException',
    });
  });

  it('can crash mid-flush (items written before the crash stay)', async () => {
    const m = createMemoryPorts();
    let n = 0;
    m.faults.before = (op) => {
      if (op === 'state.applyRow' && n++ === 1) throw new Error('crash');
    };
    // one item per key group; groups are written 16 at a time, so the second put is key group 4's
    const rows = [3, 4, 5].map((g): StateRow => ({ operatorId: 'op1', keyGroup: g, key: `k${g}`, values: { s: bytes('1') } }));
    await expect(m.state.applyRows(1, 1, rows)).rejects.toThrow('crash');
    expect(m.state.rows().map((r) => r.row.key).sort()).toEqual(['k3', 'k5']);
  });
});

describe('MemoryUpsertSink', () => {
  const w = (key: string, epoch: number, seq: number, value: number, producer = 'p1') => ({ key, item: { pk: 'ignored', value }, producer, epoch, seq });

  it('collapses writes per key, conditions on the emitting version, never regresses', async () => {
    const { upsertSink } = createMemoryPorts();
    await upsertSink.write('t', 'pk', [w('a', 1, 0, 1), w('a', 1, 1, 2), w('b', 1, 2, 10)]);
    expect(upsertSink.table('t').get('a')).toEqual({ pk: 'a', value: 2, _sluice_epoch: 1, _sluice_seq: 1, _sluice_producer: 'p1' });
    await upsertSink.write('t', 'pk', [w('a', 1, 0, 1)]); // replay of an older version
    await upsertSink.write('t', 'pk', [w('a', 0, 9, 0)]); // older epoch
    await upsertSink.write('t', 'pk', [w('a', 1, 1, 2)]); // same version again
    expect(upsertSink.table('t').get('a')!.value).toBe(2);
    expect(upsertSink.rejected).toBe(3);
    await upsertSink.write('t', 'pk', [w('a', 2, 0, 3)]);
    expect(upsertSink.table('t').get('a')!.value).toBe(3);
    // another producer in the same epoch wins by arrival
    await upsertSink.write('t', 'pk', [w('a', 2, 0, 4, 'p2')]);
    expect(upsertSink.table('t').get('a')!.value).toBe(4);
    expect(upsertSink.accepted).toHaveLength(4);
  });

  it('a child shard taking a key over in an epoch is not undone by its parent writing late', async () => {
    const { upsertSink } = createMemoryPorts();
    const g = (key: string, epoch: number, seq: number, value: number, producer: string, generation?: number) => ({ ...w(key, epoch, seq, value, producer), ...(generation ? { generation } : {}) });
    await upsertSink.write('t', 'pk', [g('a', 5, 7, 16, 'parent')]);
    await upsertSink.write('t', 'pk', [g('a', 5, 2, 19, 'child', 1)]);
    expect(upsertSink.table('t').get('a')).toMatchObject({ value: 19, _sluice_gen: 1 });
    // a zombie of the parent, same epoch, later seq: refused (it would put an older count back)
    await upsertSink.write('t', 'pk', [g('a', 5, 9, 17, 'parent')]);
    expect(upsertSink.table('t').get('a')!.value).toBe(19);
    // the child's own later writes, and the next epoch's, go on; a plain write drops the generation
    await upsertSink.write('t', 'pk', [g('a', 5, 3, 20, 'child', 1)]);
    await upsertSink.write('t', 'pk', [g('a', 6, 0, 21, 'child')]);
    expect(upsertSink.table('t').get('a')).toEqual({ pk: 'a', value: 21, _sluice_epoch: 6, _sluice_seq: 0, _sluice_producer: 'child' });
    // producers of one generation still win by arrival (a key written from several keys)
    await upsertSink.write('t', 'pk', [g('a', 6, 0, 22, 'other')]);
    expect(upsertSink.table('t').get('a')!.value).toBe(22);
  });

  it('keeps attributes a later write does not set (UpdateItem SET)', async () => {
    const { upsertSink } = createMemoryPorts();
    await upsertSink.write('t', 'id', [{ key: 'k', item: { a: 1, b: 2 }, producer: 'p', epoch: 0, seq: 0 }]);
    await upsertSink.write('t', 'id', [{ key: 'k', item: { a: 5, c: undefined }, producer: 'p', epoch: 0, seq: 1 }]);
    expect(upsertSink.table('t').get('k')).toEqual({ id: 'k', a: 5, b: 2, _sluice_epoch: 0, _sluice_seq: 1, _sluice_producer: 'p' });
  });
});

describe('dead letters and notifier', () => {
  it('keys dead letters as the S3 store does', async () => {
    const m = createMemoryPorts();
    const d = { job: 'j', stage: 's0', shardId: 'shardId-000000000000', sequenceNumber: '49123', subSequence: 2, reason: 'bad', data: bytes('x') };
    await m.ports.deadLetters.put(d);
    await m.ports.deadLetters.put(d);
    expect(memoryDeadLetterKey(d)).toBe(deadLetterKey(d));
    expect([...m.deadLetters.letters.keys()]).toEqual([deadLetterKey(d)]);
    expect(m.deadLetters.puts).toBe(2);
  });

  it('answers a task token once; later calls are stale and ignored', async () => {
    const m = createMemoryPorts();
    const seen: string[] = [];
    m.notifier.onSucceed = (t) => seen.push(t);
    await m.ports.notifier.succeed('t1', { checkpointId: 1 });
    await m.ports.notifier.succeed('t1', { checkpointId: 1 });
    expect(seen).toEqual(['t1']);
    expect(m.notifier.stale).toBe(1);
  });
});

describe('fault hooks', () => {
  it('retries throttling inside the services, passes other errors through', async () => {
    const m = createMemoryPorts();
    let n = 0;
    m.faults.before = (op) => {
      if (op === 'control.readLease' && n++ < 3) throw throttled();
    };
    expect((await m.ports.control.readLease('a')).fence).toBe(0);
    expect(n).toBe(4);
    m.faults.before = (op) => {
      if (op === 'control.takeOver') throw awsError('InternalFailure');
    };
    await expect(m.ports.control.takeOver('a', 0)).rejects.toMatchObject({ name: 'InternalFailure' });
    expect((await m.ports.control.readLease('a')).fence).toBe(0);
  });

  it('an `after` fault is a lost response: the effect happened', async () => {
    const m = createMemoryPorts();
    m.faults.after = (op) => {
      if (op === 'control.takeOver') throw new Error('socket hang up');
    };
    await expect(m.ports.control.takeOver('a', 0)).rejects.toThrow('socket hang up');
    expect((await m.ports.control.readLease('a')).fence).toBe(1);
    // its retry is refused: the fence already moved
    await expect(m.ports.control.takeOver('a', 0)).rejects.toBeInstanceOf(FencedError);
  });

  it('withHooks gives one environment its own crash points and gates', async () => {
    const m = createMemoryPorts();
    const ops: PortOp[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const env = withHooks(m.ports, {
      async before(op) {
        ops.push(op);
        if (op === 'control.commitPosition') await gate;
      },
      after(op) {
        if (op === 'control.publishSnapshot') throw new Error('crash after publish');
      },
    });
    await env.control.takeOver('a', 0);
    await expect(env.control.publishSnapshot('a', 1, pointer(1))).rejects.toThrow('crash after publish');
    expect((await m.ports.control.readLease('a')).snapshot?.checkpointId).toBe(1);
    let done = false;
    const p = env.control.commitPosition('a', 1, '5').then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    release();
    await p;
    expect(done).toBe(true);
    expect(ops).toEqual(['control.takeOver', 'control.publishSnapshot', 'control.commitPosition']);
    // the reader is hooked too
    m.kinesis.createStream('s', 1);
    m.kinesis.putRecord('s', { data: bytes('a'), partitionKey: 'p' });
    expect((await readAll(env.reader.read('s', 'shardId-000000000000', { from: 'start' }, undefined))).flat()).toHaveLength(1);
    expect(ops.at(-1)).toBe('reader.read');
  });
});

describe('engine helpers agree with the twin', () => {
  it('every key group lands in the shard whose range keyGroupsOfHashRange gives it', () => {
    for (const n of [1, 2, 3, 4, 7]) {
      const k = new MemoryKinesis();
      k.createStream('s', n);
      const shards = k.listShards('s');
      for (const mp of [n, 16, 128]) {
        if (mp < n) continue;
        for (let g = 0; g < mp; g++) {
          const sh = k.shardOfHashKey('s', BigInt(hashKeyOfKeyGroup(g, mp)));
          const info = shards.find((s) => s.shardId === sh)!;
          expect(keyGroupsOfHashRange(info.startingHashKey, info.endingHashKey, mp)).toContain(g);
        }
      }
    }
  });
});
