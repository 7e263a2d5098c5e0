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
