/**
 * Telemetry for places without Powertools (the local runner, tests): counters kept in memory and,
 * optionally, JSON log lines in Powertools' shape to a stream.
 */
import type { Telemetry } from '../runtime/ports.js';

export class CountingTelemetry implements Telemetry {
  readonly counters = new Map<string, number>();
  readonly timings = new Map<string, number[]>();

  constructor(
    private readonly sink?: (line: string) => void,
    private readonly minLevel: 'debug' | 'info' | 'warn' | 'error' = 'warn',
  ) {}

  count(name: string, value = 1): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + value);
  }

  timing(name: string, ms: number): void {
    let t = this.timings.get(name);
    if (!t) this.timings.set(name, (t = []));
    t.push(ms);
  }

  log(level: 'debug' | 'info' | 'warn' | 'error', message: string, fields: Record<string, unknown> = {}): void {
    const order = { debug: 0, info: 1, warn: 2, error: 3 };
    if (!this.sink || order[level] < order[this.minLevel]) return;
    this.sink(JSON.stringify({ level: level.toUpperCase(), message, timestamp: new Date().toISOString(), service: 'sluice', ...fields }));
  }

  get(name: string): number {
    return this.counters.get(name) ?? 0;
  }
}
