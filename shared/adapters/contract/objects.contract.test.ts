/**
 * Contract of a bucket's objects (`ObjectApi`) and of the object-backed ports over it: one set of
 * tests run against the in-memory twin and against the S3 emulator (started here on a free port,
 * stopped by PID).
 */
import { describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../../local/emulators.js';
import { localS3Client } from '../../../local/aws-env.js';
import { createBucket } from '../../../local/provision.js';
import { s3ObjectApi } from '../aws/s3-objects.js';
import { MemoryObjects } from '../memory/memory-objects.js';
import { ObjectBlobStore, ObjectSpillStore, type ObjectApi } from '../objects.js';
import { contractTarget } from './target.js';

interface ObjectsTarget {
  bucket(): Promise<ObjectApi>;
  stop(): Promise<void>;
}

const targets: Array<{ name: string; start(): Promise<ObjectsTarget> }> = [
  { name: 'in-memory twin', start: async () => ({ bucket: async () => new MemoryObjects(), stop: async () => {} }) },
  {
    name: 'S3 emulator',
    async start() {
      const emulators: LocalEmulators = await startEmulators({ services: ['s3'] });
      const s3 = localS3Client(emulators.endpoints.s3);
      let n = 0;
      return {
        async bucket() {
          const name = `contract-objects-${++n}`;
          await createBucket({ s3 }, name);
          return s3ObjectApi({ s3 }, name);
        },
        stop: async () => {
          s3.destroy();
          await emulators.stop();
        },
      };
    },
  },
];

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

describe.each(targets)('objects contract: $name', (target) => {
  const side = contractTarget(target.start);

  it('puts, gets, overwrites; a missing key fails with NoSuchKey', async () => {
    const o = await side().bucket();
    await o.put('a/1', bytes('one'));
    expect(text(await o.get('a/1'))).toBe('one');
    await o.put('a/1', bytes('uno'));
    expect(text(await o.get('a/1'))).toBe('uno');
    await expect(o.get('a/2')).rejects.toMatchObject({ name: 'NoSuchKey' });
  });

  it('lists the keys under a prefix in key order, and deletes (missing keys are no error)', async () => {
    const o = await side().bucket();
    for (const k of ['p/b', 'p/a', 'p/c/d', 'q/a']) await o.put(k, bytes(k));
    expect(await o.list('p/')).toEqual(['p/a', 'p/b', 'p/c/d']);
    await o.delete(['p/a', 'p/zz']);
    expect(await o.list('p/')).toEqual(['p/b', 'p/c/d']);
    expect(await o.list('none/')).toEqual([]);
  });

  it('spill store: parts per instance and fence; a drop forgets only that fence', async () => {
    const o = await side().bucket();
    const spill = new ObjectSpillStore(o);
    await spill.put('s1:shardId-000000000000', 3, '1-0', bytes('old'));
    await spill.put('s1:shardId-000000000000', 4, '1-0', bytes('new'));
    await spill.put('s1:shardId-000000000000', 4, '1-1', bytes('new2'));
    await spill.drop('s1:shardId-000000000000', 4);
    await expect(spill.get('s1:shardId-000000000000', 4, '1-0')).rejects.toMatchObject({ name: 'NoSuchKey' });
    expect(text(await spill.get('s1:shardId-000000000000', 3, '1-0'))).toBe('old');
    const blobs = new ObjectBlobStore(o);
    await blobs.put('state/big', bytes('blob'));
    expect(text(await blobs.get('state/big'))).toBe('blob');
  });
});
