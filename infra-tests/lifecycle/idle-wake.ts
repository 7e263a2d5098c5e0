/**
 * What the idle-coordinator tests share: the wake-up a deployed source stage function does after a
 * batch with input, whether the coordinator is parked, and a wait for a condition that says what
 * the coordinator did meanwhile when it fails.
 */
import { sleep } from '../../shared/adapters/aws/clients.js';
import { awsCoordinatorWake } from '../../shared/adapters/aws/coordinator-ports.js';
import { DynamoCheckpointStore } from '../../shared/adapters/aws/dynamo-checkpoint-store.js';
import { hasInput } from '../../shared/coordinator/wake.js';
import type { LocalJobRunner, LocalRunOptions } from '../../local/runner.js';

/** A `wrapHandler` doing what functions/operator.ts does after a source batch: wake a parked coordinator. */
export function wakeAfterSourceInput(runner: () => LocalJobRunner | undefined): NonNullable<LocalRunOptions['wrapHandler']> {
  return (handler, { stage }) =>
    stage.input.kind !== 'source'
      ? handler
      : async (event) => {
          const out = await handler(event);
          const r = runner();
          if (r && hasInput(event)) await awsCoordinatorWake(r.names, r.clients).afterInput();
          return out;
        };
}

/** Whether the coordinator parked its Allocate token (idle) and no waker has taken it yet. */
export async function parked(runner: LocalJobRunner): Promise<boolean> {
  return (await new DynamoCheckpointStore(runner.clients, runner.names.controlTable).idleToken()) !== undefined;
}

/** Waits for `cond`; past `ms` fails naming what was awaited and the coordinator's last tasks. */
export async function until(cond: () => Promise<boolean>, what: string, tasks: readonly string[], ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms; coordinator tasks so far: ${tasks.slice(-40).join(' ')}`);
    await sleep(100);
  }
}
