/**
 * Telemetry for the Lambda functions: Powertools' structured logger and EMF metrics (namespace
 * `Sluice`, dimensions job and stage), behind the runtime's Telemetry port.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { Tracer } from '@aws-lambda-powertools/tracer';
import type { Telemetry } from '../shared/runtime/ports.js';

export class PowertoolsTelemetry implements Telemetry {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** X-Ray tracing of the SDK clients (a no-op outside Lambda or when tracing is off) */
  readonly tracer: Tracer;

  constructor(job: string, stage: string) {
    this.logger = new Logger({ serviceName: `sluice-${job}`, persistentKeys: { job, stage } });
    this.metrics = new Metrics({ namespace: 'Sluice', serviceName: `sluice-${job}`, defaultDimensions: { job, stage } });
    this.tracer = new Tracer({ serviceName: `sluice-${job}` });
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
