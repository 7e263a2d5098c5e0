/**
 * Telemetry for the Lambda functions: Powertools' structured logger and EMF metrics (namespace
 * `Sluice`, dimensions job and stage), behind the runtime's Telemetry port.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Telemetry } from '../shared/runtime/ports.js';

export class PowertoolsTelemetry implements Telemetry {
  readonly logger: Logger;
  readonly metrics: Metrics;

  constructor(job: string, stage: string) {
    this.logger = new Logger({ serviceName: `sluice-${job}`, persistentKeys: { job, stage } });
    this.metrics = new Metrics({ namespace: 'Sluice', serviceName: `sluice-${job}`, defaultDimensions: { job, stage } });
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
