import { describe, expect, it } from 'vitest';
import { collectSink, job } from '../shared/api/index.js';
import type { CheckpointRecord } from '../shared/coordinator/coordinator.js';
import { planJob } from '../shared/plan/planner.js';
import { instanceIdOf } from '../shared/runtime/stage-instance.js';
import { ProducedPositions } from './produced-positions.js';

function plan() {
  const j = job('covered');
  j.source<{ k: string }>({ name: 'in', shards: 1 })
    .keyBy((x) => x.k)
    .process({ processElement() {} })
    .sinkTo(collectSink('out'));
  return planJob(j);
}

/** A completed checkpoint whose source instances replay after the given positions. */
function checkpoint(after: Record<string, string>): CheckpointRecord {
  const instances = Object.fromEntries(
    Object.entries(after).map(([id, seq]) => [id, { replayPoint: { from: 'after' as const, sequenceNumber: seq }, delta: undefined }]),
  );
  return { checkpointId: 3, status: 'COMPLETED', startedAt: new Date(0).toISOString(), instances } as unknown as CheckpointRecord;
}

describe('ProducedPositions: does a checkpoint cover what was produced', () => {
  const p = plan();
  const source = p.stages[0]!;
  const parent = instanceIdOf(source.id, 'shardId-000000000000');
  const child = instanceIdOf(source.id, 'shardId-000000000001');

  it('covers a shard it names only past its last record', () => {
    const produced = new ProducedPositions(p);
    produced.note(source.input.kind === 'source' ? source.input.sourceId : '', { shardId: 'shardId-000000000000', sequenceNumber: '200' });
    const covers = produced.coverageOfNow()(new Set([parent]));
    expect(covers(checkpoint({ [parent]: '100' }))).toBe(false);
    expect(covers(checkpoint({ [parent]: '200' }))).toBe(true);
  });

  it('a shard split off after the checkpoint was allocated (open, not named) is not covered; a shard closed before it is', () => {
    const produced = new ProducedPositions(p);
    const sourceId = source.input.kind === 'source' ? source.input.sourceId : '';
    produced.note(sourceId, { shardId: 'shardId-000000000000', sequenceNumber: '200' });
    produced.note(sourceId, { shardId: 'shardId-000000000001', sequenceNumber: '300' });
    const judge = produced.coverageOfNow();
    // the checkpoint names only the parent: the child's records (put after the split) are not in it
    expect(judge(new Set([parent, child]))(checkpoint({ [parent]: '200' }))).toBe(false);
    // a later checkpoint names the child, past its last record; the parent, closed, is not named
    expect(judge(new Set([child]))(checkpoint({ [child]: '300' }))).toBe(true);
  });
});
