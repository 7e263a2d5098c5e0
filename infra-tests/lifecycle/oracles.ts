/**
 * Expected outputs computed straight from the produced events, sharing no code with the engine or
 * the jobs: if a sink loses, repeats or mangles a value, these disagree.
 */
import type { Ev } from './jobs.js';

/** Every `user:count` a running count per user emits, sorted: user u with c events yields u:1 … u:c. */
export function runningCountOracle(events: readonly Ev[]): string[] {
  const per = new Map<string, number>();
  for (const e of events) per.set(e.user, (per.get(e.user) ?? 0) + 1);
  const out: string[] = [];
  for (const [u, c] of per) for (let i = 1; i <= c; i++) out.push(`${u}:${i}`);
  return out.sort();
}

/** Records per user. */
export function totalsOracle(events: readonly Ev[]): Map<string, number> {
  const per = new Map<string, number>();
  for (const e of events) per.set(e.user, (per.get(e.user) ?? 0) + 1);
  return per;
}

/** Records per (user, 1-second tumbling window), as sorted `user|start|count` strings. */
export function windowOracle(events: readonly Ev[]): string[] {
  const per = new Map<string, number>();
  for (const e of events) {
    const start = Math.floor(e.ts / 1000) * 1000;
    const k = `${e.user}|${start}`;
    per.set(k, (per.get(k) ?? 0) + 1);
  }
  return [...per].map(([k, c]) => `${k}|${c}`).sort();
}

/** `n` events over `users` users with strictly increasing timestamps from `fromTs`, `stepMs` apart. */
export function makeEvents(n: number, users: number, fromTs: number, stepMs: number, seed = 1): Ev[] {
  let s = seed >>> 0;
  const rnd = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  return Array.from({ length: n }, (_, i) => ({ user: `u${Math.floor(rnd() * users)}`, ts: fromTs + i * stepMs }));
}
