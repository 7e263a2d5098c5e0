/**
 * The emulators start, answer real SDK calls on 127.0.0.1 only, and leave no process behind.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateStreamCommand, GetRecordsCommand, GetShardIteratorCommand, ListShardsCommand, PutRecordCommand } from '@aws-sdk/client-kinesis';
import { CreateTableCommand, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { localDynamoClient, localKinesisClient, localS3Client } from './aws-env.js';
import { startEmulators } from './emulators.js';

const linux = process.platform === 'linux';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** PIDs whose parent is this process (Linux /proc). */
function childPids(): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid) out.push(Number(d));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Local addresses of the TCP sockets a process listens on (Linux /proc). */
function listeningAddresses(pid: number): string[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const out: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '0A' || !inodes.has(f[9])) continue; // 0A = LISTEN
      const [hex, port] = f[1].split(':');
      const addr =
        hex.length === 8
          ? [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.')
          : hex === '0'.repeat(32)
            ? '::'
            : `v6:${hex}`;
      out.push(`${addr}:${parseInt(port, 16)}`);
    }
  }
  return out;
}

function refused(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });
}

describe('startEmulators', () => {
  it('starts kinesis, dynamodb and s3 on 127.0.0.1, serves SDK calls, and stops without leftovers', async () => {
    const before = linux ? childPids() : [];
    const logDir = mkdtempSync(join(tmpdir(), 'sluice-emu-test-'));
    const t0 = Date.now();
    const emu = await startEmulators({ logDir });
    const startMs = Date.now() - t0;
    try {
      for (const ep of Object.values(emu.endpoints)) expect(ep).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(emu.env()).toEqual({
        AWS_ENDPOINT_URL_KINESIS: emu.endpoints.kinesis,
        AWS_ENDPOINT_URL_DYNAMODB: emu.endpoints.dynamodb,
        AWS_ENDPOINT_URL_S3: emu.endpoints.s3,
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: emu.credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: emu.credentials.secretAccessKey,
      });
      expect(existsSync(join(logDir, 'kinesis.log'))).toBe(true);
      expect(existsSync(join(logDir, 's3.log'))).toBe(true);

      if (linux) {
        // Every listening socket of both children (kinesis-mock opens a TLS port too) is loopback-only.
        for (const pid of [emu.pids.kinesis!, emu.pids.s3!]) {
          const addrs = listeningAddresses(pid);
          expect(addrs.length).toBeGreaterThan(0);
          for (const a of addrs) expect(a).toMatch(/^127\.0\.0\.1:/);
        }
        expect(listeningAddresses(emu.pids.kinesis!)).toHaveLength(2);
      }

      const kinesis = localKinesisClient(emu.endpoints.kinesis);
      await kinesis.send(new CreateStreamCommand({ StreamName: 'emu-smoke', ShardCount: 1 }));
      const shardId = (await kinesis.send(new ListShardsCommand({ StreamName: 'emu-smoke' }))).Shards![0].ShardId!;
      await kinesis.send(new PutRecordCommand({ StreamName: 'emu-smoke', PartitionKey: 'k', Data: Buffer.from('hello') }));
      const it0 = await kinesis.send(new GetShardIteratorCommand({ StreamName: 'emu-smoke', ShardId: shardId, ShardIteratorType: 'TRIM_HORIZON' }));
      const got = await kinesis.send(new GetRecordsCommand({ ShardIterator: it0.ShardIterator }));
      expect(Buffer.from(got.Records![0].Data!).toString()).toBe('hello');
      kinesis.destroy();

      const ddb = localDynamoClient(emu.endpoints.dynamodb);
      await ddb.send(
        new CreateTableCommand({
          TableName: 'tbl',
          AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
          KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
      await ddb.send(new PutItemCommand({ TableName: 'tbl', Item: { pk: { S: 'a' }, v: { N: '1' } } }));
      const item = await ddb.send(new GetItemCommand({ TableName: 'tbl', Key: { pk: { S: 'a' } }, ConsistentRead: true }));
      expect(item.Item?.v?.N).toBe('1');
      ddb.destroy();

      const s3 = localS3Client(emu.endpoints.s3);
      await s3.send(new CreateBucketCommand({ Bucket: 'bucket' }));
      await s3.send(new PutObjectCommand({ Bucket: 'bucket', Key: 'a/b.txt', Body: 'content' }));
      const obj = await s3.send(new GetObjectCommand({ Bucket: 'bucket', Key: 'a/b.txt' }));
      expect(await obj.Body!.transformToString()).toBe('content');
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'bucket', Prefix: 'a/' }));
      expect(listed.Contents?.map((c) => c.Key)).toEqual(['a/b.txt']);
      s3.destroy();
    } finally {
      const t1 = Date.now();
      await emu.stop();
      console.info(`emulators: start ${startMs} ms, stop ${Date.now() - t1} ms`);
    }
    await emu.stop(); // idempotent
    expect(alive(emu.pids.kinesis!)).toBe(false);
    expect(alive(emu.pids.s3!)).toBe(false);
    if (linux) expect(childPids()).toEqual(before);
    expect(await refused('127.0.0.1', Number(new URL(emu.endpoints.dynamodb).port))).toBe(true);
    expect(existsSync(logDir)).toBe(true); // a caller's logDir is kept
    rmSync(logDir, { recursive: true, force: true });
  });

  it('starts only the services asked for', async () => {
    const emu = await startEmulators({ services: ['dynamodb'] });
    try {
      expect(emu.endpoints.kinesis).toBe('');
      expect(emu.endpoints.s3).toBe('');
      expect(emu.pids).toEqual({ kinesis: undefined, s3: undefined });
      expect(Object.keys(emu.env()).filter((k) => k.startsWith('AWS_ENDPOINT_URL'))).toEqual(['AWS_ENDPOINT_URL_DYNAMODB']);
    } finally {
      await emu.stop();
    }
  });

  it('fails with the emulator name and its log file when it is not ready in time, and kills it', async () => {
    const before = linux ? childPids() : [];
    await expect(startEmulators({ services: ['kinesis'], readyTimeoutMs: 1 })).rejects.toThrow(
      /kinesis \(kinesis-local\) emulator did not answer within 1 ms .*log .*kinesis\.log/s,
    );
    if (linux) expect(childPids()).toEqual(before);
  });
});
