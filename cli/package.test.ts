/**
 * The package as users get it: `npm pack`, installed into a fresh project outside the repository,
 * whose job imports `sluice`. There, `sluice plan` plans it, a `sluice/testing` unit test passes,
 * a typo in a job option stops `sluice run` with the compiler's file:line:column, and
 * `sluice run job.ts --events a=a.jsonl --events b=b.jsonl --out out.json` (two sources, event-time
 * windows, a DynamoDB, an S3 file and a Kinesis sink) writes every result that a computation over
 * the files written here, apart from the engine, gives — every window — and every bad line with its
 * file and line.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TESTDATA = join(ROOT, 'cli', 'testdata');
const WINDOW_MS = 5_000;
const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };

/**
 * A user's environment: without what an enclosing `npm test` sets for itself (npm_config_*, the
 * repository's node_modules/.bin on the PATH, whose tools and Node.js would run instead of the
 * project's own) or what this test runner sets for its workers (colours, whose codes would split the
 * output matched here).
 */
const env: NodeJS.ProcessEnv = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(npm_|vitest|force_color)/i.test(k) && k !== 'INIT_CWD')),
  NO_COLOR: '1',
  PATH: (process.env.PATH ?? '').split(delimiter).filter((p) => !p.startsWith(ROOT)).join(delimiter),
};

function exec(cmd: string, args: string[], cwd: string, timeout = 240_000) {
  return run(cmd, args, { cwd, env, timeout, maxBuffer: 64 * 1024 * 1024 });
}

// ---- the input files, and what they must give, computed here without the engine ----

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

/** JSON lines with event times rising by 50 ms and up to 1.5 s of disorder (less than the job's 2 s bound: no record is late). */
function inputLines(kind: 'order' | 'click', n: number, seed: number): string[] {
  const r = rng(seed);
  const t0 = 1_790_000_000_000;
  return Array.from({ length: n }, (_, i) => {
    const user = `u${Math.floor(r() * 40)}`;
    const ts = t0 + i * 50 + Math.floor(r() * 1500);
    return JSON.stringify(kind === 'order' ? { user, amount: 1 + Math.floor(r() * 100), ts } : { user, page: `/p${Math.floor(r() * 4)}`, ts });
  });
}

interface Expected {
  revenue: Map<string, number>;
  pageViews: Map<string, number>;
  /** the join's pairs, as sorted JSON */
  pairs: string[];
  bad: Array<{ source: string; file: string; line: number }>;
}

function oracle(files: Array<{ source: 'a' | 'b'; file: string; text: string }>): Expected {
  const e: Expected = { revenue: new Map(), pageViews: new Map(), pairs: [], bad: [] };
  const ordersIn = new Map<string, Array<Record<string, unknown>>>();
  const clicksIn = new Map<string, Array<Record<string, unknown>>>();
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  for (const { source, file, text } of files) {
    text.split('\n').forEach((line, i) => {
      if (line.trim() === '') return;
      let v: Record<string, unknown>;
      try {
        v = JSON.parse(line) as Record<string, unknown>;
      } catch {
        e.bad.push({ source, file, line: i + 1 });
        return;
      }
      const ok = typeof v.user === 'string' && typeof v.ts === 'number' && (source === 'a' ? typeof v.amount === 'number' : typeof v.page === 'string');
      if (!ok) {
        e.bad.push({ source, file, line: i + 1 });
        return;
      }
      const start = Math.floor((v.ts as number) / WINDOW_MS) * WINDOW_MS;
      if (source === 'a') add(e.revenue, `${v.user}@${start}`, v.amount as number);
      else add(e.pageViews, `${v.page}@${start}`, 1);
      const bucket = source === 'a' ? ordersIn : clicksIn;
      bucket.set(`${v.user}@${start}`, [...(bucket.get(`${v.user}@${start}`) ?? []), v]);
    });
  }
  for (const [k, orders] of ordersIn) {
    const [user, start] = k.split('@');
    for (const o of orders) for (const c of clicksIn.get(k) ?? []) e.pairs.push(JSON.stringify({ user, start: Number(start), amount: o.amount, page: c.page }));
  }
  e.pairs.sort();
  return e;
}

describe('the packed package, installed in a project of its own', () => {
  let dir: string;
  let packDir: string;
  let tarball: string;

  beforeAll(async () => {
    packDir = mkdtempSync(join(tmpdir(), 'sluice-pack-'));
    const { stdout } = await exec('npm', ['pack', '--pack-destination', packDir, '--silent'], ROOT);
    dir = mkdtempSync(join(tmpdir(), 'sluice-user-'));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'shop', private: true, type: 'module', scripts: { test: 'vitest run' } }, null, 2));
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true, noEmit: true } }, null, 2),
    );
    // the npm cache that `npm ci` filled holds every dependency: nothing is downloaded again
    tarball = join(packDir, stdout.trim().split('\n').at(-1)!);
    const pins = ['vitest', 'aws-cdk', '@types/node'].map((d) => `${d}@${pkg.devDependencies[d]}`);
    await exec('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball, ...pins], dir);
    copyFileSync(join(TESTDATA, 'shop-job.ts'), join(dir, 'job.ts'));
    copyFileSync(join(TESTDATA, 'shop-job.test.ts.txt'), join(dir, 'job.test.ts'));
  }, 400_000);

  afterAll(() => {
    for (const d of [dir, packDir]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it('plans a job that imports sluice', async () => {
    const { stdout } = await exec('npx', ['--no-install', 'sluice', 'plan', 'job.ts'], dir);
    expect(stdout).toMatch(/^job shop /);
    expect(stdout).toContain('revenue');
    expect(stdout).toContain('page-views');
    expect(stdout).toContain('orders-with-clicks');
  });

  it('runs a unit test of the job written with sluice/testing', async () => {
    const { stdout } = await exec('npx', ['--no-install', 'vitest', 'run', 'job.test.ts'], dir);
    expect(stdout).toMatch(/Tests\s+1 passed/);
  });

  it('stops a job with a misspelt option before starting anything, at its file, line and column', async () => {
    const text = readFileSync(join(dir, 'job.ts'), 'utf8').replace('timestamp: (o) => o.ts, watermarks', 'timestamp: (o) => o.ts, watermark: watermarks');
    writeFileSync(join(dir, 'typo.ts'), text);
    const line = text.split('\n').findIndex((l) => l.includes('watermark: watermarks')) + 1;
    const failed = await exec('npx', ['--no-install', 'sluice', 'run', 'typo.ts', '--events', 'a.jsonl'], dir).catch((e: { code: number; stderr: string }) => e);
    expect((failed as { code: number }).code).toBe(1);
    expect((failed as { stderr: string }).stderr).toMatch(new RegExp(`typo\\.ts:${line}:\\d+: error TS2\\d+: Object literal may only specify known properties, (and|but) 'watermark' does not exist`));
    expect((failed as { stderr: string }).stderr).not.toContain('starting the emulated AWS stack');
  });

  it('sluice run --events a=… --events b=… --out: every window of every sink, and every bad line with its file and line', async () => {
    const a = inputLines('order', 400, 1);
    const b = inputLines('click', 400, 2);
    // bad lines: cut JSON, a missing field, text that is not JSON, a timestamp that is not a number; blank lines count as lines
    a.splice(37, 0, '{"user":"u1","amount":');
    a.splice(200, 0, '', '{"user":"u2","ts":1790000010000}');
    b.splice(0, 0, 'not json at all');
    b.splice(311, 0, '{"user":"u3","page":"/p1","ts":"yesterday"}');
    const files = [
      { source: 'a' as const, file: 'a.jsonl', text: `${a.join('\n')}\n` },
      { source: 'b' as const, file: 'b.jsonl', text: `${b.join('\n')}\n` },
    ];
    for (const f of files) writeFileSync(join(dir, f.file), f.text);
    const expected = oracle(files);
    expect(expected.bad).toHaveLength(4);

    await exec('npx', ['--no-install', 'sluice', 'run', 'job.ts', '--events', 'a=a.jsonl', '--events', 'b=b.jsonl', '--out', 'out.json'], dir, 300_000);
    const out = JSON.parse(readFileSync(join(dir, 'out.json'), 'utf8')) as {
      sinks: Record<string, Array<Record<string, unknown>>>;
      deadLetters: Array<{ source: string; file: string; line: number; reason: string }>;
      checkpoints: { completed: number; aborted: number };
    };
    expect(Object.keys(out.sinks).sort()).toEqual(['orders-with-clicks', 'page-views', 'revenue']);

    // DynamoDB rows: plain objects with their key attribute, none of the sink's own attributes
    for (const row of out.sinks.revenue!) {
      expect(row.pk).toBe(`${row.user}@${row.start}`);
      expect(Object.keys(row).filter((k) => k.startsWith('_'))).toEqual([]);
    }
    const asMap = (rows: Array<Record<string, unknown>>, key: string, value: string) => new Map(rows.map((r) => [`${r[key]}@${r.start}`, r[value] as number]));
    expect(asMap(out.sinks.revenue!, 'user', 'revenue')).toEqual(expected.revenue);
    // S3 file records: the values written, each window once
    expect(out.sinks['page-views']).toHaveLength(expected.pageViews.size);
    expect(asMap(out.sinks['page-views']!, 'page', 'views')).toEqual(expected.pageViews);
    // Kinesis records: every pair of the join, once
    const pairs = out.sinks['orders-with-clicks']!.map((p) => JSON.stringify({ user: p.user, start: p.start, amount: p.amount, page: p.page })).sort();
    expect(pairs).toEqual(expected.pairs);
    // several windows, the last ones included (they fire only at the end of the input)
    const starts = new Set([...expected.pageViews.keys()].map((k) => Number(k.split('@')[1])));
    expect(starts.size).toBeGreaterThanOrEqual(4);
    expect(new Set(out.sinks['page-views']!.map((r) => r.start))).toEqual(starts);

    expect(out.deadLetters.map((d) => ({ source: d.source, file: d.file, line: d.line }))).toEqual(expected.bad);
    for (const d of out.deadLetters) expect(d.reason).toMatch(/^cannot decode json record: /);
    expect(out.checkpoints.completed).toBeGreaterThanOrEqual(1);
    expect(typeof out.checkpoints.aborted).toBe('number');
  });

  it('sluice init scaffolds a project that passes its own unit test and cdk synth', async () => {
    await exec('npx', ['--no-install', 'sluice', 'init', 'app', '--sluice', tarball], dir);
    const app = join(dir, 'app');
    // the scaffold's dependencies are those installed above: a project inside this one resolves them from there
    const scaffold = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    expect(scaffold.dependencies.sluice).toBe(tarball);
    for (const d of Object.keys(scaffold.devDependencies)) expect(existsSync(join(dir, 'node_modules', d, 'package.json'))).toBe(true);
    const { stdout } = await exec(join(dir, 'node_modules', '.bin', 'vitest'), ['run'], app);
    expect(stdout).toMatch(/Tests\s+1 passed/);
    await exec(join(dir, 'node_modules', '.bin', 'cdk'), ['synth', '--quiet', '--no-notices'], app);
    const template = readdirSync(join(app, 'cdk.out')).find((f) => f.endsWith('.template.json'));
    expect(template).toBeDefined();
    const resources = Object.values((JSON.parse(readFileSync(join(app, 'cdk.out', template!), 'utf8')) as { Resources: Record<string, { Type: string }> }).Resources);
    expect(resources.filter((r) => r.Type === 'AWS::Lambda::Function').length).toBeGreaterThanOrEqual(2);
    expect(resources.some((r) => r.Type === 'AWS::StepFunctions::StateMachine')).toBe(true);
  });
});
