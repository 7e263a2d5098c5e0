/**
 * Telemetry for the Lambda functions: Powertools' structured logger and EMF metrics (namespace
 * `Sluice`, dimensions job and stage), behind the runtime's Telemetry port.
 *
 * Sized for the bill: only `service`, `job` and `stage` as dimensions (each extra dimension value
 * is a separate custom metric, $0.30/month each); the log level from `POWERTOOLS_LOG_LEVEL` (the
 * construct sets WARN: an INFO line per coordinator task and batch would cost more in ingestion
 * than the tasks themselves); and metrics summed in the execution environment and written as one
 * EMF document about once a minute rather than one per invocation (at 1,000 events/s that is 8.7 M
 * documents a month, $3 of log ingestion). A document carries the time its first value was counted;
 * what is pending waits for the next invocation of the environment, so an environment Lambda shuts
 * down loses at most its last minute of metrics. Counts an alarm watches (dead letters, failed or
 * stalled checkpoints, timer failures, reshards) are written at once.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { Tracer } from '@aws-lambda-powertools/tracer';
import type { AwsClients } from '../shared/adapters/aws/clients.js';
import type { Telemetry } from '../shared/runtime/ports.js';

/** '1' when the construct turned on active tracing (`tracing: true`); anything else: no tracer at all. */
export const TRACING_ENV = 'SLUICE_TRACING';

/** How long an environment sums its metrics before it writes them (one EMF document). */
export const METRICS_PERIOD_MS = 60_000;

/** Counts that alarms watch: written at the end of the invocation that counted them. */
const URGENT_METRICS: ReadonlySet<string> = new Set(['DeadLetters', 'CheckpointFailed', 'CheckpointStalled', 'TimerFailures', 'SourceResharded']);

/** Values of one timing a document holds (EMF's limit: 100). */
const MAX_TIMINGS = 100;

export interface PowertoolsTelemetryOptions {
  /** @default METRICS_PERIOD_MS; 0 writes the metrics at the end of every invocation */
  readonly metricsPeriodMs?: number;
  /** @default Date.now */
  readonly now?: () => number;
}

export class PowertoolsTelemetry implements Telemetry {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** X-Ray tracing of the SDK clients; disabled (a pass-through, no "sub/segment" noise) unless tracing is on */
  readonly tracer: Tracer;
  private readonly counts = new Map<string, number>();
  private readonly timings = new Map<string, number[]>();
  /** when the first pending value was counted; undefined while nothing is pending */
  private since: number | undefined;
  private urgent = false;
  private readonly periodMs: number;
  private readonly now: () => number;

  constructor(job: string, stage: string, options: PowertoolsTelemetryOptions = {}) {
    this.logger = new Logger({ serviceName: `sluice-${job}`, persistentKeys: { job, stage } });
    this.metrics = new Metrics({ namespace: 'Sluice', serviceName: `sluice-${job}`, defaultDimensions: { job, stage } });
    this.tracer = new Tracer({ serviceName: `sluice-${job}`, enabled: process.env[TRACING_ENV] === '1' });
    this.periodMs = options.metricsPeriodMs ?? METRICS_PERIOD_MS;
    this.now = options.now ?? Date.now;
  }

  /** Traces every SDK client when tracing is on. */
  traceClients(clients: AwsClients): void {
    if (!this.tracer.isTracingEnabled()) return;
    for (const c of [clients.kinesis, clients.dynamodb, clients.s3, clients.sfn]) this.tracer.captureAWSv3Client(c);
  }

  count(name: string, value = 1): void {
    this.pending(name);
    this.counts.set(name, (this.counts.get(name) ?? 0) + value);
  }

  timing(name: string, ms: number): void {
    this.pending(name);
    const values = this.timings.get(name) ?? [];
    values.push(ms);
    this.timings.set(name, values);
    // a document holds at most MAX_TIMINGS values of a metric: write it at the end of this invocation
    if (values.length >= MAX_TIMINGS) this.urgent = true;
  }

  log(level: 'debug' | 'info' | 'warn' | 'error', message: string, fields: Record<string, unknown> = {}): void {
    this.logger[level](message, fields);
  }

  /**
   * Call at the end of every invocation: writes the pending metrics as one EMF document when the
   * oldest is a period old, an urgent count is among them, or `now` is true (the coordinator
   * before it parks); otherwise they wait for a later invocation.
   */
  flush(now = false): void {
    if (this.since === undefined) return;
    if (!now && !this.urgent && this.now() - this.since < this.periodMs) return;
    this.metrics.setTimestamp(this.since);
    for (const [name, value] of this.counts) this.metrics.addMetric(name, MetricUnit.Count, value);
    for (const [name, values] of this.timings) for (const v of values) this.metrics.addMetric(name, MetricUnit.Milliseconds, v);
    this.metrics.publishStoredMetrics();
    this.counts.clear();
    this.timings.clear();
    this.since = undefined;
    this.urgent = false;
  }

  private pending(name: string): void {
    this.since ??= this.now();
    if (URGENT_METRICS.has(name)) this.urgent = true;
  }
}
