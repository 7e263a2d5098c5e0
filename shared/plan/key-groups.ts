/**
 * Key groups: keyed state is split into `maxParallelism` groups by a stable hash of the key, and
 * group g is written to Kinesis with an ExplicitHashKey inside g's slice of the 128-bit hash space.
 * A group therefore lands wholly in one shard, a shard owns a contiguous run of groups, and
 * resharding moves whole groups: state rows are addressed by group, so a new owner finds them.
 */

const HASH_SPACE = 1n << 128n;

/** MurmurHash3 (x86, 32-bit) of the key's UTF-8 bytes: stable across processes and versions. */
export function murmur3(bytes: Uint8Array, seed = 0): number {
  let h = seed >>> 0;
  const n = bytes.length;
  const blocks = n & ~3;
  for (let i = 0; i < blocks; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  const tail = n & 3;
  if (tail) {
    let k = 0;
    if (tail >= 3) k ^= bytes[blocks + 2]! << 16;
    if (tail >= 2) k ^= bytes[blocks + 1]! << 8;
    k ^= bytes[blocks]!;
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    h ^= k;
  }
  h ^= n;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const utf8 = new TextEncoder();

/**
 * The canonical string form of a key, used for hashing and as the state row's key. Strings stay as
 * they are (unless they start with NUL); numbers become NUL + decimal; the mapping is one to one, so
 * `keyFromString` gives the key back.
 */
export function keyString(key: string | number): string {
  if (typeof key === 'number') return `\u0000${key}`;
  return key.startsWith('\u0000') ? `\u0000s${key}` : key;
}

export function keyFromString(s: string): string | number {
  if (!s.startsWith('\u0000')) return s;
  return s[1] === 's' ? s.slice(2) : Number(s.slice(1));
}

export function keyGroupOf(key: string, maxParallelism: number): number {
  return murmur3(utf8.encode(key)) % maxParallelism;
}

/** The ExplicitHashKey for records of key group `g`: the middle of g's slice of the hash space. */
export function hashKeyOfKeyGroup(g: number, maxParallelism: number): string {
  return (((2n * BigInt(g) + 1n) * HASH_SPACE) / (2n * BigInt(maxParallelism))).toString();
}

/** Key groups whose hash key falls inside a shard's range [start, end] (inclusive, decimal strings). */
export function keyGroupsOfHashRange(start: string, end: string, maxParallelism: number): number[] {
  const lo = BigInt(start);
  const hi = BigInt(end);
  const out: number[] = [];
  for (let g = 0; g < maxParallelism; g++) {
    const h = BigInt(hashKeyOfKeyGroup(g, maxParallelism));
    if (h >= lo && h <= hi) out.push(g);
  }
  return out;
}

/** The ExplicitHashKey that lands in the `i`-th of `n` evenly split shards (used for rebalance and barriers). */
export function hashKeyOfEvenShard(i: number, n: number): string {
  return (((2n * BigInt(i) + 1n) * HASH_SPACE) / (2n * BigInt(n))).toString();
}
