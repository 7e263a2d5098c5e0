/**
 * What the local runner needs to tell a user where their results and rejects came from: the numbered
 * lines of an input file, where each record landed, and dead letters located at a file and line.
 */
import { readFileSync } from 'node:fs';

/** Where PutRecords put a record. */
export interface RecordPosition {
  readonly shardId: string;
  readonly sequenceNumber: string;
}

/** A dead letter, with the input file and line of its record when it came from a file. */
export interface LocatedDeadLetter {
  readonly source?: string;
  readonly file?: string;
  /** 1-based line of the input file */
  readonly line?: number;
  readonly reason: string;
  /** the record as it was rejected (UTF-8) */
  readonly data: string;
  readonly stage: string;
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly subSequence: number;
}

/** Attributes an upsert sink adds to its rows for its own bookkeeping. */
export const INTERNAL_ATTRIBUTE = '_sluice';

export function compareKeys(a: unknown, b: unknown): number {
  return typeof a === 'number' && typeof b === 'number' ? a - b : String(a).localeCompare(String(b));
}

/** The non-blank lines of a file with their 1-based line numbers. */
export function readNumberedLines(file: string): Array<{ line: number; text: string }> {
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((text, i) => ({ line: i + 1, text: text.endsWith('\r') ? text.slice(0, -1) : text }))
    .filter((l) => l.text.trim() !== '');
}
