/**
 * A list that grows by one item per record in keyed state without copying itself each time: an
 * interval join's buffer of the rows at one event time (Nexmark q5 holds thousands per key).
 * State values are never changed in place — a record's undo keeps a reference to the value it
 * replaced — so a buffer is a view: the first `n` items of a backing array. Appending to a view
 * that ends where its backing array ends pushes onto that array and returns a longer view; the
 * shorter one still sees its own `n` items. Appending to any other view (one an undo put back, or
 * one that was appended to already) copies its items first.
 */
import { jsonSerializer, type Serializer } from './serializers.js';

export interface AppendBuffer<T> {
  readonly items: T[];
  readonly n: number;
}

/** `buf` with `v` after its items (a buffer of `v` alone when there is none). */
export function appended<T>(buf: AppendBuffer<T> | undefined, v: T): AppendBuffer<T> {
  if (!buf) return { items: [v], n: 1 };
  const items = buf.items.length === buf.n ? buf.items : buf.items.slice(0, buf.n);
  items.push(v);
  return { items, n: buf.n + 1 };
}

/** The items of a buffer, as a new array. */
export function bufferItems<T>(buf: AppendBuffer<T>): T[] {
  return buf.items.slice(0, buf.n);
}

/**
 * Map state of buffers by key, stored as the JSON of `[key, items[]]` pairs: the bytes a map of
 * plain arrays had, so snapshots and savepoints of either read back as the other.
 */
export function appendBufferMapSerializer<K, T>(): Serializer<Array<[K, AppendBuffer<T>]>> {
  const json = jsonSerializer<Array<[K, T[]]>>();
  return {
    id: json.id,
    encode: (pairs) => json.encode(pairs.map(([k, b]) => [k, b.items.length === b.n ? b.items : bufferItems(b)])),
    decode: (bytes) => json.decode(bytes).map(([k, items]) => [k, { items, n: items.length }]),
  };
}
