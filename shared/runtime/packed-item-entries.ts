/**
 * The entries of one packed state item (packed-state.ts), kept in ascending key order: their sizes
 * as split decisions count them, lookup, and the merge of a checkpoint's rows into them. An entry
 * list is shared by the cached item and later writes, so nothing here changes one: a merge makes a
 * new list.
 */
import type { StateRow } from './ports.js';
import { compareKeys, type PackedEntry } from '../codec/packed-entries.js';

/** pk + sk + the small attributes of an item, a bound used for split decisions */
export const ITEM_OVERHEAD = 80;

export type Values = Record<string, Uint8Array>;
const utf8 = new TextEncoder();

/**
 * A decoded entry with its key's UTF-8 bytes and its `entryBytes`, so that a write re-encodes an
 * item from them without encoding keys or sizing entries again. Shared by the items of successive
 * writes: never changed.
 */
export interface Entry extends PackedEntry {
  readonly size: number;
}

const entry = (key: string, kb: Uint8Array, values: Values): Entry => ({ key, kb, values, size: entryBytes(kb, values) });

/** An entry made from a key not encoded yet. */
export const entryOf = (key: string, values: Values): Entry => entry(key, utf8.encode(key), values);

/** Decoded entries in ascending key order, each key once (the encoder writes them so; a last duplicate would win, as in a Map). */
export function sortedEntries(decoded: readonly PackedEntry[]): Entry[] {
  let ascending = true;
  for (let i = 1; i < decoded.length && ascending; i++) ascending = compareKeys(decoded[i - 1]!.key, decoded[i]!.key) < 0;
  const list = ascending ? decoded : [...new Map(decoded.map((e) => [e.key, e])).values()].sort((a, b) => compareKeys(a.key, b.key));
  return list.map((e) => entry(e.key, e.kb, e.values));
}

/** Index of the first entry whose key is ≥ `key` (entries ascending). */
function lowerBound(entries: readonly Entry[], key: string): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareKeys(entries[mid]!.key, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function find(entries: readonly Entry[], key: string): Entry | undefined {
  const e = entries[lowerBound(entries, key)];
  return e?.key === key ? e : undefined;
}

function sameValues(a: Values, b: Values): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) {
    const x = a[k]!;
    const y = b[k];
    if (!y || x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  }
  return true;
}

/** an entry's bytes as split decisions count them (the key's UTF-8 bytes, each state's name and bytes, a few for lengths) */
function entryBytes(kb: Uint8Array, values: Values): number {
  return kb.length + 3 + Math.max(0, valuesBytes(values));
}

/** the states' part of entryBytes; -1 if there are none (a row that clears its key) */
function valuesBytes(values: Values): number {
  let n = 0;
  let any = false;
  for (const k in values) {
    any = true;
    n += k.length + values[k]!.length + 4;
  }
  return any ? n : -1;
}

/** Each key's last row, in the order keys first came (as row by row); rows already strictly ascending by key are that. */
export function lastWriteWins(rows: StateRow[]): StateRow[] {
  for (let i = 1; i < rows.length; i++) if (compareKeys(rows[i - 1]!.key, rows[i]!.key) >= 0) return [...new Map(rows.map((r) => [r.key, r])).values()];
  return rows;
}

/**
 * An item's entries with `rows` applied (an empty row clears its key), as a new list: the item's
 * own list is shared with the cache and stays as it is. Entries outside [lo, hi) (left behind by a
 * split whose parent rewrite never happened) go. `bytes`: ITEM_OVERHEAD + the entries' sizes.
 * `changed` is exact only with `compare` (else a row equal to its entry is taken as a change).
 * A row's values are kept as they are, not copied: nothing changes a row once made (the reads
 * hand out the cached values the same way).
 */
export function mergeRows(old: readonly Entry[], rows: readonly StateRow[], lo: string | undefined, hi: string | undefined, compare: boolean): { entries: Entry[]; bytes: number; changed: boolean } {
  let sorted = rows;
  for (let i = 1; i < rows.length; i++) {
    if (compareKeys(rows[i - 1]!.key, rows[i]!.key) < 0) continue;
    sorted = [...rows].sort((a, b) => compareKeys(a.key, b.key));
    break;
  }
  const start = lo === undefined ? 0 : lowerBound(old, lo);
  const end = hi === undefined ? old.length : lowerBound(old, hi);
  let changed = start > 0 || end < old.length;
  const out: Entry[] = [];
  let bytes = ITEM_OVERHEAD;
  let j = start;
  for (const r of sorted) {
    while (j < end && compareKeys(old[j]!.key, r.key) < 0) {
      out.push(old[j]!);
      bytes += old[j++]!.size;
    }
    const had = j < end && old[j]!.key === r.key ? old[j++]! : undefined;
    const vb = valuesBytes(r.values);
    if (vb < 0) {
      if (had) changed = true;
    } else if (compare && had && sameValues(had.values, r.values)) {
      out.push(had);
      bytes += had.size;
    } else {
      const kb = had ? had.kb : utf8.encode(r.key);
      const size = kb.length + 3 + vb;
      out.push({ key: r.key, kb, values: r.values, size });
      bytes += size;
      changed = true;
    }
  }
  for (; j < end; j++) {
    out.push(old[j]!);
    bytes += old[j]!.size;
  }
  return { entries: out, bytes, changed };
}
