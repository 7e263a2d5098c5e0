/**
 * The web UI of `sluice dev`, on 127.0.0.1 only: static assets (plain HTML, CSS and JavaScript, and
 * the graph layout library's browser bundle straight from node_modules — nothing to build), a JSON API over the
 * session, and a server-sent event stream with a snapshot every second and every log line as it comes.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { DevSession } from './session.js';

const require = createRequire(import.meta.url);
const asset = (name: string) => new URL(`./ui/${name}`, import.meta.url);

export interface DevServer {
  readonly url: string;
  close(): Promise<void>;
}

export function devApp(session: DevSession): Hono {
  const app = new Hono();
  // a page of another site must not read the job through a name that resolves to 127.0.0.1 (DNS rebinding)
  app.use('*', async (c, next) => {
    if (!/^(127\.0\.0\.1|localhost)(:\d+)?$/.test(c.req.header('host') ?? '')) return c.text('sluice dev answers only requests addressed to 127.0.0.1 or localhost\n', 403);
    await next();
  });
  const statics: Record<string, { file: URL | string; type: string }> = {
    '/': { file: asset('index.html'), type: 'text/html; charset=utf-8' },
    '/app.js': { file: asset('app.js'), type: 'text/javascript; charset=utf-8' },
    '/app.css': { file: asset('app.css'), type: 'text/css; charset=utf-8' },
    '/vendor/dagre.min.js': { file: join(dirname(require.resolve('@dagrejs/dagre/package.json')), 'dist', 'dagre.min.js'), type: 'text/javascript; charset=utf-8' },
  };
  for (const [path, { file, type }] of Object.entries(statics)) {
    app.get(path, (c) => c.body(readFileSync(file), 200, { 'content-type': type, 'cache-control': 'no-store' }));
  }

  app.get('/api/snapshot', (c) => {
    const s = session.snapshot();
    return s ? c.json(s) : c.json({ error: 'starting' }, 503);
  });

  app.get('/api/logs', (c) => c.json(session.observer.recentLogs(c.req.query('stage') || undefined)));

  app.get('/api/sinks/:name', async (c) => {
    const limit = Math.min(1000, Number(c.req.query('limit') ?? 50) || 50);
    try {
      return c.json(await session.readSink(c.req.param('name'), limit));
    } catch (err) {
      return c.json({ error: err instanceof Error ? err.message : String(err) }, 400);
    }
  });

  app.get('/api/state', async (c) => {
    const { operator, state, key } = c.req.query();
    if (!operator || !state || key === undefined) return c.json({ error: 'give operator, state and key' }, 400);
    try {
      const value = await session.queryState(operator, state, key);
      return c.json({ found: value !== undefined, value: value ?? null });
    } catch (err) {
      return c.json({ error: err instanceof Error ? err.message : String(err) }, 400);
    }
  });

  app.get('/api/events', (c) =>
    streamSSE(c, async (stream) => {
      const pending: Array<{ event: string; data: string }> = [];
      let wake: (() => void) | undefined;
      const push = (event: string, data: unknown) => {
        pending.push({ event, data: JSON.stringify(data) });
        wake?.();
      };
      const first = session.snapshot();
      if (first) push('snapshot', first);
      for (const l of session.observer.recentLogs(undefined, 200)) push('log', l);
      const offSnap = session.onSnapshot((s) => push('snapshot', s));
      const offLog = session.observer.onLog((l) => push('log', l));
      stream.onAbort(() => wake?.());
      try {
        while (!stream.aborted) {
          while (pending.length) await stream.writeSSE(pending.shift()!);
          await new Promise<void>((r) => (wake = r));
          wake = undefined;
        }
      } finally {
        offSnap();
        offLog();
      }
    }),
  );
  return app;
}

/** Serves the UI on 127.0.0.1 (`port` 0: a free one). */
export async function startDevServer(session: DevSession, port: number): Promise<DevServer> {
  const app = devApp(session);
  let server!: ServerType;
  const address = await new Promise<AddressInfo>((resolve, reject) => {
    server = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, resolve);
    server.once('error', reject);
  });
  return {
    url: `http://127.0.0.1:${address.port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        // open event streams would keep close() waiting
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
