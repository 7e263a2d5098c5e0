/**
 * CPU time of the emulated stack during a chaos run: this process (harness, engine, dynalite, Step
 * Functions) plus the emulator children (kinesis-mock, fauxqs), read from /proc while they live, so
 * the run's cost is known apart from how busy the machine was (wall time is not).
 *
 * A seed's share: whenever a seed enters or leaves a phase, the CPU used since the last such moment
 * is split evenly over the seeds running then (each in its phase). Shares add up to the CPU used
 * while seeds ran; with one seed at a time each share is exact, with more it is an estimate.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import type { LocalEmulators } from '../../local/emulators.js';

export type SeedPhase = 'start' | 'fault' | 'quiet' | 'verdict' | 'stop';

export interface StackCpu {
  /** this process: harness, engine, dynalite, Step Functions */
  readonly harnessMs: number;
  readonly kinesisMs: number;
  readonly s3Ms: number;
  readonly totalMs: number;
}

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** user + system CPU of a live process (0 once it is gone or off Linux). */
function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // fields after "(comm)": state is the 3rd field, utime the 14th, stime the 15th
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / clockTicks();
  } catch {
    return 0;
  }
}

/** CPU used so far by this process and the emulator children. */
export function stackCpu(emulators: Pick<LocalEmulators, 'pids'>): StackCpu {
  const own = process.cpuUsage();
  const harnessMs = (own.user + own.system) / 1000;
  const kinesisMs = processCpuMs(emulators.pids.kinesis);
  const s3Ms = processCpuMs(emulators.pids.s3);
  return { harnessMs, kinesisMs, s3Ms, totalMs: harnessMs + kinesisMs + s3Ms };
}

export function cpuSince(now: StackCpu, before: StackCpu): StackCpu {
  return {
    harnessMs: now.harnessMs - before.harnessMs,
    kinesisMs: now.kinesisMs - before.kinesisMs,
    s3Ms: now.s3Ms - before.s3Ms,
    totalMs: now.totalMs - before.totalMs,
  };
}

/** Splits the stack's CPU over the seeds (and their phases) running at the same time. */
export class CpuShares {
  private last: number;
  private readonly running = new Map<number, SeedPhase>();
  private readonly shares = new Map<number, Partial<Record<SeedPhase, number>>>();
  private readonly loads: number[] = [];

  constructor(private readonly emulators: Pick<LocalEmulators, 'pids'>) {
    this.last = stackCpu(emulators).totalMs;
  }

  /** The seed enters a phase (its first phase: it starts). */
  phase(seed: number, phase: SeedPhase): void {
    this.settle();
    this.running.set(seed, phase);
  }

  /** The seed is done; its CPU per phase, in ms. */
  leave(seed: number): Partial<Record<SeedPhase, number>> {
    this.settle();
    this.running.delete(seed);
    this.loads.push(loadavg()[0]!);
    const s = this.shares.get(seed) ?? {};
    this.shares.delete(seed);
    return s;
  }

  /** 1-minute load averages seen as seeds ended. */
  get loadSamples(): readonly number[] {
    return this.loads;
  }

  private settle(): void {
    const now = stackCpu(this.emulators).totalMs;
    const used = now - this.last;
    this.last = now;
    if (!this.running.size) return;
    const each = used / this.running.size;
    for (const [seed, phase] of this.running) {
      const s = this.shares.get(seed) ?? {};
      s[phase] = (s[phase] ?? 0) + each;
      this.shares.set(seed, s);
    }
  }
}
