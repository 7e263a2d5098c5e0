import { describe, expect, it } from 'vitest';
import type { CheckpointRecord } from '../shared/coordinator/coordinator.js';
import { formatCheckpoints } from './lifecycle.js';

const ck = (id: number, status: CheckpointRecord['status'], extra: Partial<CheckpointRecord> = {}): CheckpointRecord => ({
  checkpointId: id,
  status,
  savepoint: false,
  expected: 4,
  acks: 4,
  topology: [2, 2],
  startedAt: `2026-11-29T10:00:0${id}.000Z`,
  ...extra,
});

describe('sluice checkpoints', () => {
  it('prints one aligned row per checkpoint with duration, bytes, keys, instances, and which are retained', () => {
    const inst = { replayPoint: { from: 'start' as const }, delta: { store: 'inline' as const, key: 'k' } };
    const text = formatCheckpoints(
      [
        ck(1, 'COMPLETED', { durationMs: 812, bytes: 2048, keys: 10, instances: { a: inst, b: inst } }),
        ck(2, 'ABORTED', { durationMs: 30000, acks: 3 }),
        ck(3, 'COMPLETED', { durationMs: 95, bytes: 300, keys: 0, savepoint: true, savepointId: 'sp1' }),
        ck(4, 'COMPLETED', { durationMs: 0, restoredFrom: 'sp1' }),
      ],
      2,
    );
    const lines = text.split('\n');
    expect(lines[0]).toMatch(/^id\s+status\s+started\s+duration\s+bytes\s+keys\s+instances\s+retained$/);
    expect(lines[1]).toMatch(/^1\s+COMPLETED\s+2026-11-29T10:00:01.000Z\s+812 ms\s+2.0 KiB\s+10\s+2$/);
    expect(lines[2]).toMatch(/^2\s+ABORTED\s+\S+\s+30000 ms\s+3$/);
    expect(lines[3]).toMatch(/^3\s+COMPLETED \(savepoint sp1\)\s+\S+\s+95 ms\s+300 B\s+0\s+4\s+yes$/);
    expect(lines[4]).toMatch(/^4\s+COMPLETED \(restored from sp1\)\s+\S+\s+0 ms\s+4\s+yes$/);
    // columns line up
    expect(new Set(lines.map((l) => l.indexOf(l.split(/\s{2,}/)[1]!))).size).toBe(1);
  });
});
