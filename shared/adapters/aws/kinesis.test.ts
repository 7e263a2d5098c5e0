import { ExpiredIteratorException, GetRecordsCommand, GetShardIteratorCommand, type GetRecordsOutput } from '@aws-sdk/client-kinesis';
import { describe, expect, it } from 'vitest';
import type { ReplayPoint, StoredRecord } from '../../runtime/ports.js';
import type { AwsClients } from './clients.js';
import { KinesisShardReader } from './kinesis.js';

const seqOf = (i: number) => `4960${String(1000 + i * 7).padStart(52, '0')}`;

/**
 * A shard as GetShardIterator/GetRecords show it: a trimmed position is not refused (the iterator
 * starts at the oldest retained record), pages may come back empty while records lie ahead
 * (MillisBehindLatest > 0), and a closed shard ends with no NextShardIterator.
 */
class FakeShard {
  records: number[];
  /** GetRecords calls that return an empty page (behind the tip) before the real one */
  emptyPagesFirst = 0;
  /** every NextShardIterator expires the first time it is used */
  expireOnce = false;
  closed = false;
  readonly iteratorRequests: { type: string; seq?: string }[] = [];
  private readonly expired = new Set<string>();

  constructor(count: number, trimmed = 0) {
    this.records = Array.from({ length: count }, (_, i) => i).slice(trimmed);
  }

  private firstIndexFrom(type: string, seq?: string): number {
    if (type === 'TRIM_HORIZON') return 0;
    const i = this.records.findIndex((r) => (type === 'AT_SEQUENCE_NUMBER' ? seqOf(r) >= seq! : seqOf(r) > seq!));
    return i < 0 ? this.records.length : i;
  }

  clients(): AwsClients {
    const send = async (cmd: object): Promise<unknown> => {
      if (cmd instanceof GetShardIteratorCommand) {
        const { ShardIteratorType: type, StartingSequenceNumber: seq } = cmd.input;
        this.iteratorRequests.push({ type: type!, ...(seq ? { seq } : {}) });
        return { ShardIterator: `it:${this.firstIndexFrom(type!, seq)}:${this.iteratorRequests.length}` };
      }
      if (cmd instanceof GetRecordsCommand) {
        const it = cmd.input.ShardIterator!;
        const [, idx] = it.split(':');
        const i = Number(idx);
        if (this.expireOnce && it.endsWith(':n') && !this.expired.has(it)) {
          this.expired.add(it);
          throw new ExpiredIteratorException({ message: 'Iterator expired', $metadata: {} });
        }
        const behind = this.records.length - i;
        if (this.emptyPagesFirst > 0) {
          this.emptyPagesFirst--;
          return { Records: [], NextShardIterator: `it:${i}:e${this.emptyPagesFirst}:n`, MillisBehindLatest: behind > 0 ? 60_000 : 0 } satisfies GetRecordsOutput;
        }
        const page = this.records.slice(i, i + (cmd.input.Limit ?? 1000));
        const next = i + page.length;
        const end = this.closed && next >= this.records.length;
        return {
          Records: page.map((r) => ({ SequenceNumber: seqOf(r), Data: new TextEncoder().encode(`r${r}`), PartitionKey: 'p' })),
          ...(end ? {} : { NextShardIterator: `it:${next}:n` }),
          MillisBehindLatest: this.records.length - next > 0 ? 1_000 : 0,
        } satisfies GetRecordsOutput;
      }
      throw new Error(`unexpected ${cmd.constructor.name}`);
    };
    return { kinesis: { send } } as unknown as AwsClients;
  }
}

async function read(shard: FakeShard, from: ReplayPoint, until?: number, pageSize = 3): Promise<string[]> {
  const out: StoredRecord[] = [];
  const reader = new KinesisShardReader(shard.clients(), pageSize);
  for await (const page of reader.read('s', 'shardId-000000000000', from, until === undefined ? undefined : seqOf(until))) out.push(...page);
  return out.map((r) => new TextDecoder().decode(r.data));
}

const at = (i: number): ReplayPoint => ({ from: 'at', sequenceNumber: seqOf(i) });
const after = (i: number): ReplayPoint => ({ from: 'after', sequenceNumber: seqOf(i) });

describe('KinesisShardReader', () => {
  it('reads at and just after a retained record, always asking for an iterator AT it', async () => {
    const shard = new FakeShard(10, 2);
    expect(await read(shard, at(4), 8)).toEqual(['r4', 'r5', 'r6', 'r7']);
    expect(await read(shard, after(4), 6)).toEqual(['r5']);
    expect(await read(shard, at(2))).toEqual(['r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9']);
    expect(await read(shard, { from: 'start' }, 4)).toEqual(['r2', 'r3']);
    expect(shard.iteratorRequests.map((r) => r.type)).toEqual(['AT_SEQUENCE_NUMBER', 'AT_SEQUENCE_NUMBER', 'AT_SEQUENCE_NUMBER', 'TRIM_HORIZON']);
  });

  it('fails with REPLAY_TRIMMED when the shard starts after the record the replay point names', async () => {
    for (const from of [at(1), after(1)]) {
      for (const until of [undefined, 8]) {
        const err = await read(new FakeShard(10, 2), from, until).catch((e: unknown) => e);
        expect(err, `${JSON.stringify(from)} ${until}`).toMatchObject({ code: 'REPLAY_TRIMMED', retryable: false });
        const msg = (err as Error).message;
        expect(msg).toContain('s/shardId-000000000000');
        expect(msg).toContain(seqOf(1));
        expect(msg).toContain(`first record available is ${seqOf(2)}`);
      }
    }
  });

  it('fails with REPLAY_TRIMMED when nothing is left from the replay point on', async () => {
    await expect(read(new FakeShard(5, 5), after(4))).rejects.toMatchObject({ code: 'REPLAY_TRIMMED', message: expect.stringContaining('holds no record') });
    const closed = new FakeShard(5, 5);
    closed.closed = true;
    await expect(read(closed, at(3))).rejects.toMatchObject({ code: 'REPLAY_TRIMMED' });
  });

  it('keeps paging through empty pages before the first record', async () => {
    const shard = new FakeShard(6);
    shard.emptyPagesFirst = 2;
    expect(await read(shard, at(1), 4)).toEqual(['r1', 'r2', 'r3']);
    const trimmed = new FakeShard(6, 3);
    trimmed.emptyPagesFirst = 2;
    await expect(read(trimmed, after(1), 5)).rejects.toMatchObject({ code: 'REPLAY_TRIMMED', message: expect.stringContaining(seqOf(3)) });
  });

  it('an after point on the last record reads nothing, or what came after it', async () => {
    expect(await read(new FakeShard(5), after(4))).toEqual([]);
    expect(await read(new FakeShard(8), after(4), 7)).toEqual(['r5', 'r6']);
    const closed = new FakeShard(5);
    closed.closed = true;
    expect(await read(closed, after(4))).toEqual([]);
  });

  it('resumes an expired iterator without losing the check or repeating records', async () => {
    const shard = new FakeShard(10);
    shard.expireOnce = true;
    expect(await read(shard, after(2), 9)).toEqual(['r3', 'r4', 'r5', 'r6', 'r7', 'r8']);
    // expired before the first record came: the new iterator is again AT the replay point's record
    const trimmed = new FakeShard(10, 4);
    trimmed.expireOnce = true;
    trimmed.emptyPagesFirst = 1;
    await expect(read(trimmed, at(2))).rejects.toMatchObject({ code: 'REPLAY_TRIMMED' });
    expect(trimmed.iteratorRequests).toEqual([
      { type: 'AT_SEQUENCE_NUMBER', seq: seqOf(2) },
      { type: 'AT_SEQUENCE_NUMBER', seq: seqOf(2) },
    ]);
  });
});
