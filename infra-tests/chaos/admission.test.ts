/** `--concurrency auto`: another seed starts only while a seed's worth of CPU is idle. */
import { describe, expect, it } from 'vitest';
import { Admission, cpuTimesOf, RAMP_MS, SEED_CORES } from './admission.js';

/** A 2-core machine whose idle share the test sets, sampled once a second. */
function machine(concurrency: 'auto' | number, seeds = 10) {
  let t = 0;
  let idle = 0;
  let total = 0;
  let idleShare = 1;
  const a = new Admission(concurrency, seeds, 2, { cpuTimes: () => ({ idle, total }), now: () => t });
  const pass = (ms: number) => {
    for (let i = 0; i < ms / 1_000; i++) {
      t += 1_000;
      total += 200; // 2 cores × 100 jiffies a second
      idle += 200 * idleShare;
      a.sample();
    }
  };
  a.sample();
  return { a, pass, setIdle: (share: number) => (idleShare = share) };
}

describe('Admission', () => {
  it('auto: two seeds at once; a third after the ramp only while a seed’s worth of CPU is idle', () => {
    const m = machine('auto');
    m.setIdle(0);
    m.pass(2_000);
    expect(m.a.admits(0)).toBe(true);
    m.a.started();
    expect(m.a.admits(1), 'two seeds run even on a busy machine').toBe(true);
    m.a.started();
    m.setIdle(0.9);
    m.pass(RAMP_MS - 1_000);
    expect(m.a.admits(2), 'within the ramp of the last start').toBe(false);
    m.pass(2_000);
    expect(m.a.idleCores()).toBeCloseTo(1.8);
    expect(m.a.admits(2)).toBe(true);
    // a busy machine: less than a seed's worth idle, so no more seeds
    m.setIdle((SEED_CORES * 0.9) / 2);
    m.pass(6_000);
    expect(m.a.admits(2)).toBe(false);
    expect(m.a.admits(1), 'two seeds always run').toBe(true);
  });

  it('auto: at most two seeds per core, and never more than there are seeds', () => {
    const m = machine('auto');
    m.pass(10_000);
    expect(m.a.limit).toBe(4);
    expect(m.a.admits(3)).toBe(true);
    expect(m.a.admits(4)).toBe(false);
    expect(machine('auto', 2).a.limit).toBe(2);
  });

  it('a fixed number starts that many at once whatever the CPU', () => {
    const m = machine(3);
    m.setIdle(0);
    m.pass(10_000);
    expect([0, 1, 2, 3].map((n) => m.a.admits(n))).toEqual([true, true, true, false]);
  });

  it('CPU that niced processes use is there for a run that is not niced itself, not for a niced one', () => {
    // user nice system idle iowait irq softirq steal guest guest_nice
    const line = 'cpu  100 300 50 500 50 0 0 0 0 0';
    expect(cpuTimesOf(line, false)).toEqual({ idle: 550, total: 1000 });
    expect(cpuTimesOf(line, true)).toEqual({ idle: 850, total: 1000 });
  });
});
