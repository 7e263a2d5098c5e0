/**
 * Record undo as a property: random records each run a random list of effects (value, list and map
 * state, main and side outputs, timers added and deleted) and some throw at a random step — in the
 * keyed function or in an operator after it in the same chain. Whatever the batching, the job's
 * outputs equal those of a plain per-key model that applies only the records that do not throw
 * (written apart from the engine), and every throwing record is a dead letter.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collectSink, job, listState, mapState, OutputTag, WatermarkStrategies, type ValueStateDescriptor } from '../api/index.js';
import { jsonSerializer } from '../api/serializers.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';

/** effects: 0 count++, 1 list add, 2 main output, 3 side output, 4 add timer, 5 delete timer, 6 map put */
type Op = 0 | 1 | 2 | 3 | 4 | 5 | 6;

interface Rec {
  readonly id: number;
  readonly key: string;
  readonly ts: number;
  readonly ops: readonly Op[];
  readonly arg: number;
  /** the keyed function throws before this step (none when past the end) */
  readonly failAt: number;
  /** the operator after the keyed function throws on this record's main outputs */
  readonly failDownstream: boolean;
}

/** timers far past every record's time: they all fire at the end of the input */
const TIMER_BASE = 1_000_000_000;
const count: ValueStateDescriptor<number> = { name: 'count', kind: 'value', serializer: jsonSerializer() };
const ids = listState<number>('ids');
const last = mapState<string, number>('last');

const throws = (r: Rec) => r.failAt < r.ops.length || (r.failDownstream && r.ops.slice(0, r.failAt).includes(2));

/** The model: per key, in input order, only the records that do not throw. */
function oracle(records: readonly Rec[]) {
  const keys = new Map<string, { count: number; ids: number[]; last: Map<string, number>; timers: Set<number> }>();
  const main: string[] = [];
  const side: string[] = [];
  for (const r of records) {
    if (throws(r)) continue;
    let k = keys.get(r.key);
    if (!k) keys.set(r.key, (k = { count: 0, ids: [], last: new Map(), timers: new Set() }));
    for (const op of r.ops) {
      if (op === 0) k.count++;
      else if (op === 1) k.ids.push(r.id);
      else if (op === 2) main.push(`${r.key}:${r.id}:${k.count}:${k.ids.length}:${k.last.size}`);
      else if (op === 3) side.push(`${r.key}:${r.id}:${k.count}`);
      else if (op === 4) k.timers.add(TIMER_BASE + (r.arg % 4));
      else if (op === 5) k.timers.delete(TIMER_BASE + (r.arg % 4));
      else k.last.set(`m${r.arg % 3}`, r.id);
    }
  }
  const fired: string[] = [];
  for (const [key, k] of keys) for (const t of k.timers) fired.push(`${key}@${t}:${k.count}:${k.ids.join(',')}:${[...k.last].sort().join(',')}`);
  return { main: main.sort(), side: side.sort(), fired: fired.sort() };
}

function undoJob() {
  const sideTag = new OutputTag<string>('side');
  const j = job('undo-property', { maxParallelism: 8, poisonPolicy: 'dead-letter' });
  const p = j
    .source<Rec>({ name: 'in', shards: 1, timestamp: (r) => r.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(0) })
    .keyBy((r) => r.key, { parallelism: 2 })
    .process<{ text: string; fail: boolean }>({
      state: [count, ids, last],
      processElement(r, ctx, out) {
        const c = ctx.getState(count);
        for (let i = 0; i < r.ops.length; i++) {
          if (i === r.failAt) throw new Error(`record ${r.id} fails at step ${i}`);
          const op = r.ops[i]!;
          const list = ctx.getListState(ids);
          const map = ctx.getMapState(last);
          if (op === 0) c.update((c.value() ?? 0) + 1);
          else if (op === 1) list.add(r.id);
          else if (op === 2) out.collect({ text: `${r.key}:${r.id}:${c.value() ?? 0}:${list.get().length}:${map.keys().length}`, fail: r.failDownstream });
          else if (op === 3) ctx.output(sideTag, `${r.key}:${r.id}:${c.value() ?? 0}`);
          else if (op === 4) ctx.timerService.registerEventTimeTimer(TIMER_BASE + (r.arg % 4));
          else if (op === 5) ctx.timerService.deleteEventTimeTimer(TIMER_BASE + (r.arg % 4));
          else map.put(`m${r.arg % 3}`, r.id);
        }
      },
      onTimer(time, ctx, out) {
        const entries = ctx
          .getMapState(last)
          .entries()
          .map(([k, v]) => `${k},${v}`)
          .sort();
        out.collect({ text: `${String(ctx.key)}@${time}:${ctx.getState(count).value() ?? 0}:${ctx.getListState(ids).get().join(',')}:${entries.join(',')}`, fail: false });
      },
    });
  // in the same chain: throws after the keyed function did everything
  p.map((o) => {
    if (o.fail) throw new Error('downstream fails');
    return o.text;
  }).sinkTo(collectSink('main'));
  p.sideOutput(sideTag).sinkTo(collectSink('side'));
  return j;
}

const recordsArb = fc
  .array(
    fc.record({
      key: fc.constantFrom('a', 'b', 'c', 'd'),
      ops: fc.array(fc.constantFrom<Op>(0, 1, 2, 3, 4, 5, 6), { minLength: 1, maxLength: 6 }),
      arg: fc.nat(11),
      failAt: fc.oneof(fc.constant(99), fc.nat(6)),
      failDownstream: fc.boolean(),
    }),
    { minLength: 1, maxLength: 40 },
  )
  .map((rs) => rs.map((r, i): Rec => ({ ...r, id: i, ts: i + 1 })));

describe('record undo as a property', () => {
  it('outputs equal a model run without the throwing records, whatever throws where (record undo: outputs held, stores undone)', async () => {
    await fc.assert(
      fc.asyncProperty(recordsArb, fc.integer({ min: 1, max: 7 }), async (records, batchSize) => {
        const r = new MemoryJobRunner(undoJob(), { batchSize });
        r.produce('in', records);
        await r.drain();
        r.endOfInput();
        await r.drain();
        const want = oracle(records);
        const mainOut = r.published<string>('main');
        expect(mainOut.filter((o) => !o.includes('@')).sort()).toEqual(want.main);
        expect(mainOut.filter((o) => o.includes('@')).sort()).toEqual(want.fired);
        expect(r.published<string>('side').sort()).toEqual(want.side);
        expect(r.deadLetters()).toHaveLength(records.filter(throws).length);
      }),
      { numRuns: 40 },
    );
  });
});
