/**
 * The local runner's cached coordinator definition: the same definition synthesizing under the run's
 * prefix gives, without synthesizing for each new prefix (aws-cdk-lib keeps every token it made in a
 * process-wide map, so a long chaos run, a prefix per seed, would grow with every seed).
 */
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { coordinatorDefinition } from '../cdk/coordinator-definition.js';
import { cachedCoordinatorDefinition, definitionKey, definitionSources, importClosure } from './coordinator-cache.js';

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
    withSourcesCopy((copy) => {
      const store = join(copy, 'shared/adapters/aws/control-table-keys.ts');
      const text = readFileSync(store, 'utf8');
      expect(text).toContain('padStart(12,');
      writeFileSync(store, text.replace('padStart(12,', 'padStart(13,'));
    });
  });

  it('a change to a module cdk reaches only through another (two imports down) is a new key', () => {
    // cdk imports the coordinator's protocol, which imports the error codes; no cdk module does directly
    const cdkDir = join(root, 'cdk');
    const direct = readdirSync(cdkDir).filter((f) => /\.ts$/.test(f) && !f.endsWith('.test.ts')).map((f) => readFileSync(join(cdkDir, f), 'utf8'));
    expect(direct.some((t) => t.includes("from '../shared/coordinator/protocol.js'"))).toBe(true);
    expect(direct.some((t) => t.includes('util/errors.js'))).toBe(false);
    expect(readFileSync(join(root, 'shared/coordinator/protocol.ts'), 'utf8')).toContain("from '../util/errors.js'");
    withSourcesCopy((copy) => {
      const errors = join(copy, 'shared/util/errors.ts');
      mkdirSync(dirname(errors), { recursive: true });
      writeFileSync(errors, `${readFileSync(join(root, 'shared/util/errors.ts'), 'utf8')}\nexport const CHANGED = 1;\n`);
    });
  });

  it('follows import cycles once', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-cache-cycle-'));
    try {
      writeFileSync(join(dir, 'a.ts'), "import { b } from './b.js';\nexport const a = 1;\n");
      writeFileSync(join(dir, 'b.ts'), "import type { A } from './c.js';\nexport {\n  a,\n} from './a.js';\nexport const b = 1;\n");
      writeFileSync(join(dir, 'c.ts'), "/**\n * import x from './missing.js';\n */\nexport type A = number;\n");
      expect(importClosure([join(dir, 'a.ts')]).sort()).toEqual(['a.ts', 'b.ts', 'c.ts'].map((f) => join(dir, f)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * Copies the sources the key is made of, checks the copy gives the same key, applies `change` to the
 * copy and checks the key is a new one.
 */
function withSourcesCopy(change: (copy: string) => void): void {
  const copy = mkdtempSync(join(tmpdir(), 'sluice-cache-key-'));
  try {
    for (const f of [...definitionSources(root), join(root, 'cdk.json')]) {
      const to = join(copy, relative(root, f));
      mkdirSync(dirname(to), { recursive: true });
      cpSync(f, to);
    }
    const options = { region: 'eu-west-1' };
    expect(definitionKey('plan', options, copy)).toBe(definitionKey('plan', options, root));
    change(copy);
    expect(definitionKey('plan', options, copy)).not.toBe(definitionKey('plan', options, root));
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}
