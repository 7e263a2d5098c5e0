/**
 * What a staged sink (Kinesis, S3 files) can carry, checked where the record emits it. Staged
 * outputs are written as JSON at the checkpoint and published as JSON after it commits: a value
 * JSON cannot write (a bigint, a cycle) would fail every try of the checkpoint, and a Kinesis record
 * past its 1 MiB limit every try of the publish. Refused here, the record is a dead letter instead.
 */

/** Kinesis takes 1 MiB per record, partition key included; the record's id and epoch take the rest. */
export const MAX_KINESIS_VALUE_BYTES = 1024 * 1024 - 1024;

/** Why `v` cannot be staged for a sink (at most `maxBytes` of UTF-8 JSON when given), or undefined. */
export function stagedValueProblem(v: unknown, maxBytes?: number): string | undefined {
  let json: string | undefined;
  try {
    json = JSON.stringify(v);
  } catch (e) {
    return `cannot be written as JSON: ${e instanceof Error ? e.message : String(e)}`;
  }
  if (json === undefined) return `cannot be written as JSON: a ${typeof v} has no JSON form`;
  // a UTF-16 unit takes at most 3 bytes of UTF-8: count exactly only near the limit
  if (maxBytes !== undefined && json.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(json, 'utf8');
    if (bytes > maxBytes) return `is ${bytes} bytes as JSON, beyond the ${maxBytes} a Kinesis record leaves it (1 MiB with its id)`;
  }
  return undefined;
}
