/**
 * Real bundling: synthesizes with esbuild (local, no Docker) and loads what it produced. One test
 * uses stub handler factories, so the bundling pipeline is checked whatever state functions/ is in;
 * the other bundles the real functions/operator.ts and functions/coordinator.ts (skipped, with the
 * reason, until both exist).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { newApp } from './coordinator-definition.js';
import { REPO_ROOT } from './function-entry.js';
import { SluiceJobStack } from './sluice-job.js';
import type { SluiceJobProps } from './sluice-job.js';

const scratchDirs: string[] = [];
afterAll(() => scratchDirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** Synthesizes with bundling; returns the asset folder of each function by function name. */
function bundle(props: Partial<SluiceJobProps>): Map<string, string> {
  const outdir = mkdtempSync(join(tmpdir(), 'sluice-bundle-'));
  scratchDirs.push(outdir);
  const app = newApp({ bundle: true, outdir, context: { 'aws:cdk:enable-asset-metadata': true } });
  const stack = new SluiceJobStack(app, 'Bundled', { job: clickstream, jobModule: 'examples/clickstream/job.ts', ...props });
  const assembly = app.synth();
  const template = assembly.getStackArtifact(stack.artifactId).template as {
    Resources: Record<string, { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, string> }>;
  };
  const out = new Map<string, string>();
  for (const res of Object.values(template.Resources)) {
    // Sluice's own functions: CDK's custom-resource provider (start on deploy) has no name of ours
    if (res.Type !== 'AWS::Lambda::Function' || res.Properties.FunctionName === undefined) continue;
    const asset = res.Metadata?.['aws:asset:path'];
    expect(asset, `asset path of ${String(res.Properties.FunctionName)}`).toBeDefined();
    out.set(String(res.Properties.FunctionName), join(outdir, asset!));
  }
  return out;
}

/**
 * Imports a bundle from its asset folder, outside the repository, as Lambda would: there is no
 * node_modules next to it, so a module esbuild could not see (a `require` through createRequire,
 * a computed path) fails here as it would at a cold start.
 */
async function loadHandler(assetDir: string, env: Record<string, string>): Promise<unknown> {
  Object.assign(process.env, { AWS_REGION: 'us-east-1', SLUICE_BUCKET: 'bucket', ...env });
  try {
    const mod = (await import(`${pathToFileURL(join(assetDir, 'index.mjs')).href}?t=${Date.now()}`)) as { handler?: unknown };
    return mod.handler;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(
      `the bundle in ${assetDir} does not load without node_modules (as in Lambda): ${message}. ` +
        'A dependency loaded at run time through createRequire() or a computed require() is invisible to esbuild: import it statically.',
      { cause: err },
    );
  }
}

describe('bundling with the local esbuild', () => {
  it('bundles stub handler factories into ESM with source maps that load and answer', async () => {
    // the entries must sit under the project root (NodejsFunction checks), so the stubs do too
    mkdirSync(join(REPO_ROOT, 'cdk.out'), { recursive: true });
    const root = mkdtempSync(join(REPO_ROOT, 'cdk.out', '.sluice-stub-'));
    scratchDirs.push(root);
    mkdirSync(join(root, 'functions'));
    writeFileSync(
      join(root, 'functions', 'operator.ts'),
      "import type { Job } from '../../../shared/api/job.js';\n" +
        'export const operatorHandler = (job: Job) => async () => ({ batchItemFailures: [], job: job.name, stage: process.env.SLUICE_STAGE });\n',
    );
    writeFileSync(
      join(root, 'functions', 'coordinator.ts'),
      "import type { Job } from '../../../shared/api/job.js';\n" +
        'export const coordinatorHandler = (job: Job) => async (input: { action: string }) => ({ job: job.name, action: input.action });\n',
    );
    const assets = bundle({ functionsRoot: root, entriesDir: join(root, 'entries') });
    expect([...assets.keys()].sort()).toEqual(['sluice-clickstream-coordinator', 'sluice-clickstream-s0', 'sluice-clickstream-s1']);
    for (const dir of assets.values()) {
      expect(readdirSync(dir).sort()).toEqual(['index.mjs', 'index.mjs.map']);
      expect(readFileSync(join(dir, 'index.mjs'), 'utf8')).toMatch(/createRequire/);
    }
    const op = (await loadHandler(assets.get('sluice-clickstream-s1')!, { SLUICE_STAGE: 's1' })) as () => Promise<unknown>;
    await expect(op()).resolves.toEqual({ batchItemFailures: [], job: 'clickstream', stage: 's1' });
    const co = (await loadHandler(assets.get('sluice-clickstream-coordinator')!, {})) as (i: { action: string }) => Promise<unknown>;
    await expect(co({ action: 'allocate' })).resolves.toEqual({ job: 'clickstream', action: 'allocate' });
  });

  const real = existsSync(join(REPO_ROOT, 'functions/operator.ts')) && existsSync(join(REPO_ROOT, 'functions/coordinator.ts'));
  it.skipIf(!real)('bundles the real functions (skipped until functions/operator.ts and functions/coordinator.ts exist)', async () => {
    const assets = bundle({});
    const prefix = { SLUICE_PREFIX: 'sluice-clickstream' };
    expect(typeof (await loadHandler(assets.get('sluice-clickstream-s0')!, { ...prefix, SLUICE_STAGE: 's0' }))).toBe('function');
    expect(typeof (await loadHandler(assets.get('sluice-clickstream-coordinator')!, prefix))).toBe('function');
    // With tracing on the stage handler imports the tracer at its cold start; in plain Node (in this
    // process the test runner would resolve a bare import from the project), so it must be bundled.
    const index = pathToFileURL(join(assets.get('sluice-clickstream-s0')!, 'index.mjs')).href;
    const script = `const { handler } = await import(${JSON.stringify(index)}); process.stdout.write(JSON.stringify(await handler({ Records: [] })));`;
    const env = { ...process.env, AWS_REGION: 'us-east-1', SLUICE_BUCKET: 'bucket', ...prefix, SLUICE_STAGE: 's0', SLUICE_TRACING: '1' };
    const out = execFileSync(process.execPath, ['--input-type=module', '--eval', script], { cwd: tmpdir(), env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(JSON.parse(out)).toEqual({ batchItemFailures: [] });
  });
});
