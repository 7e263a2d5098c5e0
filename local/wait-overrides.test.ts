/**
 * The local runner's Wait overrides: the round's head start for the barrier (BarrierWait, the
 * deployed batching windows) is not waited locally, where the stages take records with no window.
 */
import { describe, expect, it } from 'vitest';
import { coordinatorDefinition } from '../cdk/coordinator-definition.js';
import { COORDINATOR_STATES as S } from '../cdk/coordinator-state-machine.js';
import { threeStageJob } from '../cdk/test-support.js';
import { localWaitOverrides } from './wait-overrides.js';

describe('localWaitOverrides', () => {
  const def = coordinatorDefinition(threeStageJob(), { expressCheckpoints: true });

  it('runs the round\'s BarrierWait in no time, with or without a checkpoint interval override', () => {
    expect(def.rounds!.definition.States[S.barrierWait]).toMatchObject({ Type: 'Wait', Seconds: 2 });
    expect(localWaitOverrides(def).roundWaits).toEqual({ [S.barrierWait]: 0 });
    expect(localWaitOverrides(def, 200).roundWaits).toEqual({ [S.barrierWait]: 0, [S.ackWait]: 50, [S.pause]: 200 });
    expect(localWaitOverrides(def, 200).waits[S.pause]).toBe(200);
  });
});
