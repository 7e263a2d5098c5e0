/**
 * Keys of the Outputs a deployed job's stack carries (cdk/job-operations.ts writes them, the CLI
 * reads them by stack name): the names CloudFormation chose, so nothing is guessed.
 */
export const OUTPUT_KEYS = {
  prefix: 'SluicePrefix',
  bucket: 'SluiceBucket',
  stateTable: 'SluiceStateTable',
  controlTable: 'SluiceControlTable',
  stateMachineArn: 'SluiceStateMachineArn',
  coordinatorFunction: 'SluiceCoordinatorFunction',
  dashboardUrl: 'SluiceDashboardUrl',
} as const;

/** `SluiceStreamS0`, `SluiceFunctionS1`, `SluiceMappingS0`: per-stage outputs. */
export function outputKeyOfStage(kind: 'stream' | 'function' | 'mapping', stageId: string): string {
  const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
  return `Sluice${cap(kind)}${cap(stageId.replace(/[^A-Za-z0-9]/g, ''))}`;
}
