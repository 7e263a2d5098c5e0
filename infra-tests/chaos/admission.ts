/**
 * `--concurrency auto`: how many seeds run at once, decided from the machine's idle CPU while the
 * run goes on rather than fixed up front.
 *
 * Why: a seed's wall time is mostly waiting for checkpoints (≈ 15 CPU-s over ≈ 25 s on an idle
 * 2-core machine, a fault phase and a quiet phase bounded by conditions, not sleeps), so two seeds at
 * once leave about half of two cores idle. But the stack has fixed timeouts (checkpoint 8 s,
 * invocation 10 s): seeds started into a CPU the machine does not have stop completing checkpoints
 * (measured: 4 seeds at once with the load average at 12–14 on 2 cores completed none). Two seeds at
 * once stayed live at load 11–19 (three 10-seed runs and the CI seeds), and one at a time there
 * finished fewer seeds a minute (0.98 against 1.4–1.6). So two seeds start at once, and another only
 * while the machine has about a seed's worth of CPU idle, measured over the last seconds after the
 * previous start has ramped up: on a busy machine the run keeps two seeds, on an idle one it fills
 * the cores. CPU that niced processes use counts as idle unless the run is niced itself: the
 * scheduler hands it to the run's seeds first.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, getPriority } from 'node:os';

/** CPU a running seed keeps busy, in cores (≈ 15 CPU-s per ≈ 25 s seed, measured on 2 cores). */
export const SEED_CORES = 0.6;
/** Seeds `auto` always runs at once (measured live on a busy 2-core machine). */
export const AUTO_FLOOR = 2;
/** A new seed's CPU shows after its start phase: no decision within this long of the last start. */
export const RAMP_MS = 8_000;
/** The idle CPU is judged over this window. */
const WINDOW_MS = 4_000;

export type Concurrency = number | 'auto';

/** Seeds at once at most under `auto`: two per core (above that, waiting is no longer what limits). */
export function autoLimit(cores = availableParallelism()): number {
  return Math.max(1, 2 * cores);
}

export type CpuTimes = () => { idle: number; total: number } | undefined;

/**
 * Idle and total jiffies from /proc/stat's `cpu` line. `nicedIsIdle`: CPU that niced processes
 * use counts as idle too — for a run that is not niced itself, the scheduler gives a nice-10
 * process about a tenth of a nice-0 one's share, so that CPU is there for another seed.
 */
export function cpuTimesOf(statLine: string, nicedIsIdle: boolean): { idle: number; total: number } {
  const f = statLine.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest is inside user)
  const idle = (f[3] ?? 0) + (f[4] ?? 0) + (nicedIsIdle ? (f[1] ?? 0) : 0);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { idle, total };
}

/** Idle and total jiffies of all CPUs (/proc/stat), niced CPU as idle unless this process is niced; undefined off Linux. */
export function procCpuTimes(): ReturnType<CpuTimes> {
  try {
    return cpuTimesOf(readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!, getPriority() <= 0);
  } catch {
    return undefined;
  }
}

/**
 * Decides when another seed may start. `fixed` admits up to n at once; `auto` admits two seeds at
 * once, then one more while the cores idle over the last window add up to a seed's worth.
 */
export class Admission {
  private lastStart = 0;
  private samples: Array<{ t: number; idle: number; total: number }> = [];
  private timer: NodeJS.Timeout | undefined;
  readonly limit: number;

  constructor(
    private readonly concurrency: Concurrency,
    seeds: number,
    private readonly cores = availableParallelism(),
    /** the machine's CPU times and clock (tests pass their own; then `sample()` is theirs to call) */
    private readonly clock: { cpuTimes: CpuTimes; now: () => number } | undefined = undefined,
  ) {
    this.limit = Math.max(1, Math.min(concurrency === 'auto' ? autoLimit(cores) : concurrency, seeds));
    if (concurrency === 'auto' && !clock) {
      this.sample();
      this.timer = setInterval(() => this.sample(), 1_000);
      this.timer.unref();
    }
  }

  private now(): number {
    return this.clock ? this.clock.now() : Date.now();
  }

  /** Idle cores over the last window (undefined: not known yet, or not on Linux). */
  idleCores(): number | undefined {
    const now = this.samples.at(-1);
    const then = this.samples.find((s) => now !== undefined && now.t - s.t <= WINDOW_MS);
    if (!now || !then || now === then || now.total === then.total) return undefined;
    return ((now.idle - then.idle) / (now.total - then.total)) * this.cores;
  }

  /** May another seed start now, with `running` seeds running? */
  admits(running: number): boolean {
    if (running >= this.limit) return false;
    if (running < AUTO_FLOOR || this.concurrency !== 'auto') return true;
    if (this.now() - this.lastStart < RAMP_MS) return false;
    const idle = this.idleCores();
    return idle !== undefined && idle >= SEED_CORES;
  }

  started(): void {
    this.lastStart = this.now();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Reads the CPU times (every second under `auto`). */
  sample(): void {
    const c = (this.clock?.cpuTimes ?? procCpuTimes)();
    if (!c) return;
    const t = this.now();
    this.samples.push({ t, ...c });
    this.samples = this.samples.filter((s) => t - s.t <= WINDOW_MS + 1_000);
  }
}
