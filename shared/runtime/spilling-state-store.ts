/**
 * Keeps a key's state whole when it outgrows a DynamoDB item (400 KB): rows whose values are larger
 * than a threshold go to a blob store (S3) under a name derived from (operator, key group, key,
 * checkpoint), and the row keeps only a reference. Reads resolve references transparently, so the
 * runtime above sees whole values. Blob names are deterministic, so a redo of the same checkpoint
 * writes the same object.
 */
import { createHash } from 'node:crypto';
import type { StateRow, StateRowId, StateStore } from './ports.js';

/** Stores opaque bytes by name (S3 in production). */
export interface BlobStore {
  put(key: string, bytes: Uint8Array): Promise<void>;
  get(key: string): Promise<Uint8Array>;
}

/** The reserved state name under which a spilled row keeps its blob's name. */
export const SPILLED = '\u0000spilled';

/** Room left for the key, the key group and bookkeeping attributes inside a 400 KB item. */
export const DEFAULT_SPILL_THRESHOLD = 350 * 1024;

const utf8 = new TextEncoder();
const utf8d = new TextDecoder();

export class SpillingStateStore implements StateStore {
  spilled = 0;

  constructor(
    private readonly inner: StateStore,
    private readonly blobs: BlobStore,
    private readonly threshold = DEFAULT_SPILL_THRESHOLD,
  ) {}

  async getRows(ids: readonly StateRowId[]): Promise<StateRow[]> {
    return this.resolve(await this.inner.getRows(ids));
  }

  async readGroup(operatorId: string, keyGroup: number): Promise<StateRow[]> {
    if (!this.inner.readGroup) throw new Error('the state store cannot list a key group');
    return this.resolve(await this.inner.readGroup(operatorId, keyGroup));
  }

  /** Rows with their spilled values read back; rows without a reference are returned as they are. */
  private async resolve(rows: StateRow[]): Promise<StateRow[]> {
    let spilled: number[] | undefined;
    for (let i = 0; i < rows.length; i++) if (rows[i]!.values[SPILLED]) (spilled ??= []).push(i);
    if (!spilled) return rows;
    const out = rows.slice();
    await Promise.all(
      spilled.map(async (i) => {
        const r = rows[i]!;
        out[i] = { ...r, values: unpack(await this.blobs.get(utf8d.decode(r.values[SPILLED]!))) };
      }),
    );
    return out;
  }

  async applyRows(checkpointId: number, fence: number, rows: readonly StateRow[]): Promise<void> {
    // sizes first, without a promise per row: only rows over the threshold (rare) wait on the blob store
    let large: number[] | undefined;
    for (let i = 0; i < rows.length; i++) if (rowSize(rows[i]!) > this.threshold) (large ??= []).push(i);
    if (!large) return this.inner.applyRows(checkpointId, fence, rows);
    const out = rows.slice();
    await Promise.all(
      large.map(async (i) => {
        const r = rows[i]!;
        const name = blobName(r, checkpointId);
        await this.blobs.put(name, pack(r.values));
        this.spilled++;
        out[i] = { ...r, values: { [SPILLED]: utf8.encode(name) } };
      }),
    );
    await this.inner.applyRows(checkpointId, fence, out);
  }
}

/** What the threshold is compared with: the key's length plus each state's name length and bytes. */
function rowSize(r: StateRow): number {
  let size = r.key.length;
  const values = r.values;
  for (const k in values) if (Object.prototype.hasOwnProperty.call(values, k)) size += k.length + values[k]!.length;
  return size;
}

export function blobName(r: StateRowId, checkpointId: number): string {
  const h = createHash('sha256').update(r.key).digest('hex').slice(0, 32);
  return `state-blobs/${r.operatorId}/${r.keyGroup}/${h}/${String(checkpointId).padStart(12, '0')}.bin`;
}

/** name length, name, value length, value — repeated */
function pack(values: Record<string, Uint8Array>): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const [k, v] of Object.entries(values)) {
    const name = utf8.encode(k);
    const head = new Uint8Array(8);
    new DataView(head.buffer).setUint32(0, name.length);
    new DataView(head.buffer).setUint32(4, v.length);
    parts.push(head, name, v);
  }
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function unpack(bytes: Uint8Array): Record<string, Uint8Array> {
  const out: Record<string, Uint8Array> = {};
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let o = 0; o < bytes.length; ) {
    const n = view.getUint32(o);
    const m = view.getUint32(o + 4);
    const name = utf8d.decode(bytes.subarray(o + 8, o + 8 + n));
    out[name] = bytes.slice(o + 8 + n, o + 8 + n + m);
    o += 8 + n + m;
  }
  return out;
}
