/**
 * AWS answers that are legal but unkind: part of a batch unprocessed, a short page, a response lost
 * after the request was applied, a PutRecords that fails some entries, a replay point trimmed away.
 * Each is what the service really does under load; a reader or writer that ignores it loses data.
 */
import { DeleteObjectCommand, DeleteObjectsCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { SendTaskFailureCommand, SendTaskHeartbeatCommand, SendTaskSuccessCommand } from '@aws-sdk/client-sfn';
import { GetShardIteratorCommand, PutRecordsCommand, type KinesisClient, type PutRecordsCommandInput, type PutRecordsCommandOutput, type PutRecordsResultEntry } from '@aws-sdk/client-kinesis';
import {
  BatchGetCommand,
  DeleteCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
  type BatchGetCommandOutput,
  type DynamoDBDocumentClient,
  type QueryCommandOutput,
} from '@aws-sdk/lib-dynamodb';
import type { AwsClients } from '../../shared/adapters/aws/clients.js';
import { decodePacket } from '../../shared/codec/envelope.js';
import type { FaultSchedule } from './schedule.js';

/**
 * BatchGetItem (document client) answering only part of the keys: the rest come back as
 * UnprocessedKeys, as DynamoDB does under load. A reader that ignores them loses state.
 */
export async function partialBatchGet(doc: DynamoDBDocumentClient, cmd: BatchGetCommand, schedule: FaultSchedule): Promise<BatchGetCommandOutput | undefined> {
  const items = cmd.input.RequestItems ?? {};
  const tables = Object.keys(items);
  if (tables.length !== 1) return undefined;
  const table = tables[0]!;
  const spec = items[table]!;
  const keys = spec.Keys ?? [];
  if (keys.length < 1 || !schedule.roll('unprocessed-keys')) return undefined;
  const cut = schedule.int(keys.length); // 0 … n-1 keys answered now
  const answered = keys.slice(0, cut);
  const rest = keys.slice(cut);
  let responses: Record<string, Record<string, unknown>[]> = { [table]: [] };
  let metadata: BatchGetCommandOutput['$metadata'] = { httpStatusCode: 200 };
  if (answered.length) {
    const out = await doc.send(new BatchGetCommand({ ...cmd.input, RequestItems: { [table]: { ...spec, Keys: answered } } }));
    metadata = out.$metadata;
    responses = (out.Responses as Record<string, Record<string, unknown>[]> | undefined) ?? responses;
    const again = out.UnprocessedKeys?.[table]?.Keys ?? [];
    rest.unshift(...again);
  }
  return { $metadata: metadata, Responses: responses, UnprocessedKeys: { [table]: { ...spec, Keys: rest } } };
}

/**
 * A Query page cut short: DynamoDB ends a page at 1 MB (or under load) and says where to go on with
 * LastEvaluatedKey. A reader that stops at the first page loses the items of the others.
 */
export async function shortQueryPage(doc: DynamoDBDocumentClient, cmd: QueryCommand, schedule: FaultSchedule): Promise<QueryCommandOutput | undefined> {
  if (cmd.input.Limit !== undefined || !schedule.roll('unprocessed-keys')) return undefined;
  const out = await doc.send(new QueryCommand({ ...cmd.input, Limit: 1 }));
  return out;
}

/**
 * The requests a lost response is applied to, per service: every kind of write the engine makes.
 * DynamoDB: conditional writes (a retry can meet its own earlier write; unconditional ones are
 * idempotent); Kinesis: PutRecords (a retry lands the entries again); S3: object writes and deletes
 * (a retry rewrites the same bytes, deletes nothing more); Step Functions: task answers (a retry
 * finds the token used: TaskTimedOut).
 */
export function losesResponse(service: keyof AwsClients, cmd: object): boolean {
  switch (service) {
    case 'doc':
      return isConditionalWrite(cmd);
    case 'kinesis':
      return cmd instanceof PutRecordsCommand;
    case 's3':
      return cmd instanceof PutObjectCommand || cmd instanceof DeleteObjectCommand || cmd instanceof DeleteObjectsCommand;
    case 'sfn':
      return cmd instanceof SendTaskSuccessCommand || cmd instanceof SendTaskFailureCommand || cmd instanceof SendTaskHeartbeatCommand;
    default:
      return false;
  }
}

/**
 * The coordinator's clients (patched in place, like crashCoordinatorWrites): a conditional write
 * sent inside a coordinator task may lose its response.
 */
export function loseCoordinatorResponses(clients: AwsClients, schedule: FaultSchedule, inTask: () => boolean): void {
  const doc = clients.doc as unknown as { send: (cmd: object, ...rest: unknown[]) => Promise<unknown> };
  const send = doc.send.bind(doc);
  doc.send = (cmd: object, ...rest: unknown[]) => (inTask() && isConditionalWrite(cmd) && schedule.roll('lost-response') ? lostResponse({ send }, cmd, schedule) : send(cmd, ...rest));
}

/** A DynamoDB write with a condition (document client): its retry can meet its own earlier write. */
export function isConditionalWrite(cmd: object): boolean {
  if (cmd instanceof TransactWriteCommand) return true;
  return (cmd instanceof PutCommand || cmd instanceof UpdateCommand || cmd instanceof DeleteCommand) && cmd.input.ConditionExpression !== undefined;
}

/**
 * A lost response: the request is applied, its response never arrives (a connection reset, a
 * timeout), and the SDK sends the same request again — what the caller gets is the retry's answer.
 * An error of the first attempt is the caller's (nothing was lost).
 */
export async function lostResponse(client: { send: (cmd: never) => Promise<unknown> }, cmd: object, schedule: Pick<FaultSchedule, 'observe'>): Promise<unknown> {
  const send = client.send.bind(client) as (cmd: object) => Promise<unknown>;
  await send(cmd);
  schedule.observe(`lost-response:${cmd.constructor.name}`);
  return send(cmd);
}

/**
 * Clients (for targeted tests) on which every DynamoDB conditional write loses its first response,
 * the way the chaos schedule's `lost-response` does: the real request reaches the emulator twice.
 */
export function losingConditionalWrites(clients: AwsClients, onLost: (what: string) => void = () => undefined): AwsClients {
  const doc = clients.doc;
  const send = doc.send.bind(doc) as (cmd: object, ...rest: unknown[]) => Promise<unknown>;
  const losing = Object.create(doc) as typeof doc;
  (losing as unknown as { send: typeof send }).send = (cmd, ...rest) => (isConditionalWrite(cmd) ? lostResponse(doc, cmd, { observe: onLost }) : send(cmd, ...rest));
  return { ...clients, doc: losing };
}

/** True when a Kinesis record is a packet holding a barrier. */
function carriesBarrier(data: Uint8Array | undefined): boolean {
  if (!data) return false;
  try {
    return decodePacket(data).envelopes.some((e) => e.kind === 'barrier');
  } catch {
    return false;
  }
}

/**
 * PutRecords with a partial failure: only some entries are really sent; the others are answered
 * with ProvisionedThroughputExceededException, in the response shape the SDK returns (one result per
 * entry, in request order, FailedRecordCount set).
 */
export async function partialPutRecords(kinesis: KinesisClient, cmd: PutRecordsCommand, schedule: FaultSchedule): Promise<PutRecordsCommandOutput | undefined> {
  const input: PutRecordsCommandInput = cmd.input;
  const entries = input.Records ?? [];
  if (!entries.length) return undefined;
  const fail = new Set<number>();
  const barrierAt = entries.findIndex((e) => carriesBarrier(e.Data));
  // a partial failure needs something to succeed: a barrier alone in its call is left alone
  if (barrierAt >= 0 && entries.length > 1 && schedule.roll('putrecords-partial-barrier')) {
    // entries bound for the barrier's shard that precede it fail and land after it; if there are
    // none, the barrier itself fails and lands after whatever else the call carries
    const hashKey = entries[barrierAt]!.ExplicitHashKey;
    for (let i = 0; i < barrierAt; i++) if (entries[i]!.ExplicitHashKey === hashKey) fail.add(i);
    if (!fail.size) fail.add(barrierAt);
    schedule.observe(fail.has(barrierAt) ? 'barrier-entry-failed' : 'entries-before-barrier-failed');
  } else if (entries.length > 1 && schedule.roll('putrecords-partial')) {
    for (let i = 0; i < entries.length; i++) if (schedule.random() < 0.5) fail.add(i);
    if (!fail.size) fail.add(schedule.int(entries.length));
    if (fail.size === entries.length) fail.delete(schedule.int(entries.length));
  } else return undefined;

  const sendIdx = entries.map((_, i) => i).filter((i) => !fail.has(i));
  const results: PutRecordsResultEntry[] = entries.map(() => ({
    ErrorCode: 'ProvisionedThroughputExceededException',
    ErrorMessage: 'Rate exceeded for shard shardId-000000000000 in stream under account 000000000000.',
  }));
  let failed = fail.size;
  let metadata: PutRecordsCommandOutput['$metadata'] = { httpStatusCode: 200 };
  if (sendIdx.length) {
    const out = await kinesis.send(new PutRecordsCommand({ ...input, Records: sendIdx.map((i) => entries[i]!) }));
    metadata = out.$metadata;
    sendIdx.forEach((i, j) => {
      const r = out.Records?.[j];
      if (r && !r.ErrorCode) results[i] = { SequenceNumber: r.SequenceNumber, ShardId: r.ShardId };
      else failed++;
    });
  }
  return { $metadata: metadata, FailedRecordCount: failed, Records: results, EncryptionType: 'NONE' };
}

/**
 * Client fault for targeted tests: while `active()`, the engine's replay reads (through the stage's
 * own clients; the ESM poller uses other clients) find the record they start from trimmed away, as a
 * replay point older than the stream's retention would. Kinesis does not refuse such a position: an
 * iterator at or after a trimmed sequence number starts at the oldest record still retained. So every
 * iterator asked for at or after a sequence number is served just after it.
 */
export function trimmedReplayFault(active: () => boolean, onFault?: () => void) {
  return (service: keyof AwsClients, command: object): object | void => {
    if (service !== 'kinesis' || !active() || !(command instanceof GetShardIteratorCommand)) return;
    const { ShardIteratorType: type, StartingSequenceNumber: seq } = command.input;
    if ((type !== 'AT_SEQUENCE_NUMBER' && type !== 'AFTER_SEQUENCE_NUMBER') || !seq) return;
    onFault?.();
    return new GetShardIteratorCommand({ ...command.input, ShardIteratorType: 'AFTER_SEQUENCE_NUMBER' });
  };
}
