/**
 * A record whose function throws under the dead-letter policy is applied whole or not at all: what
 * it did before the throw — state writes, outputs (next stage, side outputs, sinks), timers added
 * or deleted, window contents — is undone, and only the dead letter remains. Each test has a record
 * throw after one kind of effect and checks the effect is gone (record undo).
 */
import { describe, expect, it } from 'vitest';
import {
  collectSink,
  dynamoUpsertSink,
  EventTimeSessionWindows,
  job,
  mapState,
  operatorListState,
  OutputTag,
  TumblingEventTimeWindows,
  WatermarkStrategies,
  listState,
  type ListState,
  type TimerService,
  type ValueState,
  type ValueStateDescriptor,
} from '../api/index.js';
import { jsonSerializer } from '../api/serializers.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

interface Ev {
  readonly key: string;
  readonly ts: number;
  readonly v: number;
  /** the function throws after its effects */
  readonly bad?: boolean;
}

const tally: ValueStateDescriptor<{ n: number; sum: number }> = { name: 'tally', kind: 'value', serializer: jsonSerializer() };
const count: ValueStateDescriptor<number> = { name: 'count', kind: 'value', serializer: jsonSerializer() };

const source = (name: string) => ({ name, shards: 1, timestamp: (e: Ev) => e.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) }) as const;

async function run(j: ReturnType<typeof job>, events: readonly Ev[]) {
  const r = new MemoryJobRunner(j, { batchSize: 4 });
  r.produce('ev', events);
  await r.drain();
  r.endOfInput();
  await r.drain();
  return r;
}

describe('a record whose function throws is undone whole (record undo)', () => {
  it('keyed state: writes before the throw are undone, also of an object changed in place (record undo: entry saved at first access)', async () => {
    const j = job('undo-state', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 2 })
      .process<string>({
        state: [tally, count],
        processElement(e, ctx, out) {
          const t = ctx.getState(tally).value() ?? { n: 0, sum: 0 };
          t.n++; // changed in place before the update: the undo must not keep this object
          t.sum += e.v;
          ctx.getState(tally).update(t);
          ctx.getState(count).update((ctx.getState(count).value() ?? 0) + 1);
          if (e.bad) throw new Error('bad record');
          out.collect(`${e.key}:${t.n}:${t.sum}:${ctx.getState(count).value()}`);
        },
      })
      .sinkTo(collectSink('out'));
    const r = await run(j, [
      { key: 'a', ts: 1, v: 1 },
      { key: 'a', ts: 2, v: 10, bad: true },
      { key: 'a', ts: 3, v: 100 },
      { key: 'b', ts: 4, v: 5, bad: true },
      { key: 'b', ts: 5, v: 7 },
    ]);
    expect(r.published<string>('out').sort()).toEqual(['a:1:1:1', 'a:2:101:2', 'b:1:7:1']);
    expect(r.deadLetters()).toHaveLength(2);
  });

  it('outputs: main output to the next stage, side output and sinks emitted before the throw are dropped (record undo: outputs held until the record succeeds)', async () => {
    const side = new OutputTag<string>('side');
    const j = job('undo-out', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    const p = j
      .source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 2 })
      .process<Ev>({
        processElement(e, ctx, out) {
          out.collect(e);
          ctx.output(side, `side:${e.key}:${e.ts}`);
          if (e.bad) throw new Error('bad record');
        },
      });
    // to the next stage (an exchange), then to a collect sink and an upsert sink
    const next = p.keyBy((e) => `${e.key}/${e.ts}`, { parallelism: 1 }).process<{ id: string; v: number }>({
      processElement(e, _ctx, out) {
        out.collect({ id: `${e.key}:${e.ts}`, v: e.v });
      },
    });
    next.sinkTo(collectSink('out'));
    next.sinkTo(dynamoUpsertSink({ name: 'table', key: (x) => x.id }));
    p.sideOutput(side).sinkTo(collectSink('side'));
    // a sink in the same stage as the failing function
    p.map((e) => `same:${e.key}:${e.ts}`).sinkTo(collectSink('same'));
    const r = await run(j, [
      { key: 'a', ts: 1, v: 1 },
      { key: 'a', ts: 2, v: 2, bad: true },
      { key: 'b', ts: 3, v: 3 },
    ]);
    expect(r.published<{ id: string }>('out').map((o) => o.id).sort()).toEqual(['a:1', 'b:3']);
    expect([...r.upserts('table').keys()].sort()).toEqual(['a:1', 'b:3']);
    expect(r.published<string>('side').sort()).toEqual(['side:a:1', 'side:b:3']);
    expect(r.published<string>('same').sort()).toEqual(['same:a:1', 'same:b:3']);
    expect(r.deadLetters()).toHaveLength(1);
  });

  it('operator list state: items added before the throw are gone (record undo: the list saved before its first change)', async () => {
    const seen = operatorListState<number>('seen');
    const j = job('undo-oplist', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<Ev>(source('ev'))
      .process<string>({
        state: [seen],
        processElement(e, ctx, out) {
          const list = ctx.getOperatorListState(seen);
          list.add(e.ts);
          if (e.bad) throw new Error('bad record');
          out.collect(`${e.ts}:${list.get().join(',')}`);
        },
      })
      .sinkTo(collectSink('out'));
    const r = await run(j, [
      { key: 'a', ts: 1, v: 1 },
      { key: 'a', ts: 2, v: 2, bad: true },
      { key: 'a', ts: 3, v: 3 },
    ]);
    expect(r.published<string>('out').sort()).toEqual(['1:1', '3:1,3']);
    expect(r.deadLetters()).toHaveLength(1);
  });

  it('broadcast state: a rule put before the throw is gone on every instance (record undo: the map saved before its first change)', async () => {
    interface Rule {
      readonly type: string;
      readonly limit: number;
      readonly bad?: boolean;
    }
    const limits = mapState<string, number>('limits');
    const j = job('undo-broadcast', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    const rules = j.source<Rule>({ name: 'rules', shards: 1 }).broadcast(limits as never);
    j.source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 2 })
      .connect(rules)
      .process<string>({
        processElement(e, ctx, out) {
          out.collect(`${e.key}:${ctx.getBroadcastState(limits).get('card') ?? 'none'}`);
        },
        processBroadcastElement(rule, ctx) {
          ctx.getBroadcastState(limits).put(rule.type, rule.limit);
          if (rule.bad) throw new Error('bad rule');
        },
      })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { batchSize: 4 });
    r.produce('rules', [{ type: 'card', limit: 100 }]);
    await r.drain();
    r.produce('rules', [{ type: 'card', limit: 5, bad: true }]);
    await r.drain();
    r.produce('ev', [
      { key: 'a', ts: 1, v: 1 },
      { key: 'b', ts: 2, v: 1 },
    ]);
    await r.drain();
    r.endOfInput();
    await r.drain();
    // both keyed instances still see the rule from before the failed one
    expect(r.published<string>('out').sort()).toEqual(['a:100', 'b:100']);
    // the rule reached both instances and threw on each: one dead letter per instance
    expect(r.deadLetters()).toHaveLength(2);
  });

  it('timers: a timer added before the throw never fires, one deleted before it still does (record undo: timer changes noted per record)', async () => {
    const j = job('undo-timers', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 1 })
      .process<string>({
        processElement(e, ctx) {
          // v > 0 adds a timer at v; v < 0 deletes the timer at -v
          if (e.v > 0) ctx.timerService.registerEventTimeTimer(e.v);
          else ctx.timerService.deleteEventTimeTimer(-e.v);
          if (e.bad) throw new Error('bad record');
        },
        onTimer(time, ctx, out) {
          out.collect(`${String(ctx.key)}@${time}`);
        },
      })
      .sinkTo(collectSink('fired'));
    const r = await run(j, [
      { key: 'a', ts: 1, v: 500 },
      { key: 'a', ts: 2, v: 600, bad: true }, // added, undone
      { key: 'a', ts: 3, v: -500, bad: true }, // deleted, undone
      { key: 'b', ts: 4, v: 700 },
      { key: 'b', ts: 5, v: -700 }, // deleted for good
    ]);
    expect(r.published<string>('fired').sort()).toEqual(['a@500']);
    expect(r.deadLetters()).toHaveLength(2);
  });

  it('timers: a timer added through a timer service kept from an earlier record is undone too (record undo: timer changes noted from the first change of a record)', async () => {
    const j = job('undo-kept-timers', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    let kept: TimerService | undefined;
    j.source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 1 })
      .process<string>({
        processElement(e, ctx) {
          // the first record keeps its service; the bad one adds through it, never asking its own context
          if (kept === undefined) kept = ctx.timerService;
          else if (e.bad) {
            kept.registerEventTimeTimer(e.v);
            throw new Error('bad record');
          }
        },
        onTimer(time, ctx, out) {
          out.collect(`${String(ctx.key)}@${time}`);
        },
      })
      .sinkTo(collectSink('fired'));
    const r = await run(j, [
      { key: 'a', ts: 1, v: 0 },
      { key: 'a', ts: 2, v: 600, bad: true }, // added through the kept service, undone
    ]);
    expect(r.published<string>('fired')).toEqual([]);
    expect(r.deadLetters()).toHaveLength(1);
  });

  it('window contents: a late-but-allowed record whose firing throws downstream leaves the window as it was (record undo: window list replaced, not changed in place)', async () => {
    const j = job('undo-window', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 1 })
      .window(TumblingEventTimeWindows.of(1_000), { allowedLatenessMs: 5_000 })
      .aggregate(
        { createAccumulator: () => 0, add: (e: Ev, acc: number) => acc + e.v, getResult: (a: number) => a, merge: (a: number, b: number) => a + b },
        { result: (key, w, sum) => ({ key: String(key), start: w.start, sum }) },
      )
      .map((x) => {
        // the late firing that includes the bad record's 1000 throws, in the same record's chain
        if (x.sum >= 1_000) throw new Error('bad result');
        return `${x.key}:${x.start}:${x.sum}`;
      })
      .sinkTo(collectSink('out'));
    const r = await run(j, [
      { key: 'a', ts: 100, v: 1 },
      { key: 'a', ts: 1_500, v: 0 }, // the watermark passes window [0, 1000): it fires with 1
      { key: 'a', ts: 200, v: 1_000 }, // late but allowed: fires again, throws
      { key: 'a', ts: 300, v: 2 }, // late but allowed: fires with 1 + 2, not 1003
    ]);
    // (a window may fire again with the same contents; what matters is which contents)
    expect([...new Set(r.published<string>('out').filter((o) => o.startsWith('a:0:')))]).toEqual(['a:0:1', 'a:0:3']);
    expect(r.deadLetters()).toHaveLength(1);
  });

  it('session windows: a merge that throws keeps the sessions and their timers (record undo: engine timer deletions noted too)', async () => {
    const j = job('undo-session', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 1 })
      .window(EventTimeSessionWindows.withGap(100))
      .aggregate(
        {
          createAccumulator: () => 0,
          add: (e: Ev, acc: number) => acc + e.v,
          getResult: (a: number) => a,
          merge: (a: number, b: number) => {
            if (b >= 1_000) throw new Error('cannot merge');
            return a + b;
          },
        },
        { result: (key, w, sum) => `${String(key)}:${w.start}:${sum}` },
      )
      .sinkTo(collectSink('out'));
    const r = await run(j, [
      { key: 'a', ts: 100, v: 1 },
      { key: 'a', ts: 150, v: 1_000 }, // merges with [100, 200): throws after removing its timer
      { key: 'a', ts: 500, v: 2 },
    ]);
    expect(r.published<string>('out').sort()).toEqual(['a:100:1', 'a:500:2']);
    expect(r.deadLetters()).toHaveLength(1);
  });
  // a, then b failing, then a and b again: a kept handle must act on each record's own key
  const keptHandleInput: Ev[] = [
    { key: 'a', ts: 1, v: 1 },
    { key: 'b', ts: 2, v: 1, bad: true },
    { key: 'a', ts: 3, v: 1 },
    { key: 'b', ts: 4, v: 1 },
  ];
  it('a value state handle kept from an earlier record acts on the current key, and its writes are undone with a record that throws (record undo: entry saved at each first access, not at getState)', async () => {
    let kept: ValueState<number> | undefined;
    const j = job('undo-kept-handle', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 1 })
      .process<string>({
        state: [count],
        processElement(e, ctx, out) {
          // a function may keep the handle it got first (as a Flink function keeps one from open())
          const s = (kept ??= ctx.getState(count));
          s.update((s.value() ?? 0) + 1);
          if (e.bad) throw new Error('bad record');
          out.collect(`${e.key}:${s.value()}`);
        },
      })
      .sinkTo(collectSink('out'));
    const r = await run(j, keptHandleInput);
    expect(r.published<string>('out').sort()).toEqual(['a:1', 'a:2', 'b:1']);
    expect(r.deadLetters()).toHaveLength(1);
  });
  it('a list state handle kept from an earlier record acts on the current key, and its writes are undone with a record that throws (record undo: every kind of handle per operator)', async () => {
    const seen = listState<number>('seen');
    let kept: ListState<number> | undefined;
    const j = job('undo-kept-list', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    j.source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 1 })
      .process<string>({
        state: [seen],
        processElement(e, ctx, out) {
          const s = (kept ??= ctx.getListState(seen));
          s.add(e.ts);
          if (e.bad) throw new Error('bad record');
          out.collect(`${e.key}:${s.get().join(',')}`);
        },
      })
      .sinkTo(collectSink('out'));
    const r = await run(j, keptHandleInput);
    expect(r.published<string>('out').sort()).toEqual(['a:1', 'a:1,3', 'b:4']);
    expect(r.deadLetters()).toHaveLength(1);
  });
  it('a keyed state handle kept and used for a broadcast record fails that record with a clear error and writes no state (a broadcast record has no key)', async () => {
    const limits = mapState<string, number>('limits');
    let kept: ValueState<number> | undefined;
    const j = job('kept-handle-broadcast', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
    const rules = j.source<{ type: string }>({ name: 'rules', shards: 1 }).broadcast(limits as never);
    j.source<Ev>(source('ev'))
      .keyBy((e) => e.key, { parallelism: 1 })
      .connect(rules)
      .process<string>({
        state: [count],
        processElement(e, ctx, out) {
          const s = (kept ??= ctx.getState(count));
          s.update((s.value() ?? 0) + 1);
          out.collect(`${e.key}:${s.value()}`);
        },
        processBroadcastElement() {
          kept?.update(99);
        },
      })
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j, { batchSize: 4 });
    r.produce('ev', [{ key: 'a', ts: 1, v: 1 }]);
    await r.drain();
    r.produce('rules', [{ type: 'card' }]);
    await r.drain();
    r.produce('ev', [{ key: 'a', ts: 2, v: 1 }]);
    await r.drain();
    r.endOfInput();
    await r.drain();
    expect(r.published<string>('out').sort()).toEqual(['a:1', 'a:2']);
    expect(r.deadLetters().map((d) => d.reason)).toEqual([expect.stringContaining('state "count" is keyed: it has no key')]);
  });
});
