/**
 * How an Express round reads checkpoint n's acks on the happy path: a consistent GetItem of n's
 * record in the control table, straight from Step Functions (no Lambda invocation), evaluated in
 * ASL. The one ASL spelling of the acked rule (`allAcked`, shared/coordinator/records.ts, on the
 * record as DynamoCheckpointStore reads it): COMPLETED, or IN_FLIGHT with every member of the
 * `members` set in the `acks` set (acks of instances nobody expected do not count). Anything the
 * ASL does not decide — no record, ABORTED, a record without `members`, a failed read, or K reads
 * without the acks — goes to the coordinator function's `poll`, which applies the progress window,
 * the round's time and the abort rules (shared/coordinator/loop.ts).
 *
 * ```
 * AckKey? ─▶ AckKey-<digits> ─▶ (first wait) ─▶ ReadAcks ─▶ Read? ─┬─ COMPLETED ───────────────────────────────▶ acked
 *                                                 ▲                ├─ IN_FLIGHT, acks ─▶ AckSet ─▶ AckKinds ─▶ AllAcked? ─┬─▶ acked
 *                                                 │                ├─ IN_FLIGHT, none ─┐                               │
 *                                                 │                │                   ▼                               │
 *                                   AckWait ◀── CountRead ◀── K reads? ◀────────────────────────────────────────────────┘
 *                                                 │                └─ else, a failed read, K reads ───────────────────────▶ poll
 * ```
 *
 * The record's sort key is n zero-padded (controlKey.checkpoint): ASL has no padding intrinsic, so
 * a Choice on n's digits picks a Pass that prefixes the zeros, once per checkpoint.
 * JSONPath only: the local interpreter ignores JSONata and `Assign`.
 */
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { controlKey, controlPartition } from '../shared/adapters/aws/control-table-keys.js';

/** State names of the direct ack reads (beside COORDINATOR_STATES). */
export const ACK_READ_STATES = {
  key: 'AckKey?',
  keyOf: (digits: number) => `AckKey-${digits}`,
  read: 'ReadAcks',
  readChoice: 'Read?',
  set: 'AckSet',
  kinds: 'AckKinds',
  allAcked: 'AllAcked?',
  reads: 'Reads?',
  count: 'CountRead',
  reread: 'Reread',
} as const;

/** Where the reads keep their state in the round's JSON: `{ sk, reads }`, the read item and its evaluation. */
const AT = { acks: '$.acks', read: '$.read', each: '$.ackEach', kinds: '$.ackKinds' } as const;
const ITEM = `${AT.read}.Item`;

export interface AckReadsProps {
  readonly table: dynamodb.ITable;
  /** direct reads of n without its acks before the coordinator function is asked (`directAckReads`) */
  readonly reads: number;
  /** the Wait between two reads (ACK_POLL_SECONDS) */
  readonly ackWait: sfn.Wait;
  /** where an acked n goes (Commit) */
  readonly acked: sfn.IChainable;
  /** where everything the ASL does not decide goes (the Lambda `poll`) */
  readonly poll: sfn.IChainable;
}

export interface AckReads {
  /** a new checkpoint's first state: its record's key, then `next` (the first wait), then the first read */
  readonly start: (next: sfn.IChainable) => sfn.State;
  /** after a `poll` that found n open: count the reads from 0 again, wait, read */
  readonly again: sfn.State;
  /** the read itself (after a first wait other than `ackWait`) */
  readonly read: sfn.State;
}

/** The states that read n's record directly and decide: acked, not yet (read again after a wait), or ask `poll`. */
export function ackReads(scope: Construct, p: AckReadsProps): AckReads {
  const R = ACK_READ_STATES;
  const width = controlKey.checkpoint(0).sk.length;
  const n = '$.ckpt.checkpointId';
  const read = tasks.DynamoGetItem.jsonPath(scope, R.read, {
    comment: 'a consistent read of checkpoint n\'s record: its status, expected members and acks',
    table: p.table,
    key: {
      pk: tasks.DynamoAttributeValue.fromString(controlPartition.checkpoints),
      sk: tasks.DynamoAttributeValue.fromString(sfn.JsonPath.stringAt(`${AT.acks}.sk`)),
    },
    consistentRead: true,
    expressionAttributeNames: { '#status': 'status' },
    projectionExpression: ['#status', 'members', 'acks'].map((a) => new tasks.DynamoProjectionExpression().withAttribute(a)),
    resultPath: AT.read,
  });
  // a failed read (throttled, an error) is no reason to wait longer: the coordinator function reads
  read.addCatch(p.poll, { errors: [sfn.Errors.ALL], resultPath: sfn.JsonPath.DISCARD });

  const countRead = sfn.Pass.jsonPath(scope, R.count, {
    comment: 'one more direct read without the acks',
    parameters: { sk: sfn.JsonPath.stringAt(`${AT.acks}.sk`), reads: sfn.JsonPath.mathAdd(sfn.JsonPath.numberAt(`${AT.acks}.reads`), 1) },
    resultPath: AT.acks,
  }).next(p.ackWait);
  const again = sfn.Pass.jsonPath(scope, R.reread, {
    comment: 'the coordinator function found n open: read directly again',
    parameters: { sk: sfn.JsonPath.stringAt(`${AT.acks}.sk`), reads: 0 },
    resultPath: AT.acks,
  });
  again.next(p.ackWait);
  const notYet = sfn.Choice.jsonPath(scope, R.reads, { comment: `not acked yet: after ${p.reads} direct reads the coordinator function looks (progress window, round time)` })
    .when(sfn.Condition.numberGreaterThanEquals(`${AT.acks}.reads`, p.reads - 1), p.poll)
    .otherwise(countRead);

  // every member in the acks: one ArrayContains per member, then all answers alike and true (`members` is never empty)
  const ackSet = new sfn.Map(scope, R.set, {
    comment: 'is each expected member in the ack set?',
    itemsPath: `${ITEM}.members.SS`,
    itemSelector: { in: sfn.JsonPath.arrayContains(sfn.JsonPath.listAt(`${ITEM}.acks.SS`), sfn.JsonPath.stringAt('$$.Map.Item.Value')) },
    resultPath: AT.each,
  });
  ackSet.itemProcessor(sfn.Pass.jsonPath(scope, `${R.set}-Member`, { outputPath: '$.in' }));
  const kinds = sfn.Pass.jsonPath(scope, R.kinds, {
    parameters: { distinct: sfn.JsonPath.arrayLength(sfn.JsonPath.arrayUnique(sfn.JsonPath.listAt(AT.each))) },
    resultPath: AT.kinds,
  });
  const allAcked = sfn.Choice.jsonPath(scope, R.allAcked)
    .when(sfn.Condition.and(sfn.Condition.numberEquals(`${AT.kinds}.distinct`, 1), sfn.Condition.booleanEquals(`${AT.each}[0]`, true)), p.acked)
    .otherwise(notYet);
  ackSet.next(kinds).next(allAcked);

  // rules are tried in order: a record without a status (none at all) is ruled out first, so no
  // comparison below reads a missing path (that would fail the state)
  const status = (s: string) => sfn.Condition.stringEquals(`${ITEM}.status.S`, s);
  const members = sfn.Condition.isPresent(`${ITEM}.members.SS`);
  const readChoice = sfn.Choice.jsonPath(scope, R.readChoice, { comment: 'acked, not yet, or a case for the coordinator function (no record, aborted, no members)?' })
    // Not(IsPresent) rather than IsPresent false, which the local interpreter gets wrong on a missing path
    .when(sfn.Condition.not(sfn.Condition.isPresent(`${ITEM}.status.S`)), p.poll)
    .when(status('COMPLETED'), p.acked)
    .when(sfn.Condition.and(status('IN_FLIGHT'), members, sfn.Condition.isPresent(`${ITEM}.acks.SS`)), ackSet)
    .when(sfn.Condition.and(status('IN_FLIGHT'), members), notYet)
    .otherwise(p.poll);
  read.next(readChoice);

  const start = (next: sfn.IChainable): sfn.State => {
    const key = sfn.Choice.jsonPath(scope, R.key, { comment: `checkpoint n's sort key: n zero-padded to ${width} digits` });
    for (let digits = 1; digits <= width; digits++) {
      const pass = sfn.Pass.jsonPath(scope, R.keyOf(digits), {
        parameters: { sk: sfn.JsonPath.format(`${'0'.repeat(width - digits)}{}`, sfn.JsonPath.stringAt(n)), reads: 0 },
        resultPath: AT.acks,
      }).next(next);
      if (digits < width) key.when(sfn.Condition.numberLessThan(n, 10 ** digits), pass);
      else key.otherwise(pass);
    }
    return key;
  };
  p.ackWait.next(read);
  return { start, again, read };
}
