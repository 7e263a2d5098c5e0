/**
 * The chaos job's input: seeded records with poison ones of every kind, split into bursts, and
 * single records for targeted tests. The oracle judges against exactly what is produced here.
 */
import { prng } from '../../local/chaos/faults.js';
import type { ProducedRecord } from './oracle.js';

interface GeneratedInput {
  readonly bursts: Array<Array<{ payload: unknown; produced: ProducedRecord }>>;
  readonly gapsMs: number[];
  readonly pinned: boolean;
  /** distinct keys */
  readonly keys: number;
  readonly records: number;
  readonly poison: number;
}

export interface InputShape {
  /** records, ±25 %; @default 160 */
  readonly records?: number;
  /** distinct keys; @default 3–8 */
  readonly keys?: number;
  /** source partition keys: the record's key (one source shard per key), random, or one for all; @default pinned or random by seed */
  readonly partitioning?: 'pinned' | 'random' | 'single';
  /** bursts; @default 3–5 */
  readonly bursts?: number;
  /** gap after each burst; @default 300–1200 ms */
  readonly gapMs?: number;
  /** ballast per record, in bytes; @default 0 */
  readonly padBytes?: number;
  /** poison records: at least one of each kind, plus this share; @default 0.04 (0: none at all) */
  readonly poisonRate?: number;
}

/** The seed's input: records with a few poison ones of every kind, split into bursts. */
export function generateInput(seed: number, shape: InputShape = {}): GeneratedInput {
  const rnd = prng(seed * 7919 + 17);
  const int = (n: number) => Math.floor(rnd() * n);
  const approx = shape.records ?? 160;
  const n = Math.max(12, Math.round(approx * (0.75 + 0.5 * rnd())));
  const keys = shape.keys ?? 3 + int(6);
  const pinnedDraw = rnd() < 0.5;
  const partitioning = shape.partitioning ?? (pinnedDraw ? 'pinned' : 'random');
  const poisonRate = shape.poisonRate ?? 0.04;
  const poisonKinds = ['malformed', 'map', 'process'] as const;
  // at least one poison record of each kind, at random places; then a few more
  const forced = new Map<number, (typeof poisonKinds)[number]>();
  if (poisonRate > 0) {
    for (const k of poisonKinds) {
      let at = int(n);
      while (forced.has(at)) at = int(n);
      forced.set(at, k);
    }
  }
  const pad = shape.padBytes ? 'x'.repeat(shape.padBytes) : undefined;
  const all: Array<{ payload: unknown; produced: ProducedRecord }> = [];
  let poison = 0;
  for (let i = 0; i < n; i++) {
    const id = `c${seed}-${String(i).padStart(5, '0')}`;
    const key = `k${int(keys)}`;
    const value = 1 + int(9);
    const kind = forced.get(i) ?? (poisonRate > 0 && rnd() < poisonRate ? poisonKinds[int(3)] : undefined);
    const partitionKey = partitioning === 'pinned' ? key : partitioning === 'single' ? 'one' : `pk-${int(1000)}`;
    let text: string;
    if (kind === 'malformed') text = `{"id":"${id}","key":"${key}","value":`;
    else text = JSON.stringify({ id, key, value, ...(kind ? { poison: kind } : {}), ...(pad ? { pad } : {}) });
    if (kind) poison++;
    all.push({ payload: new TextEncoder().encode(text), produced: { text, partitionKey } });
  }
  const nBursts = Math.min(n, shape.bursts ?? 3 + int(3));
  const bursts: GeneratedInput['bursts'] = [];
  const cuts = new Set<number>();
  while (cuts.size < nBursts - 1) cuts.add(1 + int(n - 1));
  const sorted = [0, ...[...cuts].sort((a, b) => a - b), n];
  for (let b = 0; b < nBursts; b++) bursts.push(all.slice(sorted[b], sorted[b + 1]));
  const gapsMs = bursts.map(() => shape.gapMs ?? 300 + int(900));
  return { bursts, gapsMs, pinned: partitioning !== 'random', keys, records: n, poison };
}

/** Generated records in the form `ChaosRun.produce` takes. */
export type InputRecord = { payload: unknown; produced: ProducedRecord };

/** Builds one input record (targeted tests). */
export function inputRecord(r: { id: string; key: string; value: number; poison?: 'map' | 'process' | 'malformed'; pad?: number }, partitionKey = r.key): InputRecord {
  const text =
    r.poison === 'malformed'
      ? `{"id":"${r.id}","key":"${r.key}","value":`
      : JSON.stringify({ id: r.id, key: r.key, value: r.value, ...(r.poison ? { poison: r.poison } : {}), ...(r.pad ? { pad: 'x'.repeat(r.pad) } : {}) });
  return { payload: new TextEncoder().encode(text), produced: { text, partitionKey } };
}

/** A record produced after the input while missing kinds wait for data (ids above the input's). */
export function extraRecord(seed: number, n: number, i: number, keys: number, pinned: boolean): InputRecord {
  const key = `k${(n + i) % keys}`;
  return inputRecord({ id: `c${seed}-${String(90_000 + n).padStart(5, '0')}`, key, value: 1 + (n % 9) }, pinned ? key : `pk-x${n}`);
}

/** The key of a produced record's text (undefined for a line that is not JSON). */
export function keyOf(text: string): string | undefined {
  try {
    const o = JSON.parse(text) as { key?: unknown };
    return typeof o?.key === 'string' ? o.key : undefined;
  } catch {
    return undefined;
  }
}
