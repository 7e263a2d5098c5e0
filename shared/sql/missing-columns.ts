/**
 * Declared columns that no record holds: a column whose name matches no field of any JSON record
 * reads as NULL everywhere, so aggregates over it come out NULL without an error. Saying so early
 * catches a misspelt column or a file of another shape.
 */
import type { TableDef } from './catalog.js';

/** Columns of a JSON table that no record among `records` has a field for (matched as the source does: exactly, else case-insensitively). */
export function missingColumns(table: TableDef, records: Iterable<unknown>): string[] {
  if ((table.format ?? 'json') !== 'json') return [];
  const seen = new Set<string>();
  for (const r of records) {
    if (r && typeof r === 'object' && !Array.isArray(r)) for (const k of Object.keys(r)) seen.add(k.toLowerCase());
  }
  return table.columns.filter((c) => !seen.has(c.name.toLowerCase())).map((c) => c.name);
}
