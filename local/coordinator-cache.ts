/**
 * Synthesizing the CDK stack takes seconds (loading aws-cdk-lib), so the local runner keeps the
 * synthesized coordinator definition in a cache keyed by the plan and the sources that shape it
 * (`definitionSources`).
 * A change to either synthesizes again; the cached file is the synthesized output, not a copy kept
 * by hand.
 *
 * The resource prefix is not in the key: the stack is synthesized under a placeholder prefix and the
 * placeholder replaced by the run's own (every physical name is `<prefix>-…`, shared/plan/resources.ts).
 * Runs under ever new prefixes (a chaos seed each) would otherwise synthesize a stack each, and
 * aws-cdk-lib keeps every token it ever made in a process-wide map (`__cdkTokenMap`): the process
 * would grow with every run, and its garbage collection with it.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { coordinatorDefinition, type CoordinatorDefinition, type CoordinatorDefinitionOptions } from '../cdk/coordinator-definition.js';
import type { Job } from '../shared/api/job.js';
import { planJob } from '../shared/plan/planner.js';
import { resourceNames } from '../shared/plan/resources.js';
import { validateNames, validatePrefix } from '../cdk/job-validation.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CACHE_DIR = join(ROOT, 'node_modules', '.cache', 'sluice');

/** Synthesized in place of the run's prefix: short, and no other text of a definition contains it. */
export const PLACEHOLDER_PREFIX = 'x0prefix0x';

/** Synthesized definitions read in this process, by file (the same plan under many prefixes). */
const read = new Map<string, string>();

/**
 * The files whose text shapes the definition: cdk's modules and every module they import through
 * relative imports, transitively (constants read while synthesizing, such as the checkpoint record's
 * sort-key width in control-table-keys.ts, which sizes the rounds' key states, may sit in a module
 * cdk reaches only through another). Packages are not followed: the lockfile pins them.
 */
export function definitionSources(root: string = ROOT): string[] {
  const cdkDir = join(root, 'cdk');
  // sources in a checkout; compiled modules (and no cdk.json) in an installed package
  const cdk = readdirSync(cdkDir).filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.test.ts')).sort().map((f) => join(cdkDir, f));
  const inCdk = new Set(cdk);
  return [...cdk, ...importClosure(cdk).filter((f) => !inCdk.has(f)).sort()];
}

/**
 * A static import or re-export of a relative module (`import … from './x.js'`, `export … from`,
 * `import '../y.js'`), at the start of a line: an example in a doc comment starts with ` * `.
 * The names between keyword and specifier hold no quote, and may span lines.
 */
const RELATIVE_IMPORT = /^[ \t]*(?:import|export)\b[^;'"]*?['"](\.{1,2}\/[^'"]+)\.js['"]/gm;

/** The modules `entries` import, directly or not, with the entries themselves (each once: cycles end). */
export function importClosure(entries: readonly string[]): string[] {
  const seen = new Set<string>();
  const todo = [...entries];
  for (let f = todo.pop(); f !== undefined; f = todo.pop()) {
    if (seen.has(f)) continue;
    seen.add(f);
    for (const m of readFileSync(f, 'utf8').matchAll(RELATIVE_IMPORT)) {
      const base = resolve(dirname(f), m[1]!);
      const found = [`${base}.ts`, `${base}.js`].find((p) => existsSync(p));
      if (!found) throw new Error(`${f} imports ${m[1]}.js, which is neither a .ts nor a .js file`);
      todo.push(found);
    }
  }
  return [...seen];
}

/** The cache key of a plan's definition: its hash, the options but the prefix, the sources and cdk.json. */
export function definitionKey(planHash: string, options: Omit<CoordinatorDefinitionOptions, 'prefix'>, root: string = ROOT): string {
  const h = createHash('sha256');
  h.update(planHash);
  h.update(JSON.stringify(options));
  for (const f of definitionSources(root)) {
    h.update(relative(root, f));
    h.update(readFileSync(f));
  }
  if (existsSync(join(root, 'cdk.json'))) h.update(readFileSync(join(root, 'cdk.json')));
  return h.digest('hex').slice(0, 24);
}

export function cachedCoordinatorDefinition(job: Job, options: CoordinatorDefinitionOptions = {}): CoordinatorDefinition {
  const plan = planJob(job);
  const names = resourceNames(plan, options.prefix);
  // what synthesizing under this prefix would check
  validatePrefix(options.prefix ?? names.prefix);
  validateNames(plan, names);
  const { prefix: _prefix, ...rest } = options;
  const file = join(CACHE_DIR, `coordinator-${definitionKey(plan.hash, rest)}.json`);
  let text = read.get(file) ?? (existsSync(file) ? readFileSync(file, 'utf8') : undefined);
  if (text === undefined) {
    text = JSON.stringify(coordinatorDefinition(job, { ...rest, prefix: PLACEHOLDER_PREFIX }));
    mkdirSync(CACHE_DIR, { recursive: true });
    writeFileSync(file, text);
  }
  read.set(file, text);
  return JSON.parse(text.replaceAll(PLACEHOLDER_PREFIX, names.prefix)) as CoordinatorDefinition;
}
