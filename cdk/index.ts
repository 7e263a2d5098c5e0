/**
 * `sluice/cdk`: the CDK constructs that deploy a job — `SluiceJob` (streams, functions, event
 * source mappings, state table, bucket, coordinator workflow, alarms and dashboard) and
 * `SluiceJobStack`, a stack holding one.
 *
 * @example
 * ```ts
 * import { App } from 'aws-cdk-lib';
 * import { SluiceJobStack, stackIdFor } from 'sluice/cdk';
 * import job from './job.js';
 *
 * const app = new App();
 * new SluiceJobStack(app, stackIdFor(job.name), { job, jobModule: 'job.ts' });
 * ```
 * @module sluice/cdk
 */
export { SluiceJob, SluiceJobStack, sluiceFunction, stackIdFor, METRICS_NAMESPACE, STAGE_DEFAULTS, LAMBDA_RUNTIME } from './sluice-job.js';
export type { SluiceJobProps, SluiceJobStackProps, SluiceJobAlarms, SluiceFunctionProps, SluiceMetricOptions, StageSettings } from './sluice-job.js';
