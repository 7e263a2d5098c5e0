/**
 * Randomness that replays: a small PRNG (mulberry32) seeded from the record's id, created only when
 * a user function asks for a number.
 */
import { murmur3 } from '../plan/key-groups.js';

const utf8 = new TextEncoder();

export function seededRandom(recordId: string): () => number {
  let next: (() => number) | undefined;
  return () => (next ??= mulberry32(murmur3(utf8.encode(recordId), 0x5eed)))();
}

/** mulberry32: a small, fast PRNG with a 32-bit state; the one the engine, the twins and the tools share. */
export function mulberry32(seed: number): () => number {
  let state = seed | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
