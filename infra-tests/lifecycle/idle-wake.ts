/**
 * What the idle-coordinator tests share: whether the coordinator is parked, and a wait for a
 * condition that says what the coordinator did meanwhile when it fails. (The local runner's source
 * functions wake a parked coordinator as the deployed ones do, with `idleCoordinator`.)
 */
import { sleep } from '../../shared/adapters/aws/clients.js';
import { DynamoCheckpointStore } from '../../shared/adapters/aws/dynamo-checkpoint-store.js';
import type { LocalJobRunner } from '../../local/runner.js';

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
