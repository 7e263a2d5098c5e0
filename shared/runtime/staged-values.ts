/**
 * What a staged sink (Kinesis, S3 files) can carry, checked where the record emits it. Staged
 * outputs are written as JSON at the checkpoint and published as JSON after it commits: a value
 * JSON cannot write (a bigint, a cycle) would fail every try of the checkpoint, a Map or Set would
 * be published as `{}`, and a Kinesis record past its 1 MiB limit would fail every try of the
 * publish. Refused here, the record is a dead letter instead.
 */
import { jsonValueProblem } from '../util/encodable-values.js';

/** Kinesis takes 1 MiB per record, partition key included; the record's id and epoch take the rest. */
export const MAX_KINESIS_VALUE_BYTES = 1024 * 1024 - 1024;

/** Why `v` cannot be staged for a sink (at most `maxBytes` of UTF-8 JSON when given), or undefined. */
export function stagedValueProblem(v: unknown, maxBytes?: number): string | undefined {
  // a value of its own (not a field, which JSON leaves out) must have a JSON form
  if (v === undefined || typeof v === 'function' || typeof v === 'symbol') return `cannot be written as JSON: a ${typeof v} has no JSON form`;
  const why = jsonValueProblem(v);
  if (why !== undefined) return `cannot be written as JSON: ${why}`;
  if (maxBytes === undefined) return undefined;
  // only a size limit needs the JSON itself; a UTF-16 unit takes at most 3 bytes of UTF-8
  const json = JSON.stringify(v);
  if (json.length * 3 <= maxBytes) return undefined;
  const bytes = Buffer.byteLength(json, 'utf8');
  return bytes > maxBytes ? `is ${bytes} bytes as JSON, beyond the ${maxBytes} a Kinesis record leaves it (1 MiB with its id)` : undefined;
}
