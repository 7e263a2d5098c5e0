/**
 * Counts the AWS requests and billing units the engine's port calls turn into, by wrapping any
 * `RuntimePorts` (the in-memory twins here) and translating each call the way the AWS adapters in
 * `shared/adapters/aws/*` issue it:
 *
 * | port call                 | AWS requests (adapter)                                          |
 * |---------------------------|-----------------------------------------------------------------|
 * | control.readLease         | GetItem (consistent) on the lease item                          |
 * | control.takeOver          | UpdateItem lease (fence, takenAt)                               |
 * | control.writeDelta        | PutItem delta item (≤ 300 KB), else S3 PutObject                |
 * | control.readDelta         | GetItem delta item, or S3 GetObject                             |
 * | control.publishSnapshot   | UpdateItem lease (snapshot JSON, snapshotAt)                    |
 * | control.commitPosition    | UpdateItem lease (lastPosition)                                 |
 * | control.ack               | UpdateItem checkpoint item (ADD acks)                           |
 * | state.getRows             | Query per key group (consistent), billed on the group's items    |
 * | state.applyRows           | one conditional PutItem per packed item written (the twin's own) |
 * | writer.putAll             | PutRecords per ≤ 500 records / 4.5 MB; PUT payload units        |
 * | reader.read               | GetShardIterator + one GetRecords per page                      |
 * | deadLetters.put           | S3 PutObject                                                    |
 * | notifier.succeed          | SFN SendTaskSuccess                                             |
 * | upsertSink.write          | one conditional UpdateItem per distinct key                     |
 *
 * Write units use the larger of the item's size before and after the write, so the meter keeps the
 * size of every item it has seen written (a shadow of the tables).
 */
import type { MemoryStateTable } from '../shared/adapters/memory/memory-ports.js';
import type { RuntimePorts, StateRow, StoredRecord } from '../shared/runtime/ports.js';
import { itemSize, readUnits, writeUnits } from './dynamo-size.js';

export interface Counter {
  requests: number;
  /** items, rows or records carried */
  items: number;
  /** billing units: DynamoDB WCU/RCU, Kinesis PUT payload units, S3 requests */
  units: number;
  bytes: number;
}

const zero = (): Counter => ({ requests: 0, items: 0, units: 0, bytes: 0 });

/** Kinesis bills PUT payload units of 25 KB (data + partition key) per record. */
export const PUT_PAYLOAD_UNIT = 25 * 1024;
export const putPayloadUnits = (recordBytes: number) => Math.max(1, Math.ceil(recordBytes / PUT_PAYLOAD_UNIT));

const INLINE_DELTA_LIMIT = 8 * 1024;
const ISO = '2026-01-01T00:00:00.000Z';
const pad = (n: number) => String(n).padStart(12, '0');
/** Step Functions task tokens are opaque; the ones seen on AWS are several hundred characters. */
export const TASK_TOKEN_CHARS = 700;

export const stateRowItem = (row: StateRow, checkpointId: number) => ({ pk: `${row.operatorId}#${row.keyGroup}`, sk: row.key, ckpt: checkpointId, v: row.values });

export class Meter {
  readonly counters = new Map<string, Counter>();
  /** shadow of item sizes, by table-qualified key */
  private readonly sizes = new Map<string, number>();
  private readonly leases = new Map<string, Record<string, unknown>>();
  private readonly checkpoints = new Map<number, Record<string, unknown>>();

  add(key: string, requests: number, items: number, units: number, bytes: number): void {
    let c = this.counters.get(key);
    if (!c) this.counters.set(key, (c = zero()));
    c.requests += requests;
    c.items += items;
    c.units += units;
    c.bytes += bytes;
  }

  get(key: string): Counter {
    return { ...(this.counters.get(key) ?? zero()) };
  }

  /** Sum of every counter whose key starts with `prefix`. */
  sum(prefix: string): Counter {
    const s = zero();
    for (const [k, c] of this.counters) {
      if (!k.startsWith(prefix)) continue;
      s.requests += c.requests;
      s.items += c.items;
      s.units += c.units;
      s.bytes += c.bytes;
    }
    return s;
  }

  reset(): void {
    this.counters.clear();
  }

  snapshot(): Record<string, Counter> {
    return Object.fromEntries([...this.counters].map(([k, c]) => [k, { ...c }]));
  }

  /** One DynamoDB write of `item` under `key` (shadowed); returns its write units. */
  write(category: string, key: string, item: Record<string, unknown> | undefined): number {
    const before = this.sizes.get(key) ?? 0;
    const after = item ? itemSize(item) : 0;
    if (item) this.sizes.set(key, after);
    else this.sizes.delete(key);
    const u = writeUnits(after, before);
    this.add(`dynamodb.write.${category}`, 1, 1, u, after);
    return u;
  }

  read(category: string, sizes: readonly number[], requests = 1): void {
    let u = 0;
    let b = 0;
    for (const s of sizes) {
      u += readUnits(s);
      b += s;
    }
    this.add(`dynamodb.read.${category}`, requests, sizes.length, u, b);
  }

  sizeOf(key: string): number {
    return this.sizes.get(key) ?? 0;
  }

  private lease(id: string): Record<string, unknown> {
    let l = this.leases.get(id);
    if (!l) this.leases.set(id, (l = { pk: `lease#${id}`, sk: 'lease' }));
    return l;
  }

  leaseRead(id: string): void {
    this.read('lease', [this.sizeOf(`control/lease#${id}`)]);
  }

  leaseWrite(category: string, id: string, set: Record<string, unknown>): void {
    const l = this.lease(id);
    Object.assign(l, set);
    this.write(category, `control/lease#${id}`, l);
  }

  /**
   * What the coordinator's tasks cost per checkpoint (shared/coordinator/coordinator.ts):
   * allocate = GetItem + ListShards per stage + 2 UpdateItem; inject = GetItem + ListShards per
   * source stage + one PutRecord per source shard; await = UpdateItem (+ SendTaskSuccess when the
   * acks were all in already, not counted); commit = GetItem + 2 UpdateItem.
   */
  coordinatorCheckpoint(n: number, topology: readonly number[], sourceShards: number, sourceStages: number): void {
    const coord = { pk: 'coordinator', sk: 'state', last: n, inFlight: n };
    this.read('coordinator', [this.sizeOf('control/coordinator')]);
    this.add('kinesis.listShards', topology.length, 0, 0, 0);
    this.write('coordinator', 'control/coordinator', coord);
    const ck: Record<string, unknown> = { pk: 'checkpoint', sk: pad(n), status: 'IN_FLIGHT', expected: topology.reduce((a, b) => a + b, 0), topology: [...topology], startedAt: ISO, savepoint: false };
    this.checkpoints.set(n, ck);
    this.write('coordinator', `control/checkpoint#${n}`, ck);
    // inject
    this.read('coordinator', [this.sizeOf(`control/checkpoint#${n}`)]);
    this.add('kinesis.listShards', sourceStages, 0, 0, 0);
    this.add('kinesis.put.control', sourceShards, sourceShards, sourceShards, sourceShards * 40);
    // await
    ck.taskToken = 'x'.repeat(TASK_TOKEN_CHARS);
    this.write('coordinator', `control/checkpoint#${n}`, ck);
    // commit
    this.read('coordinator', [this.sizeOf(`control/checkpoint#${n}`)]);
    delete ck.taskToken;
    Object.assign(ck, { status: 'COMPLETED', endedAt: ISO, durationMs: 1234 });
    this.write('coordinator', `control/checkpoint#${n}`, ck);
    delete (coord as Record<string, unknown>).inFlight;
    this.write('coordinator', 'control/coordinator', coord);
    this.add('lambda.coordinator', 4, 0, 0, 0);
  }

  /** The instance's ack: ADD acks :me on the checkpoint item. */
  ack(n: number, instanceId: string): void {
    const ck = this.checkpoints.get(n);
    if (!ck) {
      this.add('dynamodb.write.ack', 1, 1, 1, 0); // a failed condition still costs a write unit
      return;
    }
    const acks = new Set<string>((ck.acks as Set<string> | undefined) ?? []);
    acks.add(instanceId);
    ck.acks = acks;
    // the ack happens while the task token is stored
    this.write('ack', `control/checkpoint#${n}`, { ...ck, taskToken: 'x'.repeat(TASK_TOKEN_CHARS) });
    this.sizes.set(`control/checkpoint#${n}`, itemSize(ck));
  }
}

/**
 * Wraps ports so every call is metered as the AWS adapters would issue it. State writes are metered
 * item by item as the twin's packed table takes them (pass `stateTable`); without it (real DynamoDB
 * underneath) state requests are left to the caller, who can read DynamoDB's own figures.
 */
export function meterPorts(ports: RuntimePorts, meter: Meter, stateTable?: MemoryStateTable): RuntimePorts {
  const { control, state, writer, reader, deadLetters, notifier, upsertSink } = ports;
  if (stateTable) {
    stateTable.onWrite = (w) => void meter.write('state', `state/${w.pk}/${w.after?.sk ?? w.before?.sk}`, w.after ? { pk: w.pk, ...w.after } : undefined);
    // a Query is billed on the sum of the items it returns, BatchGetItem per item (4 KB units)
    stateTable.onRead = (pk, items) => meter.read('state', items.length && pk ? [items.reduce((a, i) => a + itemSize({ pk, ...i }), 0)] : items.map((i) => itemSize(i as unknown as Record<string, unknown>)));
  }
  return {
    ...ports,
    control: {
      async readLease(id) {
        meter.leaseRead(id);
        return control.readLease(id);
      },
      async takeOver(id, fence) {
        const r = await control.takeOver(id, fence);
        meter.leaseWrite('takeover', id, { fence: r, takenAt: ISO });
        return r;
      },
      async writeDelta(id, n, delta) {
        const ref = await control.writeDelta(id, n, delta);
        if (delta.length <= INLINE_DELTA_LIMIT) meter.write('delta', `control/delta#${id}/${n}`, { pk: `delta#${id}`, sk: pad(n), data: delta, checkpointId: n });
        else meter.add('s3.put.delta', 1, 1, 1, delta.length);
        return ref;
      },
      async readDelta(ref) {
        const d = await control.readDelta(ref);
        if (ref.store === 'inline') meter.read('delta', [d.length + 40]);
        else meter.add('s3.get.delta', 1, 1, 1, d.length);
        return d;
      },
      async publishSnapshot(id, fence, pointer) {
        await control.publishSnapshot(id, fence, pointer);
        meter.leaseWrite('pointer', id, { snapshot: JSON.stringify(pointer), snapshotAt: ISO });
      },
      async commitPosition(id, fence, pos) {
        const parked = await control.commitPosition(id, fence, pos);
        meter.leaseWrite('position', id, { lastPosition: pos });
        return parked;
      },
      async ack(n, id) {
        meter.ack(n, id);
        return control.ack(n, id);
      },
    },
    state: {
      async getRows(ids) {
        const rows = await state.getRows(ids);
        return rows;
      },
      applyRows: (n, fence, rows) => state.applyRows(n, fence, rows),
    },
    writer: {
      async putAll(stream, records) {
        await writer.putAll(stream, records);
        let chunk = 0;
        let bytes = 0;
        let requests = 0;
        for (const r of records) {
          const size = r.data.length + 1; // partition key 'p'
          if (chunk === 500 || bytes + size > 4.5 * 1024 * 1024 || chunk === 0) {
            requests++;
            chunk = 0;
            bytes = 0;
          }
          chunk++;
          bytes += size;
          meter.add('kinesis.put.data', 0, 1, putPayloadUnits(size), size);
        }
        meter.add('kinesis.put.data', requests, 0, 0, 0);
      },
    },
    reader: {
      read(stream, shardId, from, until) {
        const inner = reader.read(stream, shardId, from, until);
        return (async function* () {
          meter.add('kinesis.getShardIterator', 1, 0, 0, 0);
          for await (const page of inner as AsyncIterable<StoredRecord[]>) {
            let b = 0;
            for (const r of page) b += r.data.length + r.partitionKey.length;
            meter.add('kinesis.get.replay', 1, page.length, 0, b);
            yield page;
          }
        })();
      },
    },
    deadLetters: {
      async put(letter) {
        await deadLetters.put(letter);
        meter.add('s3.put.deadLetter', 1, 1, 1, letter.data.length * 1.4 + 300);
      },
    },
    notifier: {
      async succeed(token, output) {
        await notifier.succeed(token, output);
        meter.add('sfn.sendTaskSuccess', 1, 0, 0, 0);
      },
    },
    upsertSink: {
      async write(table, keyAttribute, writes) {
        await upsertSink.write(table, keyAttribute, writes);
        const last = new Map(writes.map((w) => [w.key, w]));
        for (const w of last.values()) {
          meter.write('sink', `${table}/${w.key}`, { [keyAttribute]: w.key, ...w.item, _sluice_epoch: w.epoch, _sluice_seq: w.seq, _sluice_producer: w.producer });
        }
      },
    },
  };
}
