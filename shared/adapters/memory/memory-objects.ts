/** The objects of a bucket in memory (`ObjectApi`): the twin of S3 under the object-backed ports. */
import { ObjectBlobStore, ObjectSpillStore, type ObjectApi } from '../objects.js';
import { awsError } from './memory-faults.js';

export class MemoryObjects implements ObjectApi {
  readonly objects = new Map<string, Uint8Array>();

  async put(key: string, body: Uint8Array): Promise<void> {
    this.objects.set(key, new Uint8Array(body)); // S3 keeps its own copy
  }

  async get(key: string): Promise<Uint8Array> {
    const b = this.objects.get(key);
    if (!b) throw awsError('NoSuchKey', `The specified key does not exist: ${key}`);
    return new Uint8Array(b);
  }

  async list(prefix: string): Promise<string[]> {
    return [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort();
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const k of keys) this.objects.delete(k);
  }
}

/** Spilled dirty state over the twin's objects. */
export class MemorySpillStore extends ObjectSpillStore {
  constructor(readonly bucket = new MemoryObjects()) {
    super(bucket);
  }
}

/** Blobs over the twin's objects; `objects` shows what is stored. */
export class MemoryBlobStore extends ObjectBlobStore {
  constructor(readonly bucket = new MemoryObjects()) {
    super(bucket);
  }

  get objects(): ReadonlyMap<string, Uint8Array> {
    return this.bucket.objects;
  }
}
