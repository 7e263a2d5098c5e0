/**
 * Synthesizing the CDK stack takes seconds (loading aws-cdk-lib), so the local runner keeps the
 * synthesized coordinator definition in a cache keyed by the plan and the CDK sources that shape it.
 * A change to either synthesizes again; the cached file is the synthesized output, not a copy kept
 * by hand.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { coordinatorDefinition, type CoordinatorDefinition, type CoordinatorDefinitionOptions } from '../cdk/coordinator-definition.js';
import type { Job } from '../shared/api/job.js';
import { planJob } from '../shared/plan/planner.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CACHE_DIR = join(ROOT, 'node_modules', '.cache', 'sluice');

export function cachedCoordinatorDefinition(job: Job, options: CoordinatorDefinitionOptions = {}): CoordinatorDefinition {
  const h = createHash('sha256');
  h.update(planJob(job).hash);
  h.update(JSON.stringify(options));
  const cdkDir = join(ROOT, 'cdk');
  // sources in a checkout; compiled modules (and no cdk.json) in an installed package
  for (const f of readdirSync(cdkDir).filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.test.ts')).sort()) {
    h.update(f);
    h.update(readFileSync(join(cdkDir, f)));
  }
  if (existsSync(join(ROOT, 'cdk.json'))) h.update(readFileSync(join(ROOT, 'cdk.json')));
  const file = join(CACHE_DIR, `coordinator-${h.digest('hex').slice(0, 24)}.json`);
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as CoordinatorDefinition;
  const def = coordinatorDefinition(job, options);
  mkdirSync(CACHE_DIR, { recursive: true });
  writeFileSync(file, JSON.stringify(def));
  return def;
}
