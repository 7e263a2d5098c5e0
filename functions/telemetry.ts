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
 * stalled checkpoints, timer failures, reshards) are written at once. The steady names that only
 * `detailedMetrics` asks for are dropped here (shared/runtime/metric-names.ts): each would be another
 * custom metric per stage at $0.30 a month.
 *
 * The tracer is loaded only when tracing is on: loading it loads the X-Ray SDK, which installs an
 * async hook with destroy tracking, and then every promise of the function pays for bookkeeping.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Tracer } from '@aws-lambda-powertools/tracer';
import type { AwsClients } from '../shared/adapters/aws/clients.js';
import { DETAILED_METRICS_ENV, publishesMetric, WATCHED_METRICS_ENV } from '../shared/runtime/metric-names.js';
import type { Telemetry } from '../shared/runtime/ports.js';

/** '1' when the construct turned on active tracing (`tracing: true`); anything else: no tracer at all. */
export const TRACING_ENV = 'SLUICE_TRACING';

/** The modules a function loads only with tracing on (the tracer, and the X-Ray SDK it loads). */
export const TRACER_MODULES: readonly string[] = ['@aws-lambda-powertools/tracer', 'aws-xray-sdk-core'];

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
  /** publish the detailed names too (SluiceJob `detailedMetrics`); @default process.env.SLUICE_DETAILED_METRICS === '1' */
  readonly detailedMetrics?: boolean;
  /** the watched names an alarm or the dashboard reads (metric-names.ts); @default process.env.SLUICE_WATCHED_METRICS, comma-separated */
  readonly watchedMetrics?: readonly string[];
}

export class PowertoolsTelemetry implements Telemetry {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** X-Ray tracing of the SDK clients; undefined (not even loaded) unless tracing is on and `traceClients` ran */
  tracer: Tracer | undefined;
  private readonly counts = new Map<string, number>();
  private readonly timings = new Map<string, number[]>();
  /** when the first pending value was counted; undefined while nothing is pending */
  private since: number | undefined;
  private urgent = false;
  private readonly periodMs: number;
  private readonly now: () => number;
  private readonly serviceName: string;
  private readonly detailed: boolean;
  private readonly watched: ReadonlySet<string>;

  constructor(job: string, stage: string, options: PowertoolsTelemetryOptions = {}) {
    this.logger = new Logger({ serviceName: `sluice-${job}`, persistentKeys: { job, stage } });
    this.metrics = new Metrics({ namespace: 'Sluice', serviceName: `sluice-${job}`, defaultDimensions: { job, stage } });
    this.serviceName = `sluice-${job}`;
    this.periodMs = options.metricsPeriodMs ?? METRICS_PERIOD_MS;
    this.now = options.now ?? Date.now;
    this.detailed = options.detailedMetrics ?? process.env[DETAILED_METRICS_ENV] === '1';
    this.watched = new Set(options.watchedMetrics ?? (process.env[WATCHED_METRICS_ENV] ?? '').split(',').filter(Boolean));
  }

  /**
   * Traces the SDK clients (by default every one) when tracing is on: loads the tracer at cold start
   * and resolves once the clients are captured. The handler awaits it before its first call to AWS;
   * with tracing off it is already resolved and nothing is loaded.
   */
  traceClients(clients: AwsClients, which: readonly (keyof AwsClients)[] = ['kinesis', 'dynamodb', 's3', 'sfn']): Promise<void> {
    if (process.env[TRACING_ENV] !== '1') return Promise.resolve();
    const ready = import('@aws-lambda-powertools/tracer').then(({ Tracer }) => {
      const tracer = new Tracer({ serviceName: this.serviceName, enabled: true });
      this.tracer = tracer;
      // the tracer disables itself outside Lambda (and under SAM): then the clients stay as they are
      if (tracer.isTracingEnabled()) for (const name of which) tracer.captureAWSv3Client(clients[name]);
    });
    // a failed load fails the invocations that await it, not the execution environment before the first one
    ready.catch(() => undefined);
    return ready;
  }

  count(name: string, value = 1): void {
    if (!publishesMetric(name, this.detailed, this.watched)) return;
    this.pending(name);
    this.counts.set(name, (this.counts.get(name) ?? 0) + value);
  }

  timing(name: string, ms: number): void {
    if (!publishesMetric(name, this.detailed, this.watched)) return;
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
