/**
 * What a local run's sinks and dead letters hold, read back from the emulators: an upsert sink's
 * table, a file sink's objects, a Kinesis sink's stream, what a collect sink published, and the dead
 * letters (with the input file and line of each record the runner produced from a file).
 */
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-kinesis';
import type { AwsClients } from '../shared/adapters/aws/clients.js';
import { listAllShards } from '../shared/adapters/aws/kinesis.js';
import { s3ObjectApi } from '../shared/adapters/aws/s3-objects.js';
import type { ObjectApi } from '../shared/adapters/objects.js';
import type { CollectRegistry } from '../shared/adapters/memory/collect-registry.js';
import type { Plan } from '../shared/plan/plan.js';
import type { ResourceNames } from '../shared/plan/resources.js';
import { fileSinkPrefix, kinesisSinkStream } from '../shared/plan/sink-names.js';
import { compareKeys, INTERNAL_ATTRIBUTE, type LocatedDeadLetter } from './input-lines.js';

export interface DeadLetterRecord {
  stage: string;
  shardId: string;
  sequenceNumber: string;
  subSequence: number;
  reason: string;
  data: string;
}

/** Where a produced record came from, by `source/shardId/sequenceNumber`. */
export type LineIndex = ReadonlyMap<string, { source: string; file: string; line: number }>;

export class SinkReader {
  private readonly objects: ObjectApi;

  constructor(
    private readonly plan: Plan,
    private readonly names: ResourceNames,
    private readonly clients: AwsClients,
    private readonly collected: CollectRegistry,
  ) {
    this.objects = s3ObjectApi(clients, names.bucket);
  }

  private sink(sinkName: string, kind?: Plan['sinks'][number]['kind']) {
    const sink = this.plan.sinks.find((s) => s.name === sinkName && (kind === undefined || s.kind === kind));
    if (!sink) {
      const what = kind === 's3-file' ? 'file sink' : kind === 'kinesis' ? 'Kinesis sink' : 'sink';
      throw new Error(`job "${this.plan.job}" has no ${what} "${sinkName}" (sinks: ${this.plan.sinks.map((s) => s.name).join(', ')})`);
    }
    return sink;
  }

  /** Every value published so far by a file sink, object by object in key order. */
  async fileSink<T = unknown>(sinkName: string): Promise<Array<{ key: string; values: T[] }>> {
    const sink = this.sink(sinkName, 's3-file');
    const dec = new TextDecoder();
    const out: Array<{ key: string; values: T[] }> = [];
    for (const key of await this.objects.list(`${fileSinkPrefix(sink)}/`)) {
      const text = dec.decode(await this.objects.get(key));
      out.push({ key, values: text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as T) });
    }
    return out.sort((a, b) => a.key.localeCompare(b.key));
  }

  /** Every record on a Kinesis sink's stream, parsed (`{ id, epoch, value }`). */
  async kinesisSink<T = unknown>(sinkName: string): Promise<Array<{ id: string; epoch: number; value: T }>> {
    const stream = kinesisSinkStream(this.names, this.sink(sinkName, 'kinesis'));
    const out: Array<{ id: string; epoch: number; value: T }> = [];
    const dec = new TextDecoder();
    for (const shard of await listAllShards(this.clients, stream)) {
      let it = (await this.clients.kinesis.send(new GetShardIteratorCommand({ StreamName: stream, ShardId: shard.shardId, ShardIteratorType: 'TRIM_HORIZON' }))).ShardIterator;
      while (it) {
        const r = await this.clients.kinesis.send(new GetRecordsCommand({ ShardIterator: it, Limit: 1000 }));
        for (const rec of r.Records ?? []) out.push(JSON.parse(dec.decode(rec.Data!)) as { id: string; epoch: number; value: T });
        if (!r.Records?.length && (r.MillisBehindLatest ?? 0) === 0) break;
        it = r.NextShardIterator;
      }
    }
    return out;
  }

  /** Every row of an upsert sink's table. */
  async upsertSink<T = Record<string, unknown>>(sinkName: string): Promise<T[]> {
    const sink = this.sink(sinkName);
    const out: T[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const r = await this.clients.doc.send(new ScanCommand({ TableName: this.names.sinkTable(sink), ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) }));
      out.push(...((r.Items ?? []) as T[]));
      start = r.LastEvaluatedKey;
    } while (start);
    return out;
  }

  /**
   * Everything a sink holds, as the values the job wrote: an upsert sink's rows (without the
   * engine's own attributes, in key order), the records of a file sink's objects (object by object),
   * the values on a Kinesis sink's stream, or what a collect sink published.
   */
  async values(sinkName: string): Promise<unknown[]> {
    const sink = this.sink(sinkName);
    switch (sink.kind) {
      case 'dynamodb-upsert': {
        const key = sink.keyAttribute ?? 'pk';
        const rows = (await this.upsertSink(sinkName)).map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !k.startsWith(INTERNAL_ATTRIBUTE))));
        return rows.sort((a, b) => compareKeys(a[key], b[key]));
      }
      case 's3-file':
        return (await this.fileSink(sinkName)).flatMap((o) => o.values);
      case 'kinesis':
        return (await this.kinesisSink(sinkName)).map((r) => r.value);
      case 'collect':
        return this.collected.published(sinkName);
    }
  }

  /** Dead letters written so far, parsed. */
  async deadLetters(): Promise<DeadLetterRecord[]> {
    const dec = new TextDecoder();
    const out: DeadLetterRecord[] = [];
    for (const key of await this.objects.list('dead-letters/')) out.push(JSON.parse(dec.decode(await this.objects.get(key))) as DeadLetterRecord);
    return out;
  }

  /**
   * Dead letters, each with the source, input file and line of the record it holds when that record
   * is in `lines` (a record rejected in a later stage is named by its stage and position).
   */
  async deadLettersWithLines(lines: LineIndex): Promise<LocatedDeadLetter[]> {
    const sourceOfStage = new Map(this.plan.stages.flatMap((st) => (st.input.kind === 'source' ? [[st.id, st.input.sourceId] as const] : [])));
    const out = (await this.deadLetters()).map((l): LocatedDeadLetter => {
      // sequence numbers are unique per stream only: the stage says which source stream
      const sourceId = sourceOfStage.get(l.stage);
      const source = this.plan.sources.find((s) => s.id === sourceId)?.name;
      const at = source !== undefined ? lines.get(`${source}/${l.shardId}/${l.sequenceNumber}`) : undefined;
      return {
        ...(source !== undefined ? { source } : {}),
        ...(at ? { file: at.file, line: at.line } : {}),
        reason: l.reason,
        data: Buffer.from(l.data, 'base64').toString('utf8'),
        stage: l.stage,
        shardId: l.shardId,
        sequenceNumber: l.sequenceNumber,
        subSequence: l.subSequence,
      };
    });
    return out.sort((a, b) => (a.file ?? '\uffff').localeCompare(b.file ?? '\uffff') || (a.line ?? 0) - (b.line ?? 0) || a.sequenceNumber.localeCompare(b.sequenceNumber));
  }
}
