/**
 * Synthesizing the CDK stack takes seconds (loading aws-cdk-lib), so the local runner keeps the
 * synthesized coordinator definition in a cache keyed by the plan and the CDK sources that shape it.
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
import { join } from 'node:path';
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

export function cachedCoordinatorDefinition(job: Job, options: CoordinatorDefinitionOptions = {}): CoordinatorDefinition {
  const plan = planJob(job);
  const names = resourceNames(plan, options.prefix);
  // what synthesizing under this prefix would check
  validatePrefix(options.prefix ?? names.prefix);
  validateNames(plan, names);
  const { prefix: _prefix, ...rest } = options;
  const h = createHash('sha256');
  h.update(plan.hash);
  h.update(JSON.stringify(rest));
  const cdkDir = join(ROOT, 'cdk');
  // sources in a checkout; compiled modules (and no cdk.json) in an installed package
  for (const f of readdirSync(cdkDir).filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.test.ts')).sort()) {
    h.update(f);
    h.update(readFileSync(join(cdkDir, f)));
  }
  if (existsSync(join(ROOT, 'cdk.json'))) h.update(readFileSync(join(ROOT, 'cdk.json')));
  const file = join(CACHE_DIR, `coordinator-${h.digest('hex').slice(0, 24)}.json`);
  let text = read.get(file) ?? (existsSync(file) ? readFileSync(file, 'utf8') : undefined);
  if (text === undefined) {
    text = JSON.stringify(coordinatorDefinition(job, { ...rest, prefix: PLACEHOLDER_PREFIX }));
    mkdirSync(CACHE_DIR, { recursive: true });
    writeFileSync(file, text);
  }
  read.set(file, text);
  return JSON.parse(text.replaceAll(PLACEHOLDER_PREFIX, names.prefix)) as CoordinatorDefinition;
}
