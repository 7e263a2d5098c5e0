/** Kinesis sequence numbers are decimal strings of up to 128 bits; compare them without BigInt. */
export function compareSeq(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}

import type { ReplayPoint } from './ports.js';

/** The later of two positions (undefined: none yet). */
export function laterSeq(a: string | undefined, b: string | undefined): string | undefined {
  return a === undefined ? b : b === undefined || compareSeq(a, b) >= 0 ? a : b;
}

/** True when the record at `seq` is covered by a snapshot whose replay point is `rp`. */
export function coveredBySnapshot(seq: string, rp: ReplayPoint): boolean {
  switch (rp.from) {
    case 'start':
      return false;
    case 'at':
      return compareSeq(seq, rp.sequenceNumber) < 0;
    case 'after':
      return compareSeq(seq, rp.sequenceNumber) <= 0;
  }
}

/**
 * Where a replay reads from: the snapshot's replay point, or — with no snapshot ('start') — the first
 * position the instance ever processed when it is known, read *at* it so that a shard trimmed past
 * it fails loudly instead of starting at whatever is left.
 */
export function replayStart(rp: ReplayPoint, origin: string | undefined): ReplayPoint {
  return rp.from === 'start' && origin !== undefined ? { from: 'at', sequenceNumber: origin } : rp;
}
