/**
 * The functions load Powertools' tracer, and with it the X-Ray SDK (whose async hook makes every
 * promise of the function pay for bookkeeping), only when tracing is on. Each case builds the
 * stage, coordinator and bounded reader handlers in a fresh Node process, as a cold start does,
 * invokes the stage handler once with an empty batch, and lists the tracer's modules that process
 * loaded.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../cdk/function-entry.js';
import { TRACER_MODULES, TRACING_ENV } from './telemetry.js';

const url = (path: string) => JSON.stringify(pathToFileURL(join(REPO_ROOT, path)).href);

// The X-Ray SDK is CommonJS, so once loaded it is in the CommonJS module cache whoever imported it;
// the tracer's ES modules never reach that cache, but they import the SDK statically.
const script = `
import { createRequire } from 'node:module';
const { operatorHandler } = await import(${url('functions/operator.ts')});
const { coordinatorHandler } = await import(${url('functions/coordinator.ts')});
const { boundedReaderHandler } = await import(${url('functions/bounded-reader.ts')});
const { default: job } = await import(${url('examples/clickstream/job.ts')});
coordinatorHandler(job);
boundedReaderHandler(job);
const out = await operatorHandler(job)({ Records: [] });
const cached = Object.keys(createRequire(import.meta.url).cache);
const loaded = ${JSON.stringify(TRACER_MODULES)}.filter((m) => cached.some((p) => p.split(/[\\\\/]/).join('/').includes('/node_modules/' + m + '/')));
process.stdout.write(JSON.stringify({ out, loaded }));
`;

async function coldStart(tracing: string | undefined): Promise<{ out: unknown; loaded: string[] }> {
  const env: NodeJS.ProcessEnv = { ...process.env, AWS_REGION: 'us-east-1', SLUICE_PREFIX: 'sluice-clickstream', SLUICE_STAGE: 's0', SLUICE_BUCKET: 'bucket' };
  delete env[TRACING_ENV];
  if (tracing !== undefined) env[TRACING_ENV] = tracing;
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], { cwd: REPO_ROOT, env, timeout: 120_000 });
  return JSON.parse(stdout) as { out: unknown; loaded: string[] };
}

describe('the tracer is loaded only when tracing is on', () => {
  it('with tracing off, no module of the tracer or the X-Ray SDK is loaded, and the stage handler answers', async () => {
    await expect(coldStart(undefined)).resolves.toEqual({ out: { batchItemFailures: [] }, loaded: [] });
  });

  it('with tracing on, the handler loads the tracer (and the X-Ray SDK) before it runs', async () => {
    // CommonJS-only detection: the X-Ray SDK shows; the tracer's ES modules do not reach the CommonJS cache
    await expect(coldStart('1')).resolves.toEqual({ out: { batchItemFailures: [] }, loaded: ['aws-xray-sdk-core'] });
  });
});
