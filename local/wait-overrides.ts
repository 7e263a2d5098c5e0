/**
 * The local runner's Wait-state overrides of the coordinator workflows (the deployed definition,
 * run in the local interpreter: cdk/coordinator-definition.ts).
 */
import type { CoordinatorDefinition } from '../cdk/coordinator-definition.js';
import { COORDINATOR_STATES } from '../cdk/coordinator-state-machine.js';

export interface WaitOverrides {
  /** ms per Wait state of the Standard workflow */
  readonly waits: Record<string, number>;
  /** ms per Wait state of the Express round */
  readonly roundWaits: Record<string, number>;
}

/** `checkpointIntervalMs` (LocalRunOptions) replaces the pauses; without it the definition's own seconds hold. */
export function localWaitOverrides(def: Pick<CoordinatorDefinition, 'definition' | 'rounds'>, checkpointIntervalMs?: number): WaitOverrides {
  const waits: Record<string, number> = {};
  const roundWaits: Record<string, number> = {};
  if (checkpointIntervalMs !== undefined) {
    for (const [name, st] of Object.entries(def.definition.States)) if (st.Type === 'Wait') waits[name] = checkpointIntervalMs;
    for (const [name, st] of Object.entries(def.rounds?.definition.States ?? {})) if (st.Type === 'Wait') roundWaits[name] = checkpointIntervalMs;
    // a round looks at the acks again after a moment, not after a whole interval
    if (def.rounds) roundWaits[COORDINATOR_STATES.ackWait] = Math.min(50, checkpointIntervalMs);
  }
  // the local stages take their records with no batching window: a barrier needs no head start
  if (def.rounds?.definition.States[COORDINATOR_STATES.barrierWait]) roundWaits[COORDINATOR_STATES.barrierWait] = 0;
  return { waits, roundWaits };
}
