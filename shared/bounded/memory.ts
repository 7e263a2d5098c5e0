/** In-memory adapters of the bounded reader: objects in a map, records into the in-memory Kinesis twin. */
import { memoryKinesisApi, memoryRetry } from '../adapters/memory/memory-kinesis.js';
import type { MemoryPorts } from '../adapters/memory/memory-ports.js';
import type { ObjectStore, SourceWriter } from './bounded-reader.js';
import { sourceWriterOf } from './source-writer.js';

/** Objects by bucket and key. */
export class MemoryObjectStore implements ObjectStore {
  private readonly objects = new Map<string, Uint8Array>();

  put(bucket: string, key: string, body: Uint8Array | string): void {
    this.objects.set(`${bucket}/${key}`, typeof body === 'string' ? new TextEncoder().encode(body) : body);
  }

  async list(bucket: string, prefix: string): Promise<Array<{ key: string; size: number }>> {
    const head = `${bucket}/`;
    return [...this.objects.entries()]
      .filter(([k]) => k.startsWith(head + prefix))
      .map(([k, v]) => ({ key: k.slice(head.length), size: v.length }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async get(bucket: string, key: string): Promise<Uint8Array> {
    const body = this.objects.get(`${bucket}/${key}`);
    if (!body) throw new Error(`NoSuchKey: s3://${bucket}/${key}`);
    return body;
  }
}

/** Writes into the in-memory Kinesis of a MemoryJobRunner (`runner.mem.kinesis`). */
export function memorySourceWriter(kinesis: MemoryPorts['kinesis']): SourceWriter {
  return sourceWriterOf(memoryKinesisApi(kinesis), memoryRetry);
}
