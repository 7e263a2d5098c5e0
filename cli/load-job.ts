/** Loads a job module (TypeScript or JavaScript) whose default export is a Job. */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Job } from '../shared/api/job.js';

/** `version` (> 0) imports the module again past the module cache, after it changed. */
export async function loadJob(modulePath: string, version = 0): Promise<Job> {
  const abs = resolve(modulePath);
  let mod: { default?: unknown };
  try {
    mod = (await import(`${pathToFileURL(abs).href}${version > 0 ? `?v=${version}` : ''}`)) as { default?: unknown };
  } catch (err) {
    throw new Error(`cannot load job module ${abs}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  const job = mod.default;
  if (!(job instanceof Job)) {
    throw new Error(`${abs} must \`export default\` a job (made with job(...)); its default export is ${job === undefined ? 'missing' : typeof job}`);
  }
  return job;
}
