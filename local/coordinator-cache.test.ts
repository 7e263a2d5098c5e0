/**
 * The local runner's cached coordinator definition: the same definition synthesizing under the run's
 * prefix gives, without synthesizing for each new prefix (aws-cdk-lib keeps every token it made in a
 * process-wide map, so a long chaos run, a prefix per seed, would grow with every seed).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { coordinatorDefinition } from '../cdk/coordinator-definition.js';
import { cachedCoordinatorDefinition } from './coordinator-cache.js';

/** Tokens aws-cdk-lib has registered in this process (0 before it made any). */
function cdkTokens(): number {
  return (globalThis as { __cdkTokenMap?: { stringTokenMap: Map<string, unknown> } }).__cdkTokenMap?.stringTokenMap.size ?? 0;
}

describe('cachedCoordinatorDefinition', () => {
  it.each([{ expressCheckpoints: false }, { expressCheckpoints: true }])('is the definition synthesized under the run’s own prefix (%o)', (o) => {
    const prefix = `run-${randomBytes(3).toString('hex')}`;
    const options = { prefix, region: 'eu-west-1', ...(o.expressCheckpoints ? { expressCheckpoints: true } : {}) };
    expect(cachedCoordinatorDefinition(clickstream, options)).toEqual(coordinatorDefinition(clickstream, options));
  });

  it('a new prefix synthesizes no stack: aws-cdk-lib’s token map does not grow', () => {
    cachedCoordinatorDefinition(clickstream, { prefix: 'warm' });
    const before = cdkTokens();
    const def = cachedCoordinatorDefinition(clickstream, { prefix: `seed-${randomBytes(3).toString('hex')}` });
    expect(def.stateMachineArn).toMatch(/:stateMachine:seed-[0-9a-f]{6}-coordinator$/);
    expect(cdkTokens()).toBe(before);
  });

  it('checks the prefix as synthesizing would', () => {
    expect(() => cachedCoordinatorDefinition(clickstream, { prefix: 'Not-Sanitized' })).toThrow(/prefix must be/);
    expect(() => cachedCoordinatorDefinition(clickstream, { prefix: 'p'.repeat(70) })).toThrow(/more than the 64 AWS allows/);
  });
});
