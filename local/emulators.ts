/**
 * Starts the local AWS emulators that tests and the local runner talk to over the real wire
 * protocols: kinesis-mock (npm `kinesis-local`) and fauxqs (S3) as child processes, dynalite
 * (DynamoDB) in this process. Everything listens on 127.0.0.1 and on free ports.
 *
 * Lifecycle: `startEmulators()` resolves once each emulator has answered a real SDK call;
 * `stop()` kills the children by PID (SIGTERM, then SIGKILL) and closes dynalite. Children that
 * are still alive when this process exits are SIGKILLed by an exit hook, so an aborted test run
 * leaves nothing behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ListStreamsCommand } from '@aws-sdk/client-kinesis';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { ListBucketsCommand } from '@aws-sdk/client-s3';
import {
  LOCAL_ACCOUNT_ID,
  LOCAL_CREDENTIALS,
  LOCAL_REGION,
  localDynamoClient,
  localKinesisClient,
  localS3Client,
} from './aws-env.js';
import { closeDynaliteIterators } from './dynalite-iterators.js';

export type EmulatedService = 'kinesis' | 'dynamodb' | 's3';

export interface StartEmulatorsOptions {
  /** @default all three */
  services?: EmulatedService[];
  /** Where the children's stdout/stderr go. @default a fresh temp dir, removed by a clean stop() */
  logDir?: string;
  /** How long each emulator may take to answer its first SDK call. @default 30 000 */
  readyTimeoutMs?: number;
}

export interface LocalEmulators {
  /** `http://127.0.0.1:<port>` per service; '' for a service that was not started. */
  endpoints: { kinesis: string; dynamodb: string; s3: string };
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** PIDs of the child processes (dynalite runs in this process and has none). */
  pids: { kinesis?: number; s3?: number };
  logDir: string;
  /** AWS_ENDPOINT_URL_* for the started services, plus region and credentials. */
  env(): Record<string, string>;
  /** Idempotent. */
  stop(): Promise<void>;
}

const require = createRequire(import.meta.url);

// ---------------------------------------------------------------------------------------------
// Child bookkeeping and the exit hooks

const liveChildren = new Set<ChildProcess>();
let hooksInstalled = false;

function killAllNow(): void {
  for (const child of liveChildren) {
    if (child.pid !== undefined) {
      try {
        process.kill(child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  liveChildren.clear();
}

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  // 'exit' handlers must be synchronous: SIGKILL is the only thing that works there.
  process.on('exit', killAllNow);
  // Node runs no 'exit' handlers when a signal kills it, so handle the usual ones too; re-raise the
  // signal when nobody else listens, to keep the default "terminate" behaviour.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      killAllNow();
      process.removeListener(sig, onSignal);
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (hasExited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.removeListener('exit', onExit);
      resolve(false);
    }, ms);
    const onExit = () => {
      clearTimeout(timer);
      resolve(true);
    };
    child.once('exit', onExit);
  });
}

/** SIGTERM, then SIGKILL after `graceMs` (kinesis-mock often ignores SIGTERM after load). */
async function killChild(child: ChildProcess, graceMs = 1_000): Promise<void> {
  try {
    if (!hasExited(child)) {
      child.kill('SIGTERM');
      if (!(await waitForExit(child, graceMs))) {
        child.kill('SIGKILL');
        if (!(await waitForExit(child, 5_000))) {
          throw new Error(`emulator process ${child.pid} did not exit after SIGKILL`);
        }
      }
    }
  } finally {
    liveChildren.delete(child);
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** Bind port 0 on 127.0.0.1, read the port, close. A child may lose the race for it: callers retry. */
/** Listens on a free port of 127.0.0.1 (never another interface); rejects if it cannot. */
export function listenOnLoopback(server: { once(e: 'error', f: (err: Error) => void): unknown; removeListener(e: 'error', f: (err: Error) => void): unknown; listen(port: number, host: string, cb: () => void): unknown }): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('could not read a free port'))));
    });
  });
}

/** fauxqs exports only an "import" condition, so `require.resolve('fauxqs/package.json')` fails. */
function packageDir(name: string): string {
  for (const dir of require.resolve.paths(name) ?? []) {
    if (existsSync(join(dir, name, 'package.json'))) return join(dir, name);
  }
  throw new Error(`package ${name} is not installed (searched ${(require.resolve.paths(name) ?? []).join(', ')})`);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n').trim();
  } catch {
    return '';
  }
}

/** A minimal environment: inheriting NODE_OPTIONS (vitest, tsx loaders) into emulators breaks them. */
function baseChildEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'TEMP', 'TMP', 'LANG', 'SystemRoot']) {
    const v = process.env[k];
    if (v !== undefined) env[k] = v;
  }
  return env;
}

interface ChildSpec {
  name: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  logFile: string;
}

function spawnChild(spec: ChildSpec): ChildProcess {
  installExitHooks();
  const fd = openSync(spec.logFile, 'a');
  try {
    const child = spawn(process.execPath, spec.args, {
      cwd: spec.cwd,
      env: { ...baseChildEnv(), ...spec.env },
      stdio: ['ignore', fd, fd],
      windowsHide: true,
    });
    if (child.pid === undefined) throw new Error(`could not spawn the ${spec.name} emulator (see ${spec.logFile})`);
    liveChildren.add(child);
    child.once('exit', () => liveChildren.delete(child));
    // Without an 'error' listener a failed kill() or spawn would crash the process.
    child.on('error', () => undefined);
    return child;
  } finally {
    closeSync(fd); // the child holds its own copy
  }
}

class EmulatorStartError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'EmulatorStartError';
  }
}

async function waitReady(
  name: string,
  logFile: string,
  check: () => Promise<unknown>,
  deadlineMs: number,
  child?: ChildProcess,
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  let lastErr: unknown;
  for (;;) {
    if (child && hasExited(child)) {
      throw new EmulatorStartError(
        `${name} emulator exited (code ${child.exitCode}, signal ${child.signalCode}) before it was ready; log ${logFile}:\n${tail(logFile)}`,
        true,
      );
    }
    try {
      await check();
      return;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline) {
      throw new EmulatorStartError(
        `${name} emulator did not answer within ${deadlineMs} ms (last error: ${String(
          (lastErr as Error)?.message ?? lastErr,
        )}); log ${logFile}:\n${tail(logFile)}`,
        false,
      );
    }
    await sleep(100);
  }
}

// ---------------------------------------------------------------------------------------------
// The three emulators

interface Started {
  endpoint: string;
  pid?: number;
  stop(): Promise<void>;
}

/** An emulator that runs as a child process and serves HTTP on the first of its ports. */
interface ChildEmulator<C extends { destroy(): void }> {
  /** names the emulator in errors */
  label: string;
  logFile: string;
  /** how many free ports the child needs */
  ports: number;
  spec(ports: readonly number[]): Omit<ChildSpec, 'logFile'>;
  client(endpoint: string): C;
  /** a real SDK call that succeeds once the emulator serves */
  ready(client: C): Promise<unknown>;
}

/**
 * Spawns the child on free ports and waits until it answers; a child that exits before that (it may
 * have lost the race for a port) is started again on other ports, up to three times in all.
 */
async function startChildEmulator<C extends { destroy(): void }>(e: ChildEmulator<C>, readyMs: number): Promise<Started> {
  for (let attempt = 1; ; attempt++) {
    const ports: number[] = [];
    while (ports.length < e.ports) {
      const p = await freePort();
      if (!ports.includes(p)) ports.push(p);
    }
    const child = spawnChild({ ...e.spec(ports), logFile: e.logFile });
    const endpoint = `http://127.0.0.1:${ports[0]}`;
    const client = e.client(endpoint);
    try {
      await waitReady(e.label, e.logFile, () => e.ready(client), readyMs, child);
      return { endpoint, pid: child.pid, stop: () => killChild(child) };
    } catch (err) {
      await killChild(child);
      if (!(err instanceof EmulatorStartError && err.retryable && attempt < 3)) throw err;
    } finally {
      client.destroy();
    }
  }
}

/**
 * kinesis-mock has no host setting: it binds 0.0.0.0 (hard-coded in its KinesisMockService).
 * A preload module rewrites a missing/wildcard host in `net.Server#listen` to 127.0.0.1, which
 * covers both its plain and TLS servers.
 */
const LOOPBACK_PRELOAD = `
import net from 'node:net';
const listen = net.Server.prototype.listen;
const wild = (h) => h === undefined || h === null || h === '' || h === '0.0.0.0' || h === '::';
net.Server.prototype.listen = function (...args) {
  if (args[0] !== null && typeof args[0] === 'object') {
    if (args[0].path === undefined && wild(args[0].host)) args[0] = { ...args[0], host: '127.0.0.1' };
  } else if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\\d+$/.test(args[0]))) {
    if (typeof args[1] === 'function' || typeof args[1] === 'number') args.splice(1, 0, '127.0.0.1');
    else if (wild(args[1])) args[1] = '127.0.0.1';
  }
  return listen.apply(this, args);
};
`;

function startKinesis(logDir: string, readyMs: number): Promise<Started> {
  // kinesis-mock reads server.json (its TLS certificate) from the working directory.
  const pkgDir = dirname(require.resolve('kinesis-local/package.json'));
  return startChildEmulator(
    {
      label: 'kinesis (kinesis-local)',
      logFile: join(logDir, 'kinesis.log'),
      ports: 2,
      spec: ([plain, tls]) => ({
        name: 'kinesis',
        args: ['--import', `data:text/javascript,${encodeURIComponent(LOOPBACK_PRELOAD)}`, 'main.js'],
        cwd: pkgDir,
        env: {
          KINESIS_MOCK_PLAIN_PORT: String(plain),
          KINESIS_MOCK_TLS_PORT: String(tls),
          CREATE_STREAM_DURATION: '0ms',
          DELETE_STREAM_DURATION: '0ms',
          UPDATE_SHARD_COUNT_DURATION: '0ms',
          SPLIT_SHARD_DURATION: '0ms',
          MERGE_SHARDS_DURATION: '0ms',
          REGISTER_STREAM_CONSUMER_DURATION: '0ms',
          DEREGISTER_STREAM_CONSUMER_DURATION: '0ms',
          LOG_LEVEL: 'ERROR',
          // kinesis-mock's own default is 50 open shards per account, below AWS's quota (500 in the
          // large regions): seeds or runs sharing one emulator would hit it
          SHARD_LIMIT: '500',
          AWS_REGION: LOCAL_REGION,
          AWS_ACCOUNT_ID: LOCAL_ACCOUNT_ID,
        },
      }),
      client: localKinesisClient,
      ready: (client) => client.send(new ListStreamsCommand({})),
    },
    readyMs,
  );
}

/**
 * fauxqs's own CLI (startFauxqs) listens on 0.0.0.0 unconditionally, but the package exports
 * `buildApp` (a Fastify app), so this bootstrap listens on 127.0.0.1 instead.
 * fauxqs 2.4.1 declares Node >= 22.5: its (unused here) SQLite persistence imports `node:sqlite`,
 * which Node 20 lacks and which fails the whole import. Where it is missing, a resolve hook
 * substitutes a stub that throws only if persistence is actually used.
 */
const SQLITE_STUB = `export class DatabaseSync { constructor() { throw new Error('node:sqlite is unavailable on this Node version: fauxqs persistence cannot be used'); } }`;
const SQLITE_HOOKS = `
export async function resolve(specifier, context, next) {
  if (specifier === 'node:sqlite') return { url: ${JSON.stringify('data:text/javascript,' + encodeURIComponent(SQLITE_STUB))}, shortCircuit: true };
  return next(specifier, context);
}`;
const FAUXQS_BOOTSTRAP = `
import { register } from 'node:module';
try { await import('node:sqlite'); } catch { register(${JSON.stringify('data:text/javascript,' + encodeURIComponent(SQLITE_HOOKS))}); }
const { buildApp } = await import(process.env.SLUICE_FAUXQS_ENTRY);
const app = buildApp({ logger: false });
await app.listen({ port: Number(process.env.FAUXQS_PORT), host: '127.0.0.1' });
`;

function startS3(logDir: string, readyMs: number): Promise<Started> {
  const pkgDir = packageDir('fauxqs');
  const entry = pathToFileURL(join(pkgDir, 'dist', 'app.js')).href;
  return startChildEmulator(
    {
      label: 's3 (fauxqs)',
      logFile: join(logDir, 's3.log'),
      ports: 1,
      spec: ([port]) => ({
        name: 's3',
        args: ['--input-type=module', '-e', FAUXQS_BOOTSTRAP],
        cwd: pkgDir,
        env: { FAUXQS_PORT: String(port), FAUXQS_LOGGER: 'false', SLUICE_FAUXQS_ENTRY: entry },
      }),
      client: localS3Client,
      ready: (client) => client.send(new ListBucketsCommand({})),
    },
    readyMs,
  );
}

type DynaliteFactory = (opts: Record<string, unknown>) => Server;

async function startDynamo(logDir: string, readyMs: number): Promise<Started> {
  closeDynaliteIterators(); // else every Query and Scan leaves its iterator open (see the module)
  const dynalite = require('dynalite') as DynaliteFactory;
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await listenOnLoopback(server);
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  const endpoint = `http://127.0.0.1:${port}`;
  // Requests being answered: dynalite closes its database once the server has closed, and an action
  // still queued then throws "Database is closed" out of a callback, which ends this process.
  let inFlight = 0;
  let drained: (() => void) | undefined;
  server.on('request', (_req: unknown, res: { once(event: 'close', fn: () => void): void }) => {
    inFlight++;
    res.once('close', () => {
      if (--inFlight === 0) drained?.();
    });
  });
  let closed = false;
  const stop = async () => {
    if (closed) return;
    closed = true;
    const done = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    if (inFlight > 0) {
      await new Promise<void>((resolve) => {
        drained = resolve;
        setTimeout(resolve, 10_000).unref();
      });
    }
    // Keep-alive sockets from SDK clients would hold close() open indefinitely.
    server.closeAllConnections();
    await done;
  };
  const client = localDynamoClient(endpoint);
  try {
    await waitReady('dynamodb (dynalite)', join(logDir, '(in process)'), () => client.send(new ListTablesCommand({})), readyMs);
  } catch (err) {
    await stop();
    throw err;
  } finally {
    client.destroy();
  }
  return { endpoint, stop };
}

// ---------------------------------------------------------------------------------------------

export async function startEmulators(opts: StartEmulatorsOptions = {}): Promise<LocalEmulators> {
  const services = new Set<EmulatedService>(opts.services ?? ['kinesis', 'dynamodb', 's3']);
  const ownLogDir = opts.logDir === undefined;
  const logDir = opts.logDir ?? mkdtempSync(join(tmpdir(), 'sluice-emulators-'));
  mkdirSync(logDir, { recursive: true });
  const readyMs = opts.readyTimeoutMs ?? 30_000;

  const starters: Array<[EmulatedService, (dir: string, ms: number) => Promise<Started>]> = [
    ['kinesis', startKinesis],
    ['dynamodb', startDynamo],
    ['s3', startS3],
  ];
  const results = await Promise.allSettled(
    starters.filter(([s]) => services.has(s)).map(async ([s, start]) => [s, await start(logDir, readyMs)] as const),
  );
  const started = new Map<EmulatedService, Started>();
  const failures: unknown[] = [];
  for (const r of results) {
    if (r.status === 'fulfilled') started.set(r.value[0], r.value[1]);
    else failures.push(r.reason);
  }
  if (failures.length > 0) {
    await Promise.allSettled([...started.values()].map((s) => s.stop()));
    if (failures.length === 1) throw failures[0];
    throw new AggregateError(failures, failures.map((f) => (f as Error).message ?? String(f)).join('\n---\n'));
  }

  const endpoints = {
    kinesis: started.get('kinesis')?.endpoint ?? '',
    dynamodb: started.get('dynamodb')?.endpoint ?? '',
    s3: started.get('s3')?.endpoint ?? '',
  };
  let stopping: Promise<void> | undefined;
  return {
    endpoints,
    region: LOCAL_REGION,
    credentials: { ...LOCAL_CREDENTIALS },
    pids: { kinesis: started.get('kinesis')?.pid, s3: started.get('s3')?.pid },
    logDir,
    env() {
      const env: Record<string, string> = {
        AWS_REGION: LOCAL_REGION,
        AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
      };
      if (endpoints.kinesis) env.AWS_ENDPOINT_URL_KINESIS = endpoints.kinesis;
      if (endpoints.dynamodb) env.AWS_ENDPOINT_URL_DYNAMODB = endpoints.dynamodb;
      if (endpoints.s3) env.AWS_ENDPOINT_URL_S3 = endpoints.s3;
      return env;
    },
    stop() {
      stopping ??= (async () => {
        const res = await Promise.allSettled([...started.values()].map((s) => s.stop()));
        const failed = res.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed.length > 0) throw failed[0].reason;
        if (ownLogDir) rmSync(logDir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}
