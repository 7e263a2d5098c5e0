/**
 * One contract for the coordinator's delta objects (the GC's view of the bucket's `deltas/`), run
 * against the in-memory twin and against S3 (the emulator, over the real wire): one listing serves
 * every instance of the job, grouped by instance, and a key under the prefix that is no instance's
 * delta is neither listed nor, therefore, ever deleted.
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../../local/emulators.js';
import { createBucket } from '../../../local/provision.js';
import type { DeltaObjects } from '../../coordinator/ports.js';
import type { ControlStore } from '../../runtime/ports.js';
import { createAwsClients, type AwsClients } from '../aws/clients.js';
import { S3DeltaObjects } from '../aws/coordinator-ports.js';
import { DynamoControlStore } from '../aws/dynamo-control-store.js';
import { MemoryDeltaObjects } from '../memory/checkpoint-store.js';
import { MemoryControlStore } from '../memory/memory-ports.js';
import { contractTarget } from './target.js';

interface Subject {
  readonly deltas: DeltaObjects;
  /** the instances' side, which writes deltas (over 8 KB: as objects) */
  readonly control: ControlStore;
  /** writes an object under the prefix as is */
  putRaw(key: string): Promise<void>;
  /** listing requests sent so far */
  listings(): number;
}

interface DeltasTarget {
  open(): Promise<Subject>;
  stop(): Promise<void>;
}

const targets: Array<{ name: string; start(): Promise<DeltasTarget> }> = [
  {
    name: 'in-memory twin',
    async start() {
      return {
        async open() {
          let listings = 0;
          const control = new MemoryControlStore();
          const deltas = new MemoryDeltaObjects(control, { before: (op) => void (op === 'deltas.list' && listings++) });
          return { deltas, control, putRaw: async (key) => control.putDeltaObject(key, new Uint8Array(1)), listings: () => listings };
        },
        stop: async () => {},
      };
    },
  },
  {
    name: 'S3 (emulator)',
    async start() {
      const emulators: LocalEmulators = await startEmulators({ services: ['s3'] });
      const config = { region: emulators.region, credentials: emulators.credentials, endpoints: emulators.endpoints, maxAttempts: 3 };
      const clients = createAwsClients(config);
      const opened: AwsClients[] = [];
      let buckets = 0;
      return {
        async open() {
          const bucket = `contract-deltas-${++buckets}`;
          await createBucket(clients, bucket);
          let listings = 0;
          // a client of its own, whose ListObjectsV2 requests this subject counts
          const c = createAwsClients(config);
          opened.push(c);
          c.s3.middlewareStack.add(
            (next, context) => async (args) => {
              if (context.commandName === 'ListObjectsV2Command') listings++;
              return next(args);
            },
            { step: 'finalizeRequest' },
          );
          return {
            deltas: new S3DeltaObjects(c, bucket),
            control: new DynamoControlStore(c, 'no-table', bucket),
            putRaw: async (key) => void (await c.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: new Uint8Array(1) }))),
            listings: () => listings,
          };
        },
        stop: async () => {
          for (const c of [clients, ...opened]) c.s3.destroy();
          await emulators.stop();
        },
      };
    },
  },
];

const large = new Uint8Array(10 * 1024);

describe.each(targets)('delta objects contract: $name', (target) => {
  const side = contractTarget(target.start);
  const open = () => side().open();

  it('lists every instance\'s delta objects in one request, grouped by instance', async () => {
    const s = await open();
    const ids = ['s1:shardId-000000000000', 's1:shardId-000000000001', 's2:shardId-000000000000'];
    const refs = new Map<string, string>();
    for (const [i, id] of ids.entries()) {
      for (const n of [3, 4 + i]) refs.set(`${id}@${n}`, (await s.control.writeDelta(id, n, large)).key);
    }
    const before = s.listings();
    const listed = await s.deltas.listByInstance([...ids, 's3:shardId-000000000000']);
    // one request for the job, not one per instance
    expect(s.listings() - before).toBe(1);
    for (const [i, id] of ids.entries()) {
      expect([...listed.get(id)!].sort((a, b) => a[0] - b[0])).toEqual([3, 4 + i].map((n) => [n, refs.get(`${id}@${n}`)]));
    }
    expect(listed.get('s3:shardId-000000000000')).toEqual(new Map());
    await s.deltas.delete(refs.get(`${ids[0]}@3`)!);
    expect([...(await s.deltas.listByInstance(ids)).get(ids[0]!)!.keys()]).toEqual([4]);
  });

  it('reads every page of a listing over 1,000 keys, one request a page', async () => {
    const s = await open();
    const ids = Array.from({ length: 7 }, (_, i) => `s1:shardId-00000000000${i}`);
    const keys = ids.flatMap((id) => Array.from({ length: 150 }, (_, k) => `deltas/${id.replace(':', '/')}/${String(k + 1).padStart(12, '0')}.bin`));
    for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((key) => s.putRaw(key)));
    const before = s.listings();
    const listed = await s.deltas.listByInstance(ids);
    expect(s.listings() - before).toBeLessThanOrEqual(Math.ceil(keys.length / 1000));
    for (const id of ids) expect(listed.get(id)!.size).toBe(150);
  }, 60_000);

  it('leaves out what is under the prefix but no listed instance\'s delta, so GC never deletes it', async () => {
    const s = await open();
    const id = 's1:shardId-000000000000';
    const own = (await s.control.writeDelta(id, 7, large)).key;
    const foreign = [
      'deltas/s1/shardId-000000000000/notes.txt',
      'deltas/s1/shardId-000000000000/000000000008.bin.tmp',
      'deltas/s1/shardId-000000000000/.bin',
      'deltas/s1/shardId-000000000000/old/000000000002.bin',
      'deltas/s1/shardId-000000000001/000000000002.bin',
      'deltas/000000000002.bin',
    ];
    for (const key of foreign) await s.putRaw(key);
    const listed = await s.deltas.listByInstance([id]);
    expect([...listed.keys()]).toEqual([id]);
    expect(listed.get(id)).toEqual(new Map([[7, own]]));
  });
});
