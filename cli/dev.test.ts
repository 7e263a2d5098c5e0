/**
 * `sluice dev` in a real browser: the command runs the clickstream example with its sample events
 * as a child process, headless Chromium (Debian's, driven by playwright-core) opens the printed
 * URL, and the page must show the stages s0 and s1, a non-zero rate, a watermark, completed
 * checkpoints and every malformed line of the sample as a dead letter with its file and line (found
 * here by reading the file, apart from the engine). `sluice checkpoints` works against the printed
 * endpoints; an edit of the job redeploys it through a savepoint, state included. SIGINT then stops
 * it with exit code 0 and no process it started left running.
 *
 * Set SLUICE_DEV_SCREENSHOT=<file.png> to save a screenshot of the page.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const EXAMPLE = 'examples/clickstream/job.ts';
// a copy that the test edits, inside the repository so that its `import 'sluice'` resolves as the example's does
const JOB_DIR = join(ROOT, '.scratch', `dev-test-${process.pid}`);
const JOB = join(JOB_DIR, 'job.ts');
const SAMPLE = 'examples/clickstream/sample-events.jsonl';
const CHROMIUM = '/usr/bin/chromium';

/** Lines of the sample the clickstream job cannot take: not JSON, or without a userId, url or numeric ts. */
function malformedLines(file: string): number[] {
  const out: number[] = [];
  readFileSync(join(ROOT, file), 'utf8')
    .split('\n')
    .forEach((text, i) => {
      if (text.trim() === '') return;
      let r: Record<string, unknown> | null;
      try {
        r = JSON.parse(text) as Record<string, unknown> | null;
      } catch {
        return void out.push(i + 1);
      }
      if (!r || typeof r.userId !== 'string' || r.userId === '' || typeof r.url !== 'string' || typeof r.ts !== 'number') out.push(i + 1);
    });
  return out;
}

/**
 * The clickstream job's count for one (user, page type) from the sample alone, written apart from
 * the job: its valid clicks outside /health whose URL's first path segment (lower case; none: home)
 * is the page type, and the latest of their times.
 */
function sampleCount(file: string, userId: string, pageType: string): { clicks: number; lastClickTs: number } {
  let clicks = 0;
  let lastClickTs = 0;
  for (const text of readFileSync(join(ROOT, file), 'utf8').split('\n')) {
    let r: { userId?: unknown; url?: unknown; ts?: unknown } | null;
    try {
      r = JSON.parse(text) as typeof r;
    } catch {
      continue;
    }
    if (!r || r.userId !== userId || typeof r.url !== 'string' || typeof r.ts !== 'number' || r.url.startsWith('/health')) continue;
    const segment = new URL(r.url, 'http://x').pathname.split('/').find((x) => x !== '');
    if ((segment?.toLowerCase() ?? 'home') !== pageType) continue;
    clicks++;
    lastClickTs = Math.max(lastClickTs, r.ts);
  }
  return { clicks, lastClickTs };
}

/** Every process below `pid` now (read from /proc). */
function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      // the command may hold spaces and parentheses: the fields after the last ')' are fixed
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [c, pp] of parent) if (pp === p) out.push(c), walk(c);
  };
  walk(pid);
  return out;
}

const alive = (pid: number) => existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');

async function until<T>(what: string, f: () => T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('sluice dev in a browser', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dev-'));
  const outFile = join(dir, 'out.log');
  const errFile = join(dir, 'err.log');
  let dev: ChildProcess;
  let exit: Promise<number | null>;
  let context: BrowserContext | undefined;
  let page: Page;
  let url: string;
  let env: Record<string, string>;
  const started = new Set<number>();

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`this test drives Debian's Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
    mkdirSync(JOB_DIR, { recursive: true });
    copyFileSync(join(ROOT, EXAMPLE), JOB);
    dev = spawn(process.execPath, ['bin/sluice.mjs', 'dev', JOB, '--events', `clicks=${SAMPLE}`, '--no-typecheck'], {
      cwd: ROOT,
      stdio: ['ignore', openSync(outFile, 'w'), openSync(errFile, 'w')],
    });
    exit = new Promise((resolve) => dev.once('exit', (code) => resolve(code)));
    const out = () => readFileSync(outFile, 'utf8');
    url = await until(
      'the web UI URL',
      () => {
        if (dev.exitCode !== null) throw new Error(`sluice dev exited with ${dev.exitCode}: ${readFileSync(errFile, 'utf8')}`);
        return /web UI: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out())?.[1];
      },
      180_000,
    );
    env = Object.fromEntries([...out().matchAll(/export (\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
    for (const p of descendants(dev.pid!)) started.add(p);
    context = await chromium.launchPersistentContext(join(dir, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
      viewport: { width: 1400, height: 1100 },
    });
    page = context.pages()[0] ?? (await context.newPage());
  });

  afterAll(async () => {
    await context?.close();
    if (!dev?.pid) return;
    // a failed test may leave it running: stop it and everything it started, by PID
    for (const p of [...descendants(dev.pid), ...started, dev.pid]) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    rmSync(dir, { recursive: true, force: true });
    rmSync(JOB_DIR, { recursive: true, force: true });
  });

  it('shows the stages, rates, watermarks, checkpoints and the sample\'s dead letters, live', async () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(Object.keys(env)).toEqual(expect.arrayContaining(['AWS_ENDPOINT_URL_KINESIS', 'AWS_ENDPOINT_URL_DYNAMODB', 'AWS_ENDPOINT_URL_S3', 'AWS_REGION']));
    await page.goto(url);
    const wait = { timeout: 180_000 };
    await page.locator('#conn.live').waitFor(wait);
    await page.locator('#stages tr[data-stage="s0"]').waitFor(wait);
    await page.locator('#stages tr[data-stage="s1"]').waitFor(wait);
    await page.locator('#graph g[data-id="s0"]').waitFor(wait);
    await page.locator('#graph g[data-id="s1"]').waitFor(wait);
    await page.waitForFunction(`[...document.querySelectorAll('#stages td.rate')].some((td) => Number(td.textContent) > 0)`, undefined, wait);
    await page.waitForFunction(`[...document.querySelectorAll('#watermarks td.watermark')].some((td) => /^\\d{4}-\\d\\d-\\d\\d /.test(td.textContent))`, undefined, wait);
    await page.waitForFunction(`document.querySelectorAll('#checkpoints td.status-COMPLETED').length >= 2`, undefined, wait);

    const bad = malformedLines(SAMPLE);
    expect(bad.length).toBeGreaterThan(0);
    await page.waitForFunction(`document.querySelectorAll('#dead-letters tbody tr').length >= ${bad.length}`, undefined, wait);
    const where = await page.locator('#dead-letters tbody tr td:first-child').allTextContents();
    expect(where.sort()).toEqual(bad.map((l) => `${SAMPLE}:${l}`).sort());

    // the sink's rows, the function logs and the sink in the graph are there too
    await page.locator('#graph g[data-id="sink:clicks-per-user-page"]').waitFor(wait);
    await page.waitForFunction(`document.querySelectorAll('#sink-rows tbody tr').length > 0`, undefined, wait);
    await page.waitForFunction(`document.querySelectorAll('#logs div').length > 0`, undefined, wait);
    if (process.env.SLUICE_DEV_SCREENSHOT) await page.screenshot({ path: process.env.SLUICE_DEV_SCREENSHOT, fullPage: true });
  });

  it('serves the lifecycle commands through the printed endpoints', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/sluice.mjs', 'checkpoints', JOB], { cwd: ROOT, env: { ...process.env, ...env }, timeout: 120_000 });
    expect(stdout).toMatch(/^\d+\s+COMPLETED/m);
  });

  it('redeploys the edited job through a savepoint: its state carries over', async () => {
    const state = async () => (await (await fetch(`${url}api/state?operator=count-clicks&state=count&key=${encodeURIComponent('u1|product')}`)).json()) as { found: boolean; value: { clicks: number } | null };
    // settle first: the source read to its end, then a checkpoint started after that completed (its barrier follows every record)
    type Snap = { stages: Array<{ id: string; shards: Array<{ lag: number; read: number }> }>; checkpoints: Array<{ checkpointId: number; status: string }>; stateTableEvery: number };
    const snap = async () => (await (await fetch(`${url}api/snapshot`)).json()) as Snap;
    // every record of the sample put (the dev command says so once the file is fed), then read: no
    // lag alone (before the feeding ends a shard can be read to its end), and no count of records
    // read (the source shards carry the checkpoints' barriers too)
    const fed = () => /→ source "[^"]+": \d+ records/.test(readFileSync(errFile, 'utf8'));
    let started = -1;
    for (const deadline = Date.now() + 180_000; ; ) {
      const wasFed = fed();
      const s = await snap();
      const maxId = Math.max(0, ...s.checkpoints.map((c) => c.checkpointId));
      const shards = s.stages.find((x) => x.id === 's0')!.shards;
      const readAll = wasFed && shards.length > 0 && shards.every((sh) => sh.lag === 0);
      if (started < 0 && readAll) started = maxId;
      if (started >= 0 && s.checkpoints.some((c) => c.checkpointId > started && c.status === 'COMPLETED')) break;
      if (Date.now() > deadline) throw new Error(`the job did not settle: ${JSON.stringify(s.checkpoints.slice(-3))}`);
      await new Promise((r) => setTimeout(r, 300));
    }
    // the reference is the sample's count, written apart from the job. sluice dev writes the state
    // table the query reads at every checkpoint (the job's own period is every 16th), and an instance
    // writes it before it acknowledges: the checkpoint that completed after the input was read holds
    // every click, read at once (infra-tests/queryable-state.test.ts shows the lag without it)
    const expected = { found: true, value: sampleCount(SAMPLE, 'u1', 'product') };
    expect(expected.value.clicks).toBeGreaterThan(1);
    expect((await snap()).stateTableEvery).toBe(1);
    expect(await state()).toEqual(expected);
    // a plan that can restore the savepoint: one more filter in the source stage, the same keyed operator
    writeFileSync(JOB, readFileSync(JOB, 'utf8').replace(".filter((c) => !c.url.startsWith('/health')", ".filter((c) => !c.url.startsWith('/health') && !c.url.startsWith('/internal')"));
    const wait = { timeout: 180_000 };
    await page.waitForFunction(`/generation 2/.test(document.querySelector('#meta').textContent)`, undefined, wait);
    await page.waitForFunction(`[...document.querySelectorAll('#checkpoints td')].some((td) => /restored from dev-2/.test(td.textContent))`, undefined, wait);
    // the restore applied every row of the savepoint: each click of the sample counted once
    for (const deadline = Date.now() + 60_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 300))) {
      if (JSON.stringify(await state()) === JSON.stringify(expected)) break;
    }
    expect(await state()).toEqual(expected);
    expect(readFileSync(errFile, 'utf8')).toMatch(/restoring savepoint dev-2 into the new plan/);
  });

  it('stops on SIGINT with exit code 0 and leaves no process behind', async () => {
    expect(started.size).toBeGreaterThan(0); // the emulators
    for (const p of descendants(dev.pid!)) started.add(p);
    dev.kill('SIGINT');
    // generous: stopping waits for the coordinator's task in flight and the emulators' exit
    const code = await Promise.race([exit, new Promise<string>((r) => setTimeout(() => r('still running 120 s after SIGINT'), 120_000).unref())]);
    expect(code).toBe(0);
    expect([...started].filter(alive)).toEqual([]);
    expect(readFileSync(errFile, 'utf8')).toContain('stopped; nothing is left running');
    await expect(fetch(url)).rejects.toThrow();
  });
});
