/**
 * Transactional sinks on AWS: outputs are *staged* per epoch by the instances and *published* by the
 * coordinator when a checkpoint commits.
 *
 * Staging (instances, `CollectSinkStore.stage`): each drain writes one S3 object per (sink, epoch,
 * producer, batch of seqs) under `sinks/_staged/<sink>/<epoch>/<producer>/<first>-<last>.json`. It
 * happens when the instance drains its outputs, before its snapshot is made durable, so when
 * checkpoint n completes every output of every epoch below n is staged. A replay stages the same
 * outputs again, perhaps cut into other batches: objects may overlap, and publishing merges them by
 * (producer, seq).
 *
 * Publishing (coordinator, `CommitTarget.publish(n)`): every epoch below n above the sink's
 * `through` mark (control table, `pk = sink`, `sk = <name>`) is published in epoch order, then the
 * mark moves. The mark moves only after an epoch is fully out, and publishing an epoch twice gives
 * the same result (deterministic object names and contents for files; deterministic record ids,
 * and a progress cursor written after every PutRecords call, for Kinesis): a coordinator that dies
 * between COMPLETED and publishing leaves the epochs for the next commit, which publishes every
 * epoch below it. Staging objects of published epochs are deleted afterwards (a zombie's late
 * staging of an old epoch is deleted at a later commit and never published).
 */
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { CommitTarget } from '../../coordinator/coordinator.js';
import type { Plan, PlanSink } from '../../plan/plan.js';
import type { ResourceNames } from '../../plan/resources.js';
import { fileSinkPrefix, kinesisSinkStream, stagingPrefix } from '../../plan/sink-names.js';
import type { CollectSinkStore, StagedOutput, Telemetry } from '../../runtime/ports.js';
import { putRecordsUntilAccepted, type PutEntry } from '../put-records.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';
import { sdkKinesisApi } from './kinesis.js';

/** The port the instances stage transactional sink outputs through (`RuntimePorts.collectSink`). */
export type StagedSinkStore = CollectSinkStore;

/** Values per published file-sink object. */
export const FILE_PART_RECORDS = 10_000;

const pad = (n: number) => String(n).padStart(12, '0');
/** producer ids are `<stage>:<shard>`; `:` is legal in S3 keys but awkward in tools */
export const producerKey = (producer: string) => producer.replace(/[^A-Za-z0-9_.-]/g, '_');

export function stagedObjectKey(sink: string, epoch: number, producer: string, first: number, last: number): string {
  return `${stagingPrefix(sink)}${pad(epoch)}/${producerKey(producer)}/${pad(first)}-${pad(last)}.json`;
}

/** Epoch of a staging object key, or undefined when the key is not one. */
export function epochOfStagedKey(sink: string, key: string): number | undefined {
  const p = stagingPrefix(sink);
  if (!key.startsWith(p)) return undefined;
  const e = Number(key.slice(p.length, p.length + 12));
  return Number.isInteger(e) ? e : undefined;
}

/** Object name of a published file-sink part: `<prefix>/epoch=<e>/<producer>-<first seq>.jsonl`. */
export function publishedFileKey(sink: PlanSink, epoch: number, producer: string, firstSeq: number): string {
  return `${fileSinkPrefix(sink)}/epoch=${epoch}/${producerKey(producer)}-${pad(firstSeq)}.jsonl`;
}

/** Record id of a value published to a Kinesis sink. */
export const kinesisRecordId = (sink: string, epoch: number, producer: string, seq: number) => `${sink}/${epoch}/${producer}/${seq}`;

interface StagedFile {
  readonly v: 1;
  readonly producer: string;
  readonly epoch: number;
  readonly outputs: Array<[number, unknown]>;
}

/** Writes staged outputs as S3 objects (the instances' side). */
export class S3StagingStore implements StagedSinkStore {
  constructor(
    private readonly clients: AwsClients,
    private readonly bucket: string,
  ) {}

  async stage(sink: string, outputs: readonly StagedOutput[]): Promise<void> {
    const groups = new Map<string, StagedOutput[]>();
    for (const o of outputs) {
      const k = `${o.epoch}|${o.producer}`;
      let g = groups.get(k);
      if (!g) groups.set(k, (g = []));
      g.push(o);
    }
    await Promise.all(
      [...groups.values()].map(async (g) => {
        const { producer, epoch } = g[0]!;
        let first = Number.POSITIVE_INFINITY;
        let last = Number.NEGATIVE_INFINITY;
        for (const o of g) {
          if (o.seq < first) first = o.seq;
          if (o.seq > last) last = o.seq;
        }
        const body: StagedFile = { v: 1, producer, epoch, outputs: g.map((o) => [o.seq, o.value]) };
        await withThrottleRetry(() =>
          this.clients.s3.send(
            new PutObjectCommand({
              Bucket: this.bucket,
              Key: stagedObjectKey(sink, epoch, producer, first, last),
              Body: JSON.stringify(body),
              ContentType: 'application/json',
            }),
          ),
        );
      }),
    );
  }
}

/** Sends each sink's staged outputs to the store of its kind. */
export class StagedSinkRouter implements StagedSinkStore {
  private readonly kinds: Map<string, PlanSink['kind']>;
  constructor(
    plan: Plan,
    private readonly s3: StagedSinkStore,
    private readonly collect: StagedSinkStore,
  ) {
    this.kinds = new Map(plan.sinks.map((s) => [s.name, s.kind]));
  }

  stage(sink: string, outputs: readonly StagedOutput[]): Promise<void> {
    const kind = this.kinds.get(sink);
    if (kind === 's3-file' || kind === 'kinesis') return this.s3.stage(sink, outputs);
    return this.collect.stage(sink, outputs);
  }
}

export interface PublishState {
  /** every epoch up to this one is published */
  readonly through: number;
  /** Kinesis: values of epoch `cursorEpoch` already put, in publishing order */
  readonly cursorEpoch?: number;
  readonly cursorIndex?: number;
}

/** The outputs of one epoch, merged over overlapping staging objects, in publishing order. */
export interface EpochOutputs {
  readonly epoch: number;
  /** producer → outputs sorted by seq (duplicates removed) */
  readonly byProducer: ReadonlyMap<string, ReadonlyArray<readonly [number, unknown]>>;
}

/** Common part of the publishers: the `through` mark, listing and merging staged epochs, and GC. */
abstract class StagedSinkPublisher implements CommitTarget {
  constructor(
    protected readonly clients: AwsClients,
    protected readonly names: ResourceNames,
    protected readonly bucket: string,
    readonly sink: PlanSink,
    protected readonly telemetry?: Telemetry,
  ) {}

  protected abstract publishEpoch(outputs: EpochOutputs, state: PublishState): Promise<number>;

  async readState(): Promise<PublishState> {
    const r = await withThrottleRetry(() =>
      this.clients.doc.send(new GetCommand({ TableName: this.names.controlTable, Key: { pk: 'sink', sk: this.sink.name }, ConsistentRead: true })),
    );
    return {
      through: (r.Item?.through as number | undefined) ?? -1,
      ...(r.Item?.cursorEpoch !== undefined ? { cursorEpoch: r.Item.cursorEpoch as number, cursorIndex: r.Item.cursorIndex as number } : {}),
    };
  }

  protected async writeState(state: PublishState): Promise<void> {
    await withThrottleRetry(() =>
      this.clients.doc.send(new PutCommand({ TableName: this.names.controlTable, Item: { pk: 'sink', sk: this.sink.name, ...state } })),
    );
  }

  /** Staging object keys by epoch. */
  async listStaged(): Promise<Map<number, string[]>> {
    const byEpoch = new Map<number, string[]>();
    let token: string | undefined;
    do {
      const r = await withThrottleRetry(() =>
        this.clients.s3.send(
          new ListObjectsV2Command({ Bucket: this.bucket, Prefix: stagingPrefix(this.sink.name), ...(token ? { ContinuationToken: token } : {}) }),
        ),
      );
      for (const o of r.Contents ?? []) {
        const e = epochOfStagedKey(this.sink.name, o.Key!);
        if (e === undefined) continue;
        let l = byEpoch.get(e);
        if (!l) byEpoch.set(e, (l = []));
        l.push(o.Key!);
      }
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return byEpoch;
  }

  async readEpoch(epoch: number, keys: readonly string[]): Promise<EpochOutputs> {
    const merged = new Map<string, Map<number, unknown>>();
    const files = await Promise.all(
      keys.map(async (Key) => {
        const r = await withThrottleRetry(() => this.clients.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key })));
        return JSON.parse(await r.Body!.transformToString()) as StagedFile;
      }),
    );
    for (const f of files) {
      let m = merged.get(f.producer);
      if (!m) merged.set(f.producer, (m = new Map()));
      for (const [seq, value] of f.outputs) if (!m.has(seq)) m.set(seq, value);
    }
    const byProducer = new Map<string, Array<readonly [number, unknown]>>();
    for (const p of [...merged.keys()].sort()) byProducer.set(p, [...merged.get(p)!].sort((a, b) => a[0] - b[0]));
    return { epoch, byProducer };
  }

  /** Publishes every staged epoch below n not yet published; returns how many values went out. */
  async publish(n: number): Promise<number> {
    let state = await this.readState();
    const staged = await this.listStaged();
    let published = 0;
    for (const e of [...staged.keys()].sort((a, b) => a - b)) {
      if (e <= state.through || e >= n) continue;
      const outputs = await this.readEpoch(e, staged.get(e)!);
      published += await this.publishEpoch(outputs, state);
      state = { through: e };
      await this.writeState(state);
    }
    // epochs below n with nothing staged are published too (there is nothing to do for them)
    if (state.through < n - 1) {
      state = { through: n - 1 };
      await this.writeState(state);
    }
    // staging objects of published epochs are no longer needed
    const old = [...staged].filter(([e]) => e <= state.through).flatMap(([, keys]) => keys);
    await this.deleteKeys(old);
    this.telemetry?.count('SinkValuesPublished', published);
    return published;
  }

  protected async deleteKeys(keys: readonly string[]): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < keys.length) {
        const Key = keys[next++]!;
        await withThrottleRetry(() => this.clients.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key })));
      }
    };
    await Promise.all(Array.from({ length: Math.min(16, keys.length) }, worker));
  }
}

/** Publishes staged epochs as JSON-lines objects under the sink's prefix. */
export class S3FileSinkPublisher extends StagedSinkPublisher {
  protected async publishEpoch(outputs: EpochOutputs): Promise<number> {
    const puts: Array<{ key: string; body: string }> = [];
    let n = 0;
    for (const [producer, list] of outputs.byProducer) {
      for (let i = 0; i < list.length; i += FILE_PART_RECORDS) {
        const part = list.slice(i, i + FILE_PART_RECORDS);
        puts.push({ key: publishedFileKey(this.sink, outputs.epoch, producer, part[0]![0]), body: part.map(([, v]) => JSON.stringify(v)).join('\n') + '\n' });
        n += part.length;
      }
    }
    let next = 0;
    const worker = async () => {
      while (next < puts.length) {
        const p = puts[next++]!;
        await withThrottleRetry(() =>
          this.clients.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: p.key, Body: p.body, ContentType: 'application/x-ndjson' })),
        );
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, puts.length) }, worker));
    return n;
  }
}

/** Publishes staged epochs as Kinesis records carrying deterministic ids. */
export class KinesisSinkPublisher extends StagedSinkPublisher {
  /** called after each PutRecords call has been accepted and its progress recorded (tests inject crashes here) */
  afterPut?: (epoch: number, index: number) => void | Promise<void>;

  protected async publishEpoch(outputs: EpochOutputs, state: PublishState): Promise<number> {
    const stream = kinesisSinkStream(this.names, this.sink);
    const enc = new TextEncoder();
    const records: PutEntry[] = [];
    for (const [producer, list] of outputs.byProducer) {
      for (const [seq, value] of list) {
        const id = kinesisRecordId(this.sink.name, outputs.epoch, producer, seq);
        records.push({ data: enc.encode(JSON.stringify({ id, epoch: outputs.epoch, value })), partitionKey: id });
      }
    }
    // resume after the values a crashed publish already put; chunks go one at a time, each one's
    // progress recorded once every entry of it was accepted
    const from = state.cursorEpoch === outputs.epoch ? (state.cursorIndex ?? 0) : 0;
    await putRecordsUntilAccepted(sdkKinesisApi(this.clients.kinesis), stream, records.slice(from), {
      afterChunk: async (end) => {
        await this.writeState({ through: state.through, cursorEpoch: outputs.epoch, cursorIndex: from + end });
        await this.afterPut?.(outputs.epoch, from + end);
      },
    });
    return Math.max(0, records.length - from);
  }
}

/** The commit targets of a plan's S3 and Kinesis sinks. */
export function stagedSinkPublishers(plan: Plan, names: ResourceNames, clients: AwsClients, bucket: string, telemetry?: Telemetry): StagedSinkPublisher[] {
  const out: StagedSinkPublisher[] = [];
  for (const sink of plan.sinks) {
    if (sink.kind === 's3-file') out.push(new S3FileSinkPublisher(clients, names, bucket, sink, telemetry));
    if (sink.kind === 'kinesis') out.push(new KinesisSinkPublisher(clients, names, bucket, sink, telemetry));
  }
  return out;
}

/** Marks every epoch below `epoch` of every staged sink as published (a restore starts a new epoch range). */
export async function skipStagedEpochsBelow(plan: Plan, names: ResourceNames, clients: AwsClients, epoch: number): Promise<void> {
  for (const sink of plan.sinks) {
    if (sink.kind !== 's3-file' && sink.kind !== 'kinesis') continue;
    await withThrottleRetry(() =>
      clients.doc.send(new PutCommand({ TableName: names.controlTable, Item: { pk: 'sink', sk: sink.name, through: epoch - 1 } })),
    );
  }
}
