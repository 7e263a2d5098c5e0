/** A value that can cross a process boundary as bytes. */
export interface Serializer<T> {
  readonly id: string;
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** JSON as UTF-8: the default for state and records. */
export function jsonSerializer<T>(): Serializer<T> {
  return {
    id: 'json',
    encode: (value) => encoder.encode(JSON.stringify(value)),
    decode: (bytes) => JSON.parse(decoder.decode(bytes)) as T,
  };
}

/** UTF-8 text. */
export const textSerializer: Serializer<string> = {
  id: 'text',
  encode: (value) => encoder.encode(value),
  decode: (bytes) => decoder.decode(bytes),
};

/** Raw bytes, untouched. */
export const bytesSerializer: Serializer<Uint8Array> = {
  id: 'binary',
  encode: (value) => value,
  decode: (bytes) => bytes,
};
