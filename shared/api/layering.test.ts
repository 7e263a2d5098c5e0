/**
 * The API (what `import … from 'sluice'` gives) is the job's description only: it reaches the
 * utilities and, for types alone, the plan — never the runtime, the codec or the adapters, so a
 * job's module loads nothing of the engine.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const dir = fileURLToPath(new URL('.', import.meta.url));
const modules = readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));

/** `[kind, specifier]` of every static import or re-export of a module outside shared/api. */
function outside(text: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const m of text.matchAll(/^(import|export)(\s+type)?\b[^;'"]*?['"](\.\.\/[^'"]+)['"]/gm)) out.push([m[2] ? 'type' : 'value', m[3]!]);
  return out;
}

describe('the API layer', () => {
  it.each(modules)('%s imports only utilities, and plan types', (file) => {
    const bad = outside(readFileSync(`${dir}/${file}`, 'utf8')).filter(([kind, spec]) => !spec.startsWith('../util/') && !(kind === 'type' && spec.startsWith('../plan/')));
    expect(bad).toEqual([]);
  });

  it('catches a value import of the runtime', () => {
    expect(outside("import { MAX_EVENT_TIME } from '../runtime/watermark-tracker.js';\nimport type { PlanSource } from '../plan/plan.js';")).toEqual([
      ['value', '../runtime/watermark-tracker.js'],
      ['type', '../plan/plan.js'],
    ]);
  });
});
