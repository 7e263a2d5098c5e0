/**
 * Record payloads between stages: MessagePack (msgpackr), compact and fast, and deterministic for
 * the same value, which replay relies on (same id ⇒ same bytes).
 */
import { Packr } from 'msgpackr';

const packr = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number' });

export function encodePayload(value: unknown): Uint8Array {
  return packr.pack(value);
}

export function decodePayload<T = unknown>(bytes: Uint8Array): T {
  return packr.unpack(bytes) as T;
}

const range = { start: 0, end: 0 };

/**
 * Decodes the payload at bytes[start, end) without making a view of it (MessagePack decoders
 * cache a DataView per source array: one per packet instead of one per record). The same value as
 * `decodePayload(bytes.subarray(start, end))`; a malformed payload throws either way.
 */
export function decodePayloadAt<T = unknown>(bytes: Uint8Array, start: number, end: number): T {
  if (end <= start) return decodePayload<T>(bytes.subarray(start, end));
  range.start = start;
  range.end = end;
  return packr.unpack(bytes, range) as T;
}
