import { describe, expect, it } from 'vitest';
import clickstream from '../../examples/clickstream/job.js';
import { MemoryJobRunner } from '../testing/memory-job-runner.js';
import { materializeEvery } from '../runtime/changelog.js';
import { QueryableState } from './queryable-state.js';

const t = Date.UTC(2026, 0, 1);

/** clickstream on the twins, fed `n` clicks of ann on /cart 5 ms apart, then `more` */
function clicksOf(n: number, ...more: Array<{ userId: string; url: string; ts: number }>): MemoryJobRunner {
  const r = new MemoryJobRunner(clickstream, { seed: 4 });
  r.produce('clicks', [...Array.from({ length: n }, (_, i) => ({ userId: 'ann', url: '/cart', ts: t + 5 * i })), ...more]);
  return r;
}

describe('queryable state', () => {
  it('reads the value the last application of rows to the table wrote for a key, by operator and state name', async () => {
    const r = clicksOf(2, { userId: 'bob', url: '/', ts: t + 9 });
    await r.drain();
    const q = new QueryableState(clickstream, r.mem.ports.state);
    // the rows reach the table every materializeEvery-th checkpoint (runtime/changelog.ts)
    expect(await q.get('count-clicks', 'count', 'ann|cart')).toBeUndefined();
    for (let i = 1; i < materializeEvery(q.plan.checkpoint); i++) await r.checkpoint();
    expect(await q.get('count-clicks', 'count', 'ann|cart')).toEqual({ clicks: 2, lastClickTs: t + 5 });
    expect(await q.get('count-clicks', 'count', 'nobody|home')).toBeUndefined();
    await expect(q.get('count-click', 'count', 'x')).rejects.toThrow(/no keyed operator "count-click".*count-clicks/);
    await expect(q.get('count-clicks', 'counts', 'x')).rejects.toThrow(/no state "counts".*it has: count/);
  });

  it('sees the final state of a bounded input at once: an instance that finished applies every row it kept pending', async () => {
    const r = clicksOf(2);
    r.endOfInput();
    await r.drain();
    const q = new QueryableState(clickstream, r.mem.ports.state);
    expect(materializeEvery(q.plan.checkpoint)).toBeGreaterThan(1);
    expect(await q.get('count-clicks', 'count', 'ann|cart')).toEqual({ clicks: 2, lastClickTs: t + 5 });
  });
});
