/**
 * The CDK app (`cdk.json`: `npx tsx cdk/app.ts`). One stack, for the example job named by the
 * context key `sluice:example` (default `clickstream`): `examples/<name>/job.ts`, whose default
 * export is the job.
 *
 *   npx cdk synth                                  # examples/clickstream
 *   npx cdk deploy -c sluice:example=clickstream   # the same, explicit
 *   npx cdk deploy -c sluice:prefix=clicks-dev     # another copy of the job, under other names
 *   npx cdk deploy -c sluice:removalPolicy=destroy # a throw-away copy: cdk destroy deletes its data
 *   npx cdk deploy -c sluice:job=path/to/job.ts    # any job module (what `sluice deploy` runs)
 *   npx cdk deploy -c sluice:dashboard=true        # with the job's CloudWatch dashboard ($3 a month)
 *
 * cdk-nag's AWS Solutions pack runs at every synth; an unacknowledged finding stops the synth.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { App, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { Job } from '../shared/api/job.js';
import { REPO_ROOT } from './function-entry.js';
import { SluiceJobStack, stackIdFor } from './sluice-job.js';

/** Loads `examples/<name>/job.ts` and checks that its default export is a Job. */
export async function loadExample(example: string): Promise<{ job: Job; jobModule: string }> {
  const jobModule = join(REPO_ROOT, 'examples', example, 'job.ts');
  if (!/^[A-Za-z0-9_-]+$/.test(example) || !existsSync(jobModule)) {
    const known = readdirSync(join(REPO_ROOT, 'examples')).filter((d) => existsSync(join(REPO_ROOT, 'examples', d, 'job.ts')));
    throw new Error(`context sluice:example must name a folder of examples/ with a job.ts, got "${example}" (known: ${known.join(', ')})`);
  }
  return loadJobModule(jobModule);
}

/** Loads a job module (context `sluice:job`) and checks that its default export is a Job. */
export async function loadJobModule(path: string): Promise<{ job: Job; jobModule: string }> {
  const jobModule = resolve(path);
  if (!existsSync(jobModule)) throw new Error(`context sluice:job must name a job module, got "${path}" (no file at ${jobModule})`);
  const loaded = (await import(pathToFileURL(jobModule).href)) as { default?: unknown };
  if (!(loaded.default instanceof Job)) {
    throw new Error(`${jobModule} must \`export default\` a Job (job('name', ...)), got ${typeof loaded.default}`);
  }
  return { job: loaded.default, jobModule };
}

/**
 * Adds the selected example's stack to `app` and registers cdk-nag's AWS Solutions checks on it.
 * Context: `sluice:example` (default `clickstream`), `sluice:prefix` (default `sluice-<job>`),
 * `sluice:removalPolicy` (`retain`, the default, or `destroy`), `sluice:dashboard` (`true` for the
 * job's dashboard).
 */
export async function buildApp(app: App): Promise<SluiceJobStack> {
  const example = String(app.node.tryGetContext('sluice:example') ?? 'clickstream');
  const given = app.node.tryGetContext('sluice:job') as string | undefined;
  const { job, jobModule } = given ? await loadJobModule(given) : await loadExample(example);
  const prefix = app.node.tryGetContext('sluice:prefix') as string | undefined;
  const removal = String(app.node.tryGetContext('sluice:removalPolicy') ?? 'retain');
  if (removal !== 'retain' && removal !== 'destroy') {
    throw new Error(`context sluice:removalPolicy must be "retain" or "destroy", got "${removal}"`);
  }
  const dashboard = String(app.node.tryGetContext('sluice:dashboard') ?? 'false');
  if (dashboard !== 'true' && dashboard !== 'false') throw new Error(`context sluice:dashboard must be "true" or "false", got "${dashboard}"`);
  const stack = new SluiceJobStack(app, stackIdFor(job.name), {
    description: `Sluice stream processing job "${job.name}" (${given ?? `examples/${example}`})`,
    job,
    jobModule,
    ...(prefix ? { prefix } : {}),
    removalPolicy: removal === 'destroy' ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
    dashboard: dashboard === 'true',
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return stack;
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
if (isMain) {
  const app = new App();
  await buildApp(app);
  app.synth();
}
