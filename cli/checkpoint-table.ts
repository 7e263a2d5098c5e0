/** How the CLI prints checkpoints: one table, used by `sluice checkpoints`, `sluice status` and `sluice run`. */
import type { CheckpointRecord } from '../shared/coordinator/coordinator.js';

/** A byte count as the CLI prints it: bytes below 1 KiB, KiB above. */
export const kb = (n: number | undefined) => (n === undefined ? '' : n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`);

/** One line per checkpoint: id, status, start, duration, bytes and keys flushed, instances. */
export function formatCheckpoints(list: readonly CheckpointRecord[], retained: number): string {
  const completed = list.filter((c) => c.status === 'COMPLETED').map((c) => c.checkpointId);
  const kept = new Set(completed.slice(-retained));
  const rows = list.map((c) => ({
    id: c.checkpointId,
    status: c.status + (c.savepointId ? ` (savepoint ${c.savepointId})` : '') + (c.restoredFrom ? ` (restored from ${c.restoredFrom})` : ''),
    started: c.startedAt,
    duration: c.durationMs !== undefined ? `${c.durationMs} ms` : '',
    bytes: kb(c.bytes),
    keys: c.keys ?? '',
    instances: c.instances ? Object.keys(c.instances).length : c.acks,
    retained: kept.has(c.checkpointId) ? 'yes' : '',
  }));
  const cols = ['id', 'status', 'started', 'duration', 'bytes', 'keys', 'instances', 'retained'] as const;
  const width = Object.fromEntries(cols.map((k) => [k, Math.max(k.length, ...rows.map((r) => String(r[k]).length))]));
  const line = (r: Record<string, unknown>) => cols.map((k) => String(r[k]).padEnd(width[k]!)).join('  ').trimEnd();
  return [line(Object.fromEntries(cols.map((k) => [k, k]))), ...rows.map(line)].join('\n');
}
