/**
 * `sluice init <dir>`: scaffolds a project of its own for a job — the job, a unit test with
 * `sluice/testing`, a CDK app deploying it with `SluiceJobStack`, sample events, tsconfig.json and
 * npm scripts — that passes its test and `cdk synth` right after `npm install`.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Command } from 'commander';

interface OwnPackage {
  version: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
}

/** This package's package.json: two folders up from cli/ in a checkout, three from dist/cli/ when installed. */
function ownPackage(): OwnPackage {
  for (const up of ['..', '../..']) {
    const file = new URL(`${up}/package.json`, import.meta.url);
    if (existsSync(file)) {
      const p = JSON.parse(readFileSync(file, 'utf8')) as Partial<OwnPackage> & { name?: string };
      if (p.name === 'sluice') return { version: p.version ?? '0.0.0', dependencies: p.dependencies ?? {}, devDependencies: p.devDependencies ?? {} };
    }
  }
  throw new Error('cannot find the package.json of sluice');
}

const JOB = `/**
 * Revenue per user per minute, from order events on a Kinesis stream, written to DynamoDB.
 * Run it locally:  npm start          Test it:  npm test          Deploy it:  npx cdk deploy
 */
import { dynamoUpsertSink, job, TumblingEventTimeWindows, WatermarkStrategies, type AggregateFunction } from 'sluice';

export interface Order {
  readonly user: string;
  readonly amount: number;
  readonly ts: number;
}

export interface Revenue {
  readonly user: string;
  readonly minute: number;
  readonly revenue: number;
}

function parseOrder(raw: unknown): Order {
  const o = raw as Partial<Order>;
  if (typeof o.user !== 'string' || typeof o.amount !== 'number' || typeof o.ts !== 'number') {
    throw new Error('an order needs a string user, a number amount and a number ts');
  }
  return o as Order;
}

const sum: AggregateFunction<Order, number, number> = {
  createAccumulator: () => 0,
  add: (order, total) => total + order.amount,
  getResult: (total) => total,
  merge: (a, b) => a + b,
};

const revenue = job('revenue', { checkpoint: { intervalMs: 10_000 } });
revenue
  .source<Order>({ name: 'orders', shards: 2, parse: parseOrder, timestamp: (o) => o.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(5_000) })
  .keyBy((o) => o.user)
  .window(TumblingEventTimeWindows.of(60_000))
  .aggregate(sum, { name: 'revenue', result: (user, w, total): Revenue => ({ user: String(user), minute: w.start, revenue: total }) })
  .sinkTo(dynamoUpsertSink<Revenue>({ name: 'revenue-per-minute', key: (r) => \`\${r.user}@\${r.minute}\` }));

export default revenue;
`;

const TEST = `import { describe, expect, it } from 'vitest';
import { MemoryJobRunner } from 'sluice/testing';
import revenue from './job.js';

describe('revenue', () => {
  it('sums the orders of each user per minute, and dead-letters a malformed order', async () => {
    const r = new MemoryJobRunner(revenue);
    r.produce('orders', [
      { user: 'ada', amount: 5, ts: 1_000 },
      { user: 'ada', amount: 7, ts: 30_000 },
      { user: 'bob', amount: 2, ts: 59_999 },
      { user: 'ada', amount: 1, ts: 61_000 },
      { user: 'bob' },
    ]);
    r.endOfInput(); // the final watermark fires every window
    await r.drain();
    const rows = [...r.upserts('revenue-per-minute').values()].map((x) => ({ user: x.user, minute: x.minute, revenue: x.revenue }));
    expect(rows.sort((a, b) => a.user.localeCompare(b.user) || a.minute - b.minute)).toEqual([
      { user: 'ada', minute: 0, revenue: 12 },
      { user: 'ada', minute: 60_000, revenue: 1 },
      { user: 'bob', minute: 0, revenue: 2 },
    ]);
    expect(r.deadLetters()).toHaveLength(1);
  });
});
`;

const APP = `/** The CDK app: one stack holding the job. \`npx cdk synth\`, \`npx cdk deploy\`. */
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import { SluiceJobStack, stackIdFor } from 'sluice/cdk';
import revenue from './job.js';

const app = new App();
new SluiceJobStack(app, stackIdFor(revenue.name), {
  job: revenue,
  jobModule: fileURLToPath(new URL('./job.ts', import.meta.url)),
  entriesDir: fileURLToPath(new URL('./cdk.out/.sluice-entries', import.meta.url)),
});
app.synth();
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    lib: ['ES2023'],
    strict: true,
    skipLibCheck: true,
    esModuleInterop: true,
    noEmit: true,
    types: ['node'],
  },
  include: ['*.ts'],
  exclude: ['node_modules', 'cdk.out'],
};

function events(): string {
  const lines: string[] = [];
  const users = ['ada', 'bob', 'cy'];
  for (let i = 0; i < 120; i++) lines.push(JSON.stringify({ user: users[i % 3], amount: 1 + ((i * 7) % 20), ts: 1_767_225_600_000 + i * 2_500 }));
  lines.splice(60, 0, '{"user":"bob","amount":');
  return `${lines.join('\n')}\n`;
}

const README = (name: string) => `# ${name}

A [Sluice](https://www.npmjs.com/package/sluice) job: revenue per user per minute.

\`\`\`sh
npm install
npm test          # the unit test (sluice/testing, in memory)
npm start         # runs the job on emulated AWS with events.jsonl and prints every result
npx cdk synth     # the CloudFormation template of the job's stack
npx cdk deploy    # deploys it (then start its coordinator, see Sluice's docs/deploy.md)
\`\`\`
`;

export interface InitOptions {
  /** the dependency on sluice; @default `^<this version>` */
  readonly sluice?: string;
}

/** Writes the project into `dir` (which must be empty or absent); returns the files written. */
export function scaffold(dir: string, options: InitOptions = {}): string[] {
  const root = resolve(dir);
  if (existsSync(root) && readdirSync(root).length > 0) throw new Error(`${root} is not empty: sluice init writes a new project`);
  mkdirSync(root, { recursive: true });
  const own = ownPackage();
  const pin = (name: string) => {
    const v = own.devDependencies[name] ?? own.dependencies[name];
    if (!v) throw new Error(`no version of ${name} known`);
    return v;
  };
  const name = basename(root).toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/^-+/, '') || 'sluice-job';
  const files: Record<string, string> = {
    'package.json': `${JSON.stringify(
      {
        name,
        version: '0.1.0',
        private: true,
        type: 'module',
        scripts: { test: 'vitest run', start: 'sluice run job.ts --events orders=events.jsonl', typecheck: 'tsc --noEmit', synth: 'cdk synth' },
        dependencies: { sluice: options.sluice ?? `^${own.version}` },
        devDependencies: Object.fromEntries(['@types/node', 'aws-cdk', 'aws-cdk-lib', 'constructs', 'typescript', 'vitest'].map((d) => [d, pin(d)])),
      },
      null,
      2,
    )}\n`,
    'tsconfig.json': `${JSON.stringify(TSCONFIG, null, 2)}\n`,
    // tsx comes with sluice: the app runs without a build step
    'cdk.json': `${JSON.stringify({ app: 'node --import tsx app.ts', watch: { include: ['*.ts'] } }, null, 2)}\n`,
    'job.ts': JOB,
    'job.test.ts': TEST,
    'app.ts': APP,
    'events.jsonl': events(),
    '.gitignore': 'node_modules/\ncdk.out/\n',
    'README.md': README(name),
  };
  for (const [file, text] of Object.entries(files)) writeFileSync(join(root, file), text);
  return Object.keys(files);
}

export function registerInitCommand(program: Command): void {
  program
    .command('init')
    .description('create a project for a new job: the job, a unit test, a CDK app, sample events, scripts')
    .argument('<dir>', 'folder of the new project (created; must be empty)')
    .option('--sluice <spec>', 'version, path or tarball of sluice to depend on (default: this version)')
    .action((dir: string, opts: { sluice?: string }) => {
      const files = scaffold(dir, opts.sluice !== undefined ? { sluice: opts.sluice } : {});
      console.log(`created ${resolve(dir)}: ${files.join(', ')}\n\n  cd ${dir}\n  npm install\n  npm test\n  npm start\n  npx cdk synth`);
    });
}
