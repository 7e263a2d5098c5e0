/**
 * Telemetry for the Lambda functions: Powertools' structured logger and EMF metrics (namespace
 * `Sluice`, dimensions job and stage), behind the runtime's Telemetry port.
 *
 * Sized for the bill: one EMF document per invocation with only `service`, `job` and `stage` as
 * dimensions (each extra dimension value is a separate custom metric, $0.30/month each), and the
 * log level from `POWERTOOLS_LOG_LEVEL` (the construct sets WARN: an INFO line per coordinator
 * task and batch would cost more in ingestion than the tasks themselves).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { Tracer } from '@aws-lambda-powertools/tracer';
import type { AwsClients } from '../shared/adapters/aws/clients.js';
import type { Telemetry } from '../shared/runtime/ports.js';

/** '1' when the construct turned on active tracing (`tracing: true`); anything else: no tracer at all. */
export const TRACING_ENV = 'SLUICE_TRACING';

export class PowertoolsTelemetry implements Telemetry {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** X-Ray tracing of the SDK clients; disabled (a pass-through, no "sub/segment" noise) unless tracing is on */
  readonly tracer: Tracer;

  constructor(job: string, stage: string) {
    this.logger = new Logger({ serviceName: `sluice-${job}`, persistentKeys: { job, stage } });
    this.metrics = new Metrics({ namespace: 'Sluice', serviceName: `sluice-${job}`, defaultDimensions: { job, stage } });
    this.tracer = new Tracer({ serviceName: `sluice-${job}`, enabled: process.env[TRACING_ENV] === '1' });
  }

  /** Traces every SDK client when tracing is on. */
  traceClients(clients: AwsClients): void {
    if (!this.tracer.isTracingEnabled()) return;
    for (const c of [clients.kinesis, clients.dynamodb, clients.s3, clients.sfn]) this.tracer.captureAWSv3Client(c);
  }

  count(name: string, value = 1): void {
    this.metrics.addMetric(name, MetricUnit.Count, value);
  }

  timing(name: string, ms: number): void {
    this.metrics.addMetric(name, MetricUnit.Milliseconds, ms);
  }

  log(level: 'debug' | 'info' | 'warn' | 'error', message: string, fields: Record<string, unknown> = {}): void {
    this.logger[level](message, fields);
  }

  /** Writes the invocation's metrics (one EMF line); call at the end of every invocation. */
  flush(): void {
    this.metrics.publishStoredMetrics();
  }
}
