/**
 * `--concurrency auto`: how many seeds run at once, decided while the run goes on from how much CPU
 * the stack gets rather than fixed up front.
 *
 * Why: a seed's wall time is mostly waiting for checkpoints (≈ 15 CPU-s over ≈ 25 s on an idle
 * 2-core machine), so one seed alone leaves most of two cores idle. But the stack has fixed timeouts
 * (checkpoint 8 s, invocation 10 s): seeds started into CPU the machine does not have stop
 * completing checkpoints (measured: 4 seeds at once at load 11–15 on 2 cores completed none). The
 * rule, part by part:
 *
 * - one seed starts at a time, and the first one runs alone: a seed's start-up (streams, tables,
 *   the workflow, the first polls; the first also warms the emulators) is its busiest phase;
 * - a seed's CPU shows only after its start-up: no decision until `RAMP_MS` after the END of the
 *   last start-up (not after its request, which on a busy machine is long before);
 * - a second seed only while the stack's main threads (this process, kinesis-mock, fauxqs) spent at
 *   most half of their time over the last window waiting on the run queue (/proc/<pid>/schedstat)
 *   rather than running: that is what other work on the machine takes from the run, whatever the
 *   idle CPU says (with autogroup, another session's busy processes leave no idle CPU, yet the run
 *   may still get its share);
 * - a third and fourth seed only while about a seed's worth of CPU is idle;
 * - CPU that niced processes use counts as idle only when the scheduler really hands it to the run:
 *   the run is not niced itself and autogroup is off (with autogroup on, a niced process of another
 *   session weighs as much as the run's whole session).
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, getPriority } from 'node:os';

/** CPU a running seed keeps busy, in cores (≈ 15 CPU-s per ≈ 25 s seed, measured on 2 cores). */
export const SEED_CORES = 0.6;
/** The second seed starts only while the stack's threads waited for a CPU at most this share of the time. */
export const MAX_WAIT_SHARE = 0.5;
/** A new seed's CPU shows after its start-up: no decision within this long of the end of the last one. */
export const RAMP_MS = 8_000;
/** The idle CPU and the wait share are judged over this window. */
export const WINDOW_MS = 4_000;

export type Concurrency = number | 'auto';

/** Seeds at once at most under `auto`: two per core (above that, waiting is no longer what limits). */
export function autoLimit(cores = availableParallelism()): number {
  return Math.max(1, 2 * cores);
}

export interface CpuSample {
  /** idle and total jiffies of all CPUs */
  readonly idle: number;
  readonly total: number;
  /** ns the stack's main threads ran, and waited on a run queue while runnable */
  readonly run: number;
  readonly wait: number;
}

/** Reads the machine's CPU times and the stack's schedstat; undefined off Linux. */
export type CpuSampler = () => CpuSample | undefined;

/**
 * Idle and total jiffies from /proc/stat's `cpu` line. `nicedIsIdle`: CPU that niced processes use
 * counts as idle too (see `nicedCpuIsIdle`).
 */
export function cpuTimesOf(statLine: string, nicedIsIdle: boolean): { idle: number; total: number } {
  const f = statLine.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest is inside user)
  const idle = (f[3] ?? 0) + (f[4] ?? 0) + (nicedIsIdle ? (f[1] ?? 0) : 0);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { idle, total };
}

/**
 * Whether niced processes' CPU is there for the run: only if the run is not niced itself and the
 * scheduler weighs processes, not sessions (autogroup off) — with autogroup on, a nice value orders
 * processes only within their own session.
 */
export function nicedCpuIsIdle(runPriority: number, autogroup: boolean): boolean {
  return runPriority <= 0 && !autogroup;
}

/** run and wait ns of a task from its /proc/<pid>/schedstat line (`run_ns wait_ns timeslices`). */
export function schedstatOf(line: string): { run: number; wait: number } {
  const [run, wait] = line.trim().split(/\s+/).map(Number);
  return { run: run ?? 0, wait: wait ?? 0 };
}

function autogroupOn(): boolean {
  try {
    return readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';
  } catch {
    return false;
  }
}

/** The machine's CPU times and the schedstat of the given processes' main threads (gone ones count 0). */
export function procSampler(pids: () => ReadonlyArray<number | undefined>): CpuSampler {
  const nicedIsIdle = nicedCpuIsIdle(getPriority(), autogroupOn());
  return () => {
    try {
      const c = cpuTimesOf(readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!, nicedIsIdle);
      let run = 0;
      let wait = 0;
      for (const pid of pids()) {
        if (pid === undefined) continue;
        try {
          const s = schedstatOf(readFileSync(`/proc/${pid}/schedstat`, 'utf8'));
          run += s.run;
          wait += s.wait;
        } catch {
          // the process is gone
        }
      }
      return { ...c, run, wait };
    } catch {
      return undefined;
    }
  };
}

/** Why a check did not admit a seed, or that it did. */
export type Decision = 'admit' | 'limit' | 'starting' | 'ramp' | 'unknown' | 'waiting' | 'busy';

/**
 * Decides when another seed may start. `fixed` admits up to n at once; `auto` follows the rule
 * above. The harness calls `started()` when it starts a seed and `ready()` on the slot it returns
 * once the seed's start-up is over (or the seed ended).
 */
export class Admission {
  /** when the last start-up ended */
  private lastReady = Number.NEGATIVE_INFINITY;
  private starting = 0;
  private samples: Array<{ t: number } & CpuSample> = [];
  private timer: NodeJS.Timeout | undefined;
  readonly limit: number;
  /** checks the CPU rule decided (seeds waiting, below the limit, no start-up or ramp in the way) */
  checks = 0;
  /** of them, the ones that admitted nothing */
  starved = 0;
  /** most seeds running at once */
  peak = 0;

  constructor(
    private readonly concurrency: Concurrency,
    seeds: number,
    private readonly cores = availableParallelism(),
    /** the CPU sampler and clock (tests pass their own; then `sample()` is theirs to call) */
    private readonly clock: { sampler: CpuSampler; now: () => number; manual?: boolean } = { sampler: () => undefined, now: Date.now },
  ) {
    this.limit = Math.max(1, Math.min(concurrency === 'auto' ? autoLimit(cores) : concurrency, seeds));
    if (concurrency === 'auto' && !clock.manual) {
      this.sample();
      this.timer = setInterval(() => this.sample(), 1_000);
      this.timer.unref();
    }
  }

  /** The rule in effect, in words (the `admission:` line). */
  describe(): string {
    if (this.concurrency !== 'auto') return `fixed: ${this.limit} seeds at once`;
    const niced = this.clock.manual ? '' : `; niced CPU ${nicedCpuIsIdle(getPriority(), autogroupOn()) ? 'counts as idle' : 'does not count as idle (run niced or autogroup on)'}`;
    const second = this.limit >= 2 ? `; a 2nd seed while the stack's threads waited ≤ ${MAX_WAIT_SHARE * 100} % of their time for a CPU` : '';
    const more = this.limit >= 3 ? `; a 3rd${this.limit > 3 ? `–${this.limit}th` : ''} while ≥ ${SEED_CORES} core idle (over ${WINDOW_MS / 1000} s)` : '';
    return `auto: one seed starts at a time, the first alone; each decision ${RAMP_MS / 1000} s after the last start-up ended${second}${more}${niced}`;
  }

  /** Over the last window: idle cores and the stack's wait share (undefined: not known yet, or not on Linux). */
  window(): { idleCores: number; waitShare: number | undefined } | undefined {
    const now = this.samples.at(-1);
    const then = this.samples.find((s) => now !== undefined && now.t - s.t <= WINDOW_MS);
    if (!now || !then || now === then || now.total === then.total) return undefined;
    const ran = now.run - then.run;
    const waited = now.wait - then.wait;
    return {
      idleCores: ((now.idle - then.idle) / (now.total - then.total)) * this.cores,
      waitShare: ran + waited > 0 ? waited / (ran + waited) : undefined,
    };
  }

  /** Whether another seed may start now, with `running` seeds running, and why not. */
  decide(running: number): Decision {
    if (running >= this.limit) return 'limit';
    if (this.concurrency !== 'auto') return 'admit';
    if (this.starting > 0) return 'starting';
    if (running === 0) return 'admit';
    if (this.now() - this.lastReady < RAMP_MS) return 'ramp';
    this.checks++;
    const w = this.window();
    const d: Decision =
      w === undefined || (running === 1 && w.waitShare === undefined)
        ? 'unknown'
        : running === 1
          ? w.waitShare! <= MAX_WAIT_SHARE
            ? 'admit'
            : 'waiting'
          : w.idleCores >= SEED_CORES
            ? 'admit'
            : 'busy';
    if (d !== 'admit') this.starved++;
    return d;
  }

  admits(running: number): boolean {
    return this.decide(running) === 'admit';
  }

  /** A seed starts (`running` seeds run with it); call `ready()` on the result once its start-up is over. */
  started(running = 0): { ready(): void } {
    this.starting++;
    this.peak = Math.max(this.peak, running);
    let done = false;
    return {
      ready: () => {
        if (done) return;
        done = true;
        this.starting--;
        this.lastReady = this.now();
      },
    };
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Reads the CPU times (every second under `auto`). */
  sample(): void {
    const c = this.clock.sampler();
    if (!c) return;
    const t = this.now();
    this.samples.push({ t, ...c });
    this.samples = this.samples.filter((s) => t - s.t <= WINDOW_MS + 1_000);
  }

  private now(): number {
    return this.clock.now();
  }
}
