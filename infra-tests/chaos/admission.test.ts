/** `--concurrency auto`: each part of the admission rule, and the figures it reports. */
import { describe, expect, it } from 'vitest';
import { Admission, cpuTimesOf, MAX_WAIT_SHARE, nicedCpuIsIdle, RAMP_MS, schedstatOf, SEED_CORES } from './admission.js';

/**
 * A 2-core machine sampled once a second: the test sets the idle share of the CPUs and the share of
 * their time the stack's threads wait on the run queue.
 */
function machine(concurrency: 'auto' | number, seeds = 10) {
  let t = 0;
  const c = { idle: 0, total: 0, run: 0, wait: 0 };
  let idleShare = 1;
  let waitShare = 0;
  const a = new Admission(concurrency, seeds, 2, { sampler: () => ({ ...c }), now: () => t, manual: true });
  const pass = (ms: number) => {
    for (let i = 0; i < ms / 1_000; i++) {
      t += 1_000;
      c.total += 200; // 2 cores × 100 jiffies a second
      c.idle += 200 * idleShare;
      c.run += 1e9 * (1 - waitShare);
      c.wait += 1e9 * waitShare;
      a.sample();
    }
  };
  a.sample();
  return { a, pass, setIdle: (share: number) => (idleShare = share), setWait: (share: number) => (waitShare = share) };
}

/** Auto with one seed running and started up `RAMP_MS` ago, on an idle machine. */
function oneSeedUp() {
  const m = machine('auto');
  m.a.started(1).ready();
  m.pass(RAMP_MS);
  return m;
}

describe('Admission', () => {
  it('one seed starts at a time: the first whatever the CPU, none while a seed is still starting up however idle the machine', () => {
    const m = machine('auto');
    m.setIdle(0);
    m.setWait(1);
    m.pass(10_000);
    expect(m.a.admits(0), 'the first seed starts however busy the machine').toBe(true);
    const slot = m.a.started(1);
    m.setIdle(1);
    m.setWait(0);
    m.pass(3 * RAMP_MS);
    expect(m.a.decide(1)).toBe('starting');
    slot.ready();
    m.pass(RAMP_MS);
    expect(m.a.admits(1)).toBe(true);
  });

  it('the ramp counts from the end of the last start-up, not from its request', () => {
    const m = machine('auto');
    const slot = m.a.started(1);
    m.pass(RAMP_MS + 2_000); // a slow start-up, longer than the ramp
    slot.ready();
    m.pass(RAMP_MS - 1_000);
    expect(m.a.decide(1)).toBe('ramp');
    m.pass(1_000);
    expect(m.a.admits(1)).toBe(true);
  });

  it(`the second seed: only while the stack's threads wait ≤ ${MAX_WAIT_SHARE * 100} % of their time for a CPU (however little CPU is idle)`, () => {
    const m = oneSeedUp();
    m.setIdle(0); // with autogroup, another session's work fills the CPUs and the run still gets its share
    m.setWait(0.4);
    m.pass(5_000);
    expect(m.a.decide(1)).toBe('admit');
    m.setWait(0.6);
    m.pass(5_000);
    expect(m.a.decide(1)).toBe('waiting');
  });

  it(`a third and fourth seed: only while ≥ ${SEED_CORES} core is idle (a low wait share is not enough)`, () => {
    const m = oneSeedUp();
    m.a.started(2).ready();
    m.pass(RAMP_MS);
    m.setWait(0);
    m.setIdle((SEED_CORES * 0.9) / 2);
    m.pass(5_000);
    expect(m.a.decide(2)).toBe('busy');
    m.setIdle((SEED_CORES * 1.1) / 2);
    m.pass(5_000);
    expect(m.a.window()!.idleCores).toBeCloseTo(SEED_CORES * 1.1);
    expect(m.a.decide(2)).toBe('admit');
  });

  it('auto: at most two seeds per core, and never more than there are seeds', () => {
    const m = oneSeedUp();
    expect(m.a.limit).toBe(4);
    expect(m.a.admits(3)).toBe(true);
    expect(m.a.admits(4)).toBe(false);
    expect(machine('auto', 2).a.limit).toBe(2);
  });

  it('a fixed number starts that many at once whatever the CPU', () => {
    const m = machine(3);
    m.setIdle(0);
    m.setWait(1);
    m.pass(10_000);
    m.a.started(1);
    expect([0, 1, 2, 3].map((n) => m.a.admits(n))).toEqual([true, true, true, false]);
  });

  it('counts the checks the CPU rule decided and those that admitted nothing (not the ramp or a start-up)', () => {
    const m = machine('auto');
    const slot = m.a.started(1);
    m.a.decide(1); // starting
    slot.ready();
    m.a.decide(1); // ramp
    m.pass(RAMP_MS);
    m.setWait(0.9);
    m.pass(5_000);
    m.a.decide(1);
    m.a.decide(1);
    m.setWait(0);
    m.pass(5_000);
    m.a.decide(1);
    expect({ checks: m.a.checks, starved: m.a.starved, peak: m.a.peak }).toEqual({ checks: 3, starved: 2, peak: 1 });
  });

  it('niced CPU counts as idle only for a run that is not niced itself and only with autogroup off', () => {
    expect(nicedCpuIsIdle(0, false)).toBe(true);
    expect(nicedCpuIsIdle(0, true), 'autogroup on: niced work of another session is not behind the run').toBe(false);
    expect(nicedCpuIsIdle(10, false), 'a niced run').toBe(false);
    // user nice system idle iowait irq softirq steal guest guest_nice
    const line = 'cpu  100 300 50 500 50 0 0 0 0 0';
    expect(cpuTimesOf(line, false)).toEqual({ idle: 550, total: 1000 });
    expect(cpuTimesOf(line, true)).toEqual({ idle: 850, total: 1000 });
  });

  it('reads run and wait time from a schedstat line', () => {
    expect(schedstatOf('414017797 4564318031 314\n')).toEqual({ run: 414017797, wait: 4564318031 });
  });

  it('the admission line names only the rules the limit leaves in play', () => {
    expect(machine('auto', 1).a.describe()).not.toMatch(/2nd|3rd/);
    expect(machine('auto', 2).a.describe()).toMatch(/2nd seed while/);
    expect(machine('auto', 2).a.describe()).not.toMatch(/3rd/);
    expect(machine('auto', 3).a.describe()).toMatch(/a 3rd while/);
    expect(machine('auto', 10).a.describe()).toMatch(/a 3rd–4th while ≥ 0.6 core idle/);
    expect(machine(3).a.describe()).toBe('fixed: 3 seeds at once');
  });
});
