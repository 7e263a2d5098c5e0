/**
 * A source stage's data records: each Kinesis record's user records decoded (source-decoding.ts)
 * and pushed through the chain, one at a time and without a promise — a deployed stage function
 * pays for every promise (the tracer's async hooks track each one), and a source pays per record.
 * Only a record that fails hands back to the caller, which writes its dead letter and resumes
 * right after it (`read` with the failure's `resume`), so dead letters keep their order between the
 * records that went through.
 */
import type { PlanSource } from '../plan/plan.js';
import { errorMessage } from '../util/errors.js';
import type { Push, RecordMeta } from './operator-context.js';
import type { StoredRecord } from './ports.js';
import { batchTexts, decodeSourceValue, eventTimeOf, isKplAggregated, userRecordsOf, type SourceFunctions } from './source-decoding.js';

/**
 * The meta of the source record being pushed. One per instance, pointed at each user record in
 * turn: the chain uses a meta only while the record is pushed (contexts are valid only during the
 * call; windows and timers copy what they keep). Its id `shard:sequence:index` (which seeds
 * `ctx.random()`) is only spelled out when asked for.
 */
export class SourceRecordMeta implements RecordMeta {
  timestamp: number | undefined = undefined;
  key: string | undefined = undefined;
  keyGroup = 0;
  private sequenceNumber = '';
  private index = 0;
  constructor(private readonly shardId: string) {}
  set(timestamp: number | undefined, sequenceNumber: string, index: number): this {
    this.timestamp = timestamp;
    this.sequenceNumber = sequenceNumber;
    this.index = index;
    this.key = undefined;
    this.keyGroup = 0;
    return this;
  }
  get recordId(): string {
    return `${this.shardId}:${this.sequenceNumber}:${this.index}`;
  }
}

/** A user record that goes to the dead letters instead of downstream. */
export interface SourceRecordFailure {
  /** position of the user record in its Kinesis record */
  readonly index: number;
  readonly bytes: Uint8Array;
  readonly reason: string;
  /** what `read` resumes with after the dead letter is written */
  readonly resume: { readonly from: number; readonly userRecords: readonly Uint8Array[] };
}

const NOTHING_LEFT = { from: 0, userRecords: [] as const };

export class SourceRecordReader {
  private readonly meta: SourceRecordMeta;

  constructor(
    shardId: string,
    private readonly source: PlanSource,
    private readonly fns: SourceFunctions | undefined,
    private readonly push: Push,
    private readonly watermarks: { sourceRecord(timestamp: number | undefined): void },
    private readonly stats: { recordsIn: number },
  ) {
    this.meta = new SourceRecordMeta(shardId);
  }

  /** Each record's text, decoded for the whole batch at once (`batchTexts`), for a JSON or text source. */
  texts(records: readonly StoredRecord[]): Array<string | undefined> | undefined {
    return this.source.format === 'binary' ? undefined : batchTexts(records);
  }

  /**
   * Pushes the user records of `r` (from `resume.from` of `resume.userRecords` when resuming after
   * a failure) until one fails; returns that one, or undefined when all went through. `text`: the
   * record's data decoded already (`texts`).
   */
  read(r: StoredRecord, resume?: SourceRecordFailure['resume'], text?: string): SourceRecordFailure | undefined {
    let records = resume?.userRecords;
    if (!records) {
      if (!this.source.deaggregate || !isKplAggregated(r.data)) {
        // the common case: one user record, the Kinesis record itself
        const reason = this.pushOne(r, r.data, 0, text);
        return reason === undefined ? undefined : { index: 0, bytes: r.data, reason, resume: NOTHING_LEFT };
      }
      try {
        records = userRecordsOf(r.data, r.sequenceNumber, r.partitionKey, true);
      } catch (err) {
        return { index: 0, bytes: r.data, reason: `cannot de-aggregate KPL record: ${errorMessage(err)}`, resume: NOTHING_LEFT };
      }
    }
    for (let i = resume?.from ?? 0; i < records.length; i++) {
      const bytes = records[i]!;
      const reason = this.pushOne(r, bytes, i);
      if (reason !== undefined) return { index: i, bytes, reason, resume: { from: i + 1, userRecords: records } };
    }
    return undefined;
  }

  /** One user record through the chain; the reason it failed, else undefined. */
  private pushOne(r: StoredRecord, bytes: Uint8Array, index: number, text?: string): string | undefined {
    this.stats.recordsIn++;
    let value: unknown;
    let timestamp: number | undefined;
    try {
      value = decodeSourceValue(bytes, this.source.format, this.fns, text);
      timestamp = eventTimeOf(value, this.fns, r.approximateArrivalTimestamp);
    } catch (err) {
      return `cannot decode ${this.source.format} record: ${errorMessage(err)}`;
    }
    try {
      this.push(value, this.meta.set(timestamp, r.sequenceNumber, index));
    } catch (err) {
      return `user function failed: ${errorMessage(err)}`;
    }
    this.watermarks.sourceRecord(timestamp);
    return undefined;
  }
}
