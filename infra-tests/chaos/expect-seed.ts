/** What a clean chaos seed is, as test assertions: no error, live, nothing lost, duplicated or mismatched, dead letters = poison. */
import { expect } from 'vitest';
import { seedLine, type SeedResult } from './harness.js';

/** Asserts a clean seed (and prints its line); returns the line for further assertions. */
export function expectCleanSeed(r: SeedResult): string {
  const msg = seedLine(r);
  console.log(msg);
  expect(r.error, msg).toBeUndefined();
  expect(r.live, msg).toBe(true);
  expect(r.verdict.lost, msg).toBe(0);
  expect(r.verdict.duplicated, msg).toBe(0);
  expect(r.verdict.mismatched, msg).toBe(0);
  expect(r.deadLettered, msg).toBe(r.poison);
  return msg;
}
