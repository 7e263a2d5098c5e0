/**
 * Objects of the job's bucket, as the engine's object-backed ports use them. `ObjectApi` is the
 * service (PutObject, GetObject, ListObjectsV2, DeleteObjects on one bucket): S3 behind the AWS
 * adapter, a map in the twin. The ports' logic — key layouts, what a drop deletes — is written once
 * over it.
 */
import type { SpillStore } from '../runtime/ports.js';
import type { BlobStore } from '../runtime/spilling-state-store.js';

export interface ObjectApi {
  put(key: string, body: Uint8Array): Promise<void>;
  /** the object's bytes; a missing key fails with NoSuchKey */
  get(key: string): Promise<Uint8Array>;
  /** keys under a prefix, every page, in key order */
  list(prefix: string): Promise<string[]>;
  /** deletes these keys (missing ones are no error) */
  delete(keys: readonly string[]): Promise<void>;
}

export const SPILL_PREFIX = 'spill/';

/**
 * Dirty state an instance moved out of memory, as objects under `spill/<instance>/<fence>/`. Parts a
 * dead owner left behind are never read again (a new owner has another fence); the bucket's
 * lifecycle rule expires them.
 */
export class ObjectSpillStore implements SpillStore {
  constructor(private readonly store: ObjectApi) {}

  private prefix(instanceId: string, fence: number): string {
    return `${SPILL_PREFIX}${encodeURIComponent(instanceId)}/${fence}/`;
  }

  put(instanceId: string, fence: number, part: string, bytes: Uint8Array): Promise<void> {
    return this.store.put(this.prefix(instanceId, fence) + part, bytes);
  }

  get(instanceId: string, fence: number, part: string): Promise<Uint8Array> {
    return this.store.get(this.prefix(instanceId, fence) + part);
  }

  async drop(instanceId: string, fence: number): Promise<void> {
    const keys = await this.store.list(this.prefix(instanceId, fence));
    if (keys.length) await this.store.delete(keys);
  }
}

/** Blobs (state values too big for an item) as objects under their own names. */
export class ObjectBlobStore implements BlobStore {
  constructor(private readonly store: ObjectApi) {}

  put(key: string, bytes: Uint8Array): Promise<void> {
    return this.store.put(key, bytes);
  }

  get(key: string): Promise<Uint8Array> {
    return this.store.get(key);
  }
}
