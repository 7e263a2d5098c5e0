/**
 * Where deltas too large for the control table live in the job's bucket, and how a listing of them
 * is read back. The bucket is the job's own (`resourceNames(...).bucket`, and a restore from a
 * savepoint empties the whole `deltas/` prefix), so one listing of `DELTA_OBJECTS_PREFIX` sees every
 * instance's deltas at once.
 */
export const DELTA_OBJECTS_PREFIX = 'deltas/';

/** Where an instance's large deltas live in the bucket (`<prefix><n, padded>.bin`). */
export const deltaObjectPrefix = (instanceId: string) => `${DELTA_OBJECTS_PREFIX}${instanceId.replace(':', '/')}/`;

/**
 * Groups listed keys by the instances among `instanceIds` they are deltas of: instance → checkpoint
 * id → key. A key that is not `<an instance's prefix><digits>.bin` (another instance's, or anything
 * else stored under the prefix) is left out, so the caller never deletes it.
 */
export function groupDeltaKeys(keys: Iterable<string>, instanceIds: Iterable<string>): Map<string, Map<number, string>> {
  const byPrefix = new Map<string, Map<number, string>>();
  const out = new Map<string, Map<number, string>>();
  for (const id of instanceIds) {
    const objects = new Map<number, string>();
    byPrefix.set(deltaObjectPrefix(id), objects);
    out.set(id, objects);
  }
  for (const key of keys) {
    const m = /^(.*\/)(\d+)\.bin$/.exec(key);
    const objects = m && byPrefix.get(m[1]!);
    if (objects) objects.set(Number(m[2]), key);
  }
  return out;
}
