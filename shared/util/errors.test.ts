import { describe, expect, it } from 'vitest';
import { collectSink, EventTimeSessionWindows, job, operatorListState, OutputTag, valueState, type KeyedProcessFunction } from '../api/index.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { SluiceError, UsageError, type ErrorCode } from './errors.js';

describe('usage errors name the operator and the field', () => {
  const streams = () => {
    const j = job('j');
    const a = j.source<{ k: string }>({ name: 'a', shards: 1 }).keyBy((e) => e.k);
    const b = j.source<{ k: string }>({ name: 'b', shards: 1 }).keyBy((e) => e.k);
    return { a, b };
  };

  it('intervalJoin with bounds it cannot use', () => {
    const { a, b } = streams();
    const err = (() => {
      try {
        a.intervalJoin(b, { lowerMs: 10, upperMs: 5 });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(UsageError);
    expect(err).toMatchObject({ code: 'USAGE_INVALID', operator: 'intervalJoin', field: 'bounds' });
    expect((err as Error).message).toBe('intervalJoin: bounds must be integers with lowerMs <= upperMs, got lowerMs 10 and upperMs 5');
  });

  it('a window join over session windows, an OutputTag without id', () => {
    const j = job('j');
    const a = j.source<{ k: string }>({ name: 'a', shards: 1 });
    const b = j.source<{ k: string }>({ name: 'b', shards: 1 });
    expect(() => a.join(b).where((e) => e.k).equalTo((e) => e.k).window(EventTimeSessionWindows.withGap(1_000))).toThrow(
      expect.objectContaining({ code: 'USAGE_INVALID', operator: 'window join', field: 'window' }),
    );
    expect(() => new OutputTag('')).toThrow(expect.objectContaining({ code: 'USAGE_INVALID', operator: 'OutputTag', field: 'id' }));
  });

  it('state a function uses without declaring it: the dead letter names the operator and the state', async () => {
    const declared = valueState<number>('declared');
    const hidden = valueState<number>('hidden');
    const fn: KeyedProcessFunction<string, { k: string }, unknown> = {
      state: [declared],
      processElement(e, ctx, out) {
        ctx.getState(hidden).update(1);
        out.collect(e);
      },
    };
    const j = job('undeclared');
    j.source<{ k: string }>({ name: 'ev', shards: 1 }).keyBy((e) => e.k).process(fn, { name: 'count' }).sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    r.produce('ev', [{ k: 'a' }]);
    await r.drain();
    const [letter] = r.deadLetters();
    expect(letter?.reason).toMatch(/process "count" \(op\d+[^)]*\): UsageError: op\d+[^:]*: state "hidden" is not declared: list it in the function's `state`/);
  });

  it('operator state a function uses without declaring it: the dead letter names the operator and the field', async () => {
    const declared = operatorListState<number>('declared');
    const hidden = operatorListState<number>('hidden');
    const j = job('undeclared-operator-state');
    j.source<{ k: string }>({ name: 'ev', shards: 1 })
      .process<{ k: string }>(
        {
          state: [declared],
          processElement(e, ctx, out) {
            ctx.getOperatorListState(hidden).add(1);
            out.collect(e);
          },
        },
        { name: 'tally' },
      )
      .sinkTo(collectSink('out'));
    const r = new MemoryJobRunner(j);
    r.produce('ev', [{ k: 'a' }]);
    await r.drain();
    const [letter] = r.deadLetters();
    expect(letter?.reason).toMatch(/UsageError: op\d+[^:]*: state does not declare the operator state "hidden"/);
  });

  it('codes are a closed set the type checker holds callers to', () => {
    const code: ErrorCode = 'JOB_STOPPED';
    // @ts-expect-error a free string is not an error code
    const bad: ErrorCode = 'SOMETHING_ELSE';
    expect(new SluiceError('m', code).code).toBe('JOB_STOPPED');
    expect(bad).toBe('SOMETHING_ELSE');
  });
});
