/**
 * The local runner's cached coordinator definition: the same definition synthesizing under the run's
 * prefix gives, without synthesizing for each new prefix (aws-cdk-lib keeps every token it made in a
 * process-wide map, so a long chaos run, a prefix per seed, would grow with every seed).
 */
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { coordinatorDefinition } from '../cdk/coordinator-definition.js';
import { cachedCoordinatorDefinition, definitionKey, definitionSources } from './coordinator-cache.js';

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

  it('a change to the checkpoint record\'s key width (a shared module cdk reads) is a new key', () => {
    // the sources the key is made of, copied: the copy gives the same key, then its width is changed
    const root = fileURLToPath(new URL('..', import.meta.url));
    const copy = mkdtempSync(join(tmpdir(), 'sluice-cache-key-'));
    try {
      for (const f of [...definitionSources(root), join(root, 'cdk.json')]) {
        const to = join(copy, relative(root, f));
        mkdirSync(dirname(to), { recursive: true });
        cpSync(f, to);
      }
      const options = { region: 'eu-west-1' };
      expect(definitionKey('plan', options, copy)).toBe(definitionKey('plan', options, root));
      const store = join(copy, 'shared/adapters/aws/control-table-keys.ts');
      const text = readFileSync(store, 'utf8');
      expect(text).toContain('padStart(12,');
      writeFileSync(store, text.replace('padStart(12,', 'padStart(13,'));
      expect(definitionKey('plan', options, copy)).not.toBe(definitionKey('plan', options, root));
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
