/** The dev server's own rules, without a running job: loopback names only, assets without a build step. */
import { describe, expect, it } from 'vitest';
import { devApp } from './server.js';
import type { DevSession } from './session.js';

describe('sluice dev web server', () => {
  // the routes below never reach the session
  const app = devApp({} as DevSession);

  it('answers requests addressed to 127.0.0.1 or localhost, and refuses any other Host (DNS rebinding)', async () => {
    for (const host of ['127.0.0.1:4173', 'localhost:4173', 'localhost']) {
      const r = await app.request('/', { headers: { host } });
      expect(r.status, host).toBe(200);
      expect(await r.text()).toContain('<script src="/app.js"');
    }
    for (const host of ['evil.example:4173', '127.0.0.1.evil.example', '']) {
      const r = await app.request('/api/snapshot', { headers: { host } });
      expect(r.status, host).toBe(403);
    }
  });

  it('serves the page, its script and the layout library from node_modules as they are', async () => {
    const get = (path: string) => app.request(path, { headers: { host: '127.0.0.1:1' } });
    expect((await get('/app.js')).headers.get('content-type')).toMatch(/javascript/);
    const dagre = await get('/vendor/dagre.min.js');
    expect(dagre.status).toBe(200);
    expect(await dagre.text()).toMatch(/var dagre=/);
  });
});
