import { describe, expect, it } from 'vitest';
import clickstream from '../../examples/clickstream/job.js';
import { collectSink, dynamoUpsertSink, job, kinesisSink, listState, mapState, operatorListState, valueState, type Job, type JobOptions, type StateDescriptor } from '../api/index.js';
import type { SinkDefinition } from '../api/graph.js';
import { PlanError, UsageError } from '../util/errors.js';
import { planJob, stageById } from './planner.js';
import { resourceNames } from './resources.js';

/** Plans a job that must fail; returns the PlanError. */
function planError(j: Job): PlanError {
  try {
    planJob(j);
  } catch (err) {
    expect(err).toBeInstanceOf(PlanError);
    expect((err as PlanError).code).toBe('PLAN_INVALID');
    expect((err as PlanError).message.startsWith(`${(err as PlanError).path}: `)).toBe(true);
    return err as PlanError;
  }
  throw new Error('planJob accepted an invalid job');
}

interface Ev {
  k: string;
  v: number;
}

/** A small valid job: source → keyBy → process → sink; `tweak` changes one thing. */
function smallJob(options: JobOptions = {}, name = 'small'): Job {
  const j = job(name, options);
  j.source<Ev>({ name: 'events', shards: 2 })
    .keyBy((e) => e.k)
    .process({ state: [valueState('n')], processElement() {} })
    .sinkTo(collectSink('out'));
  return j;
}

describe('planJob on the clickstream example', () => {
  const plan = planJob(clickstream);

  it('makes two stages: a chained source stage and a keyed stage', () => {
    expect(plan.stages.map((s) => s.id)).toEqual(['s0', 's1']);
    const [s0, s1] = plan.stages as [(typeof plan.stages)[0], (typeof plan.stages)[0]];
    expect(s0.operators.map((o) => o.kind)).toEqual(['source', 'filter', 'map', 'exchange']);
    expect(s0.operators.map((o) => o.name)).toEqual(['clicks', 'drop-health-checks', 'page-type', 'keyBy']);
    expect(s0.name).toBe('clicks → drop-health-checks → page-type → keyBy');
    expect(s0.input).toEqual({ kind: 'source', sourceId: s0.operators[0]!.id });
    expect(s0.parallelism).toBe(2);
    expect(s0.stateful).toBe(false);
    expect(s0.operators.at(-1)!.exchange).toEqual({ toStage: 's1', partitioning: 'key', input: 0 });

    expect(s1.operators.map((o) => o.kind)).toEqual(['process', 'sink']);
    expect(s1.input).toEqual({ kind: 'exchange', fromStages: ['s0'], keyed: true });
    expect(s1.parallelism).toBe(2);
    expect(s1.stateful).toBe(true);
    expect(s1.operators[0]!.keyed).toBe(true);
    expect(s1.operators[0]!.state).toEqual([{ name: 'count', kind: 'value', scope: 'keyed' }]);
  });

  it('links operators inside a stage only', () => {
    const [s0, s1] = plan.stages;
    expect(s0!.operators.map((o) => o.inputs.length)).toEqual([0, 1, 1, 1]);
    for (let i = 1; i < s0!.operators.length; i++) expect(s0!.operators[i]!.inputs).toEqual([s0!.operators[i - 1]!.id]);
    expect(s1!.operators[0]!.inputs).toEqual([]); // the stage's entry: fed by the exchange
    expect(s1!.operators[1]!.inputs).toEqual([s1!.operators[0]!.id]);
  });

  it('carries job settings, sources and sinks', () => {
    expect(plan.formatVersion).toBe(1);
    expect(plan.job).toBe('clickstream');
    expect(plan.maxParallelism).toBe(64);
    expect(plan.mode).toBe('exactly-once');
    expect(plan.poisonPolicy).toBe('dead-letter');
    expect(plan.checkpoint).toEqual({ intervalMs: 2000, timeoutMs: 30_000, minPauseMs: 0, retained: 3, continueAsNewAfter: 500 });
    expect(plan.sources).toEqual([expect.objectContaining({ kind: 'kinesis', name: 'clicks', shards: 2, format: 'json', deaggregate: true })]);
    expect(plan.sinks).toEqual([expect.objectContaining({ kind: 'dynamodb-upsert', name: 'clicks-per-user-page', keyAttribute: 'pk' })]);
    expect(plan.sinks[0]!.guarantee).toMatch(/exactly-once/);
  });

  it('is plain data with a stable hash', () => {
    expect(JSON.parse(JSON.stringify(plan))).toEqual(plan);
    expect(plan.hash).toMatch(/^[0-9a-f]{16}$/);
    expect(planJob(clickstream).hash).toBe(plan.hash);
    expect(planJob(smallJob()).hash).not.toBe(plan.hash);
  });

  it('plans the job under other options when given them (a local run that replaces some), checked alike', () => {
    const other = planJob(clickstream, { ...clickstream.options, checkpoint: { ...clickstream.options.checkpoint, materializeEvery: 1 } });
    expect(other.checkpoint).toEqual({ ...plan.checkpoint, materializeEvery: 1 });
    expect(other.stages).toEqual(plan.stages);
    expect(other.hash).not.toBe(plan.hash);
    // the job itself is left as it was
    expect(planJob(clickstream)).toEqual(plan);
    expect(() => planJob(clickstream, { checkpoint: { materializeEvery: 17 } })).toThrow(/job "clickstream" › options\.checkpoint\.materializeEvery/);
  });

  it('names resources from the plan', () => {
    const names = resourceNames(plan, 'dev');
    expect(names.streamOf(plan.stages[0]!)).toBe('dev-src-clicks');
    expect(names.streamOf(plan.stages[1]!)).toBe('dev-s1');
    expect(names.sinkTable(plan.sinks[0]!)).toBe('dev-sink-clicks-per-user-page');
    expect(stageById(plan, 's1')).toBe(plan.stages[1]);
    expect(() => stageById(plan, 's9')).toThrow(/has no stage "s9" \(stages: s0, s1\)/);
  });
});

describe('planJob rejects invalid jobs at plan time, naming the bad operator or field', () => {
  it('a job without a source', () => {
    expect(planError(job('empty')).message).toBe('job "empty": has no source');
  });

  it('a job without a sink', () => {
    const j = job('nosink');
    j.source({ name: 'in' }).map((x) => x);
    const e = planError(j);
    expect(e.path).toBe('job "nosink"');
    expect(e.message).toMatch(/has no sink/);
  });

  it('a dangling operator whose output goes nowhere', () => {
    const j = job('dangling');
    const s = j.source<Ev>({ name: 'in' });
    s.sinkTo(collectSink('all'));
    s.filter((e) => e.v > 0, { name: 'positive' });
    const e = planError(j);
    expect(e.path).toBe('job "dangling" › op2-filter (filter "positive")');
    expect(e.message).toMatch(/output goes nowhere/);
  });

  it('a keyBy nobody consumes', () => {
    const j = job('lonelykey');
    const s = j.source<Ev>({ name: 'in' });
    s.sinkTo(collectSink('all'));
    s.keyBy((e) => e.k);
    const e = planError(j);
    expect(e.path).toBe('job "lonelykey" › op2-keyBy (exchange "keyBy")');
    expect(e.message).toMatch(/has no consumer/);
  });

  it('a bad parallelism', () => {
    for (const p of [0, -1, 1.5, 129]) {
      const j = job('par');
      j.source<Ev>({ name: 'in' })
        .keyBy((e) => e.k, { parallelism: p })
        .process({ processElement() {} })
        .sinkTo(collectSink('out'));
      const e = planError(j);
      expect(e.path).toBe('job "par" › op1-keyBy (exchange "keyBy") › parallelism');
      expect(e.message).toContain(`got ${p}`);
      expect(e.message).toContain('maxParallelism=128');
    }
  });

  it('a bad source shard count', () => {
    for (const shards of [0, 2.5, 200]) {
      const j = job('shards');
      j.source({ name: 'in', shards }).sinkTo(collectSink('out'));
      expect(planError(j).path).toBe('job "shards" › op0-source (source "in") › shards');
    }
  });

  it('a bad maxParallelism', () => {
    for (const mp of [0, -3, 1.5, 32_769]) {
      const e = planError(smallJob({ maxParallelism: mp }));
      expect(e.path).toBe('job "small" › options.maxParallelism');
    }
    // a shard count above maxParallelism
    const j = job('mp', { maxParallelism: 4 });
    j.source({ name: 'in', shards: 5 }).sinkTo(collectSink('out'));
    expect(planError(j).message).toMatch(/shards: must be an integer in \[1, 4\], got 5/);
  });

  /** Builds a job with `build`, which must fail: the UsageError, naming the operator and the field. */
  function buildError(build: () => void): UsageError {
    try {
      build();
    } catch (err) {
      expect(err).toBeInstanceOf(UsageError);
      expect((err as UsageError).code).toBe('USAGE_INVALID');
      return err as UsageError;
    }
    throw new Error('the builder accepted an invalid declaration');
  }
  const keyed = (name: string, state: readonly StateDescriptor<unknown>[]) => () =>
    job('states')
      .source<Ev>({ name: 'in' })
      .keyBy((e) => e.k)
      .process({ state, processElement() {} }, { name });

  it('state names refused when the operator is declared: duplicate, empty, not UTF-8, reserved, too long', () => {
    const dup = buildError(keyed('sum', [valueState('total'), valueState('n'), listState('total')]));
    expect([dup.operator, dup.field]).toEqual(['process "sum"', 'state[2].name']);
    expect(dup.message).toMatch(/"total" is declared twice \(also state\[0\]\)/);
    for (const [bad, why] of [
      ['', /must not be empty/],
      ['a\uD800', /surrogate/],
      ['\u0000spilled', /control characters/],
      ['__proto__', /__proto__/],
      ['x'.repeat(256), /at most 255/],
    ] as const) {
      const e = buildError(keyed('p', [valueState('ok'), valueState(bad)]));
      expect([e.operator, e.field]).toEqual(['process "p"', 'state[1].name']);
      expect(e.message).toMatch(why);
    }
    // co-process, broadcast and operator state are checked alike
    const co = buildError(() => {
      const j = job('co');
      const a = j.source<Ev>({ name: 'a' }).keyBy((e) => e.k);
      a.connect(j.source<Ev>({ name: 'b' }).keyBy((e) => e.k)).process({ state: [mapState(''), valueState('x')], processElement1() {}, processElement2() {} }, { name: 'both' });
    });
    expect([co.operator, co.field]).toEqual(['co-process "both"', 'state[0].name']);
    const op = buildError(() => job('ops').source<Ev>({ name: 'in' }).process({ state: [operatorListState('a'), operatorListState('a')], processElement() {} }));
    expect(op.field).toBe('state[1].name');
    expect(buildError(() => job('b').source<Ev>({ name: 'in' }).broadcast(mapState('\uDC00'))).field).toBe('state[0].name');
  });

  it('a state descriptor without a kind or a serializer is refused when declared', () => {
    const noSerializer = { name: 'n', kind: 'value', serializer: { id: 'x' } } as unknown as StateDescriptor<unknown>;
    expect(buildError(keyed('p', [noSerializer])).field).toBe('state[0].serializer');
    const noKind = { ...valueState('n'), kind: 'counter' } as unknown as StateDescriptor<unknown>;
    expect(buildError(keyed('p', [noKind])).field).toBe('state[0].kind');
  });

  it('the planner still refuses duplicate or empty state names of a graph built by hand', () => {
    const j = smallJob({}, 'hand');
    const node = j.nodes.find((n) => n.kind === 'process')!;
    (node as { state: readonly StateDescriptor<unknown>[] }).state = [valueState('total'), valueState('total')];
    expect(planError(j).message).toMatch(/state\.total: declared twice/);
  });

  it("an upsert sink's key attribute and table name are refused when the sink is declared", () => {
    const sink = (o: Partial<{ keyAttribute: string; tableName: string }>) => () => dynamoUpsertSink<Ev>({ name: 'rows', key: (e) => e.k, ...o });
    for (const [o, field, why] of [
      [{ keyAttribute: '' }, 'keyAttribute', /non-empty/],
      [{ keyAttribute: 'k'.repeat(256) }, 'keyAttribute', /255 bytes/],
      [{ keyAttribute: 'a\uD800' }, 'keyAttribute', /surrogate/],
      [{ keyAttribute: '_sluice_epoch' }, 'keyAttribute', /engine's own/],
      [{ tableName: 'ab' }, 'tableName', /3 to 255/],
      [{ tableName: 'my table' }, 'tableName', /3 to 255/],
    ] as const) {
      const e = buildError(sink(o));
      expect([e.operator, e.field]).toEqual(['sink "rows"', field]);
      expect(e.message).toMatch(why);
    }
    expect(() => sink({ keyAttribute: 'id', tableName: 'existing-table_1.v2' })()).not.toThrow();
    // a definition made by hand is checked by sinkTo
    const handMade = { spec: { id: 'sink-h', kind: 'dynamodb-upsert', name: 'h', keyAttribute: '', guarantee: '' }, key: (e: Ev) => e.k } as SinkDefinition<Ev>;
    const e = buildError(() => job('h').source<Ev>({ name: 'in' }).sinkTo(handMade));
    expect([e.operator, e.field]).toEqual(['sink "h"', 'keyAttribute']);
  });

  it("an existing Kinesis stream's name is refused when the source or sink naming it is declared", () => {
    const bad = ['', 'a'.repeat(129), 'my stream', 'arn:aws:kinesis:us-east-1:123456789012:stream/orders', 'orders/v2'];
    for (const name of bad) {
      const s = buildError(() => kinesisSink<Ev>({ name: 'out', streamName: name }));
      expect([s.operator, s.field]).toEqual(['sink "out"', 'streamName']);
      expect(s.message).toMatch(/1 to 128 characters.*not its ARN/);
      const src = buildError(() => job('j').source<Ev>({ name: 'in', streamName: name }));
      expect([src.operator, src.field]).toEqual(['source in', 'streamName']);
    }
    for (const name of ['orders', 'orders-v2.prod_1', 'a'.repeat(128)]) {
      expect(() => kinesisSink<Ev>({ name: 'out', streamName: name })).not.toThrow();
      expect(() => job('j').source<Ev>({ name: 'in', streamName: name })).not.toThrow();
    }
    // a definition made by hand is checked by sinkTo
    const handMade = { spec: { id: 'sink-h', kind: 'kinesis', name: 'h', streamName: 'arn:x', guarantee: '', latency: '' } } as SinkDefinition<Ev>;
    const e = buildError(() => job('h').source<Ev>({ name: 'in' }).sinkTo(handMade));
    expect([e.operator, e.field]).toEqual(['sink "h"', 'streamName']);
  });

  it('duplicate sink names', () => {
    const j = job('dupsink');
    const s = j.source<Ev>({ name: 'in' });
    s.sinkTo(collectSink('out'));
    s.map((e) => e).sinkTo(collectSink('out'));
    const e = planError(j);
    expect(e.path).toBe('job "dupsink" › op3-sink (sink "out") › name');
    expect(e.message).toMatch(/another sink is already named "out"/);
  });

  it('duplicate source names', () => {
    const j = job('dupsrc');
    j.source({ name: 'in' }).sinkTo(collectSink('a'));
    j.source({ name: 'IN' }).sinkTo(collectSink('b'));
    expect(planError(j).path).toBe('job "dupsrc" › op2-source (source "IN") › name');
  });

  it('an upsert sink without a key function', () => {
    const j = job('nokey');
    const bad = { ...dynamoUpsertSink<Ev>({ name: 't', key: (e) => e.k }), key: undefined } as unknown as SinkDefinition<Ev>;
    j.source<Ev>({ name: 'in' }).sinkTo(bad);
    expect(planError(j).path).toBe('job "nokey" › op1-sink (sink "t") › key');
  });

  it('a keyed operator that does not follow keyBy', () => {
    const j = job('unkeyed');
    const src = j.source<Ev>({ name: 'in' });
    const proc = j.add({ id: 'op9-process', kind: 'process', name: 'p', inputs: [src.node], fn: { processElement() {} }, state: [] });
    j.add({ id: 'op10-sink', kind: 'sink', name: 'o', inputs: [proc], spec: collectSink('o').spec, sink: collectSink('o') });
    const e = planError(j);
    expect(e.path).toBe('job "unkeyed" › op9-process (process "p")');
    expect(e.message).toMatch(/must directly follow keyBy/);
  });

  it('a bad job name', () => {
    for (const name of ['1abc', 'has space', 'x'.repeat(41), '', 'é']) {
      const e = planError(smallJob({}, name));
      expect(e.path).toBe(`job "${name}" › name`);
    }
    expect(() => planJob(smallJob({}, 'A-ok_name-' + 'x'.repeat(30)))).not.toThrow();
  });

  it('a bad checkpoint option', () => {
    const cases: Array<[JobOptions, string]> = [
      [{ checkpoint: { intervalMs: 5 } }, 'options.checkpoint.intervalMs'],
      [{ checkpoint: { timeoutMs: 10.5 } }, 'options.checkpoint.timeoutMs'],
      [{ checkpoint: { minPauseMs: -1 } }, 'options.checkpoint.minPauseMs'],
      [{ checkpoint: { retained: 0 } }, 'options.checkpoint.retained'],
      [{ checkpoint: { retained: 101 } }, 'options.checkpoint.retained'],
      [{ checkpoint: { timeoutMs: 5000, minPauseMs: 5000 } }, 'options.checkpoint.timeoutMs'],
      [{ checkpoint: { intervalMs: 1000, bogus: 1 } as never }, 'options.checkpoint'],
      [{ checkpoint: { maxInFlightRecords: 0 } }, 'options.checkpoint.maxInFlightRecords'],
      [{ checkpoint: { maxInFlightRecords: 2.5 } }, 'options.checkpoint.maxInFlightRecords'],
      [{ checkpoint: { maxInFlightRecords: 100, maxConcurrent: 2 } }, 'options.checkpoint.maxInFlightRecords'],
      [{ mode: 'sometimes' as never }, 'options.mode'],
      [{ poisonPolicy: 'ignore' as never }, 'options.poisonPolicy'],
      [{ colour: 'red' } as never, 'options'],
    ];
    for (const [options, path] of cases) {
      const e = planError(smallJob(options));
      expect(e.path).toBe(`job "small" › ${path}`);
    }
    expect(planError(smallJob({ checkpoint: { timeoutMs: 5000, minPauseMs: 5000 } })).message).toMatch(/must exceed minPauseMs/);
    expect(planError(smallJob({ checkpoint: { maxInFlightRecords: 100, maxConcurrent: 2 } })).message).toMatch(/needs maxConcurrent 1/);
  });
});

describe('planJob on other shapes', () => {
  it('chains everything into one stage when there is no exchange', () => {
    const j = job('flat');
    j.source<Ev>({ name: 'in', shards: 3 })
      .map((e) => e.v)
      .sinkTo(collectSink('out'));
    const plan = planJob(j);
    expect(plan.stages).toHaveLength(1);
    expect(plan.stages[0]!.parallelism).toBe(3);
    expect(plan.stages[0]!.operators.map((o) => o.kind)).toEqual(['source', 'map', 'sink']);
  });

  it('fans out inside a stage and makes one stage per exchange', () => {
    const j = job('fan', { maxParallelism: 16 });
    const s = j.source<Ev>({ name: 'in', shards: 2 });
    s.filter((e) => e.v < 0).sinkTo(collectSink('negative'));
    const counted = s
      .keyBy((e) => e.k, { parallelism: 4 })
      .reduce((a, b) => ({ k: a.k, v: a.v + b.v }));
    counted.sinkTo(collectSink('sums'));
    counted.rebalance({ parallelism: 3 }).map((e) => e).sinkTo(collectSink('rebalanced'));
    const plan = planJob(j);
    expect(plan.stages.map((st) => [st.id, st.parallelism, st.input.kind])).toEqual([
      ['s0', 2, 'source'],
      ['s1', 4, 'exchange'],
      ['s2', 3, 'exchange'],
    ]);
    expect(plan.stages[1]!.operators.map((o) => o.kind)).toEqual(['reduce', 'sink', 'exchange']);
    expect(plan.stages[1]!.operators[0]!.state).toEqual([{ name: 'reduce', kind: 'value', scope: 'keyed' }]);
    expect(plan.stages[2]!.input).toEqual({ kind: 'exchange', fromStages: ['s1'], keyed: false });
    expect(plan.stages[1]!.operators[2]!.exchange).toEqual({ toStage: 's2', partitioning: 'rebalance', input: 0 });
    expect(plan.sinks.map((x) => x.name)).toEqual(['negative', 'sums', 'rebalanced']);
  });
});
