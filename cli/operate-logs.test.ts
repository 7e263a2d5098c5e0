/**
 * `sluice logs <stage> [--follow]` against CloudWatch Logs' wire protocol (FilterLogEvents, JSON
 * 1.1), served by a twin on 127.0.0.1 that holds a log group's events and pages them: the command
 * reads the stage function's group from `--since` on, follows every page, prints each event once in
 * time order — also when a later poll returns again the events at the last time it printed.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CloudWatchLogsClient } from '@aws-sdk/client-cloudwatch-logs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deployedJob } from './deployed.js';
import { logs } from './operate.js';

interface Ev {
  eventId: string;
  timestamp: number;
  message: string;
}

/** The log groups and the FilterLogEvents requests seen; two events a page. */
class LogsTwin {
  readonly groups = new Map<string, Ev[]>();
  readonly requests: Array<{ logGroupName: string; startTime: number; nextToken?: string }> = [];
  /** called before a poll's first page is served, with the poll's number (1, 2, …) */
  onPoll?: (n: number) => void;
  private polls = 0;
  private server?: Server;

  async listen(): Promise<string> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const target = String(req.headers['x-amz-target'] ?? '');
        const b = JSON.parse(body || '{}') as { logGroupName: string; startTime: number; nextToken?: string };
        res.setHeader('content-type', 'application/x-amz-json-1.1');
        if (target !== 'Logs_20140328.FilterLogEvents') {
          res.statusCode = 400;
          return res.end(JSON.stringify({ __type: 'UnknownOperationException', message: target }));
        }
        this.requests.push(b);
        if (b.nextToken === undefined) this.onPoll?.(++this.polls);
        const group = this.groups.get(b.logGroupName);
        if (!group) {
          res.statusCode = 400;
          return res.end(JSON.stringify({ __type: 'ResourceNotFoundException', message: 'The specified log group does not exist.' }));
        }
        // CloudWatch Logs returns the events at or after startTime, in no promised order across pages
        const all = group.filter((e) => e.timestamp >= b.startTime);
        const from = Number(b.nextToken ?? 0);
        const page = all.slice(from, from + 2);
        res.end(JSON.stringify({ events: page, ...(from + 2 < all.length ? { nextToken: String(from + 2) } : {}) }));
      });
    });
    await new Promise<void>((ok) => this.server!.listen(0, '127.0.0.1', ok));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    return new Promise((ok) => (this.server ? this.server.close(() => ok()) : ok()));
  }
}

describe('sluice logs', () => {
  const twin = new LogsTwin();
  let client: CloudWatchLogsClient;

  beforeAll(async () => {
    const endpoint = await twin.listen();
    client = new CloudWatchLogsClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, maxAttempts: 1 });
  });

  afterAll(async () => {
    client?.destroy();
    await twin.close();
  });

  it('follows the stage function\'s log group: every event once, in time order, across pages and polls', async () => {
    const t = await deployedJob('examples/clickstream/job.ts', { prefix: 'logtest', bucket: 'logtest-bucket' });
    expect(t.local).toBe(false);
    const now = Date.now();
    const ev = (i: number, at: number): Ev => ({ eventId: `e${i}`, timestamp: at, message: `line ${i}\n` });
    // out of order across pages, one event before --since (not asked for), two at the same millisecond
    const group = [ev(3, now - 3000), ev(1, now - 5000), ev(2, now - 4000), ev(0, now - 120_000), ev(4, now - 3000)];
    twin.groups.set('/aws/lambda/logtest-s1', group);
    const out: string[] = [];
    const ac = new AbortController();
    twin.onPoll = (n) => {
      // between the first and the second poll: a new event, and another at the millisecond last printed
      if (n === 2) group.push(ev(5, now - 2000), ev(6, now - 3000));
      if (n === 3) ac.abort();
    };
    await logs(t, 's1', { follow: true, sinceMs: 60_000, client, pollMs: 5, signal: ac.signal, write: (text) => out.push(text) });
    const line = (i: number, at: number) => `${new Date(at).toISOString()} line ${i}\n`;
    expect(out).toEqual([line(1, now - 5000), line(2, now - 4000), line(3, now - 3000), line(4, now - 3000), line(6, now - 3000), line(5, now - 2000)]);
    expect(new Set(twin.requests.map((r) => r.logGroupName))).toEqual(new Set(['/aws/lambda/logtest-s1']));
    const firstPages = twin.requests.filter((r) => r.nextToken === undefined);
    expect(firstPages).toHaveLength(3);
    expect(Math.abs(firstPages[0]!.startTime - (now - 60_000))).toBeLessThan(10_000);
    expect(firstPages[1]!.startTime).toBe(now - 3000);
    expect(twin.requests.length).toBeGreaterThan(firstPages.length); // pages were followed
  });

  it('reads the coordinator\'s group too, and reports a missing group', async () => {
    const t = await deployedJob('examples/clickstream/job.ts', { prefix: 'logtest', bucket: 'logtest-bucket' });
    twin.onPoll = undefined;
    twin.groups.set('/aws/lambda/logtest-coordinator', [{ eventId: 'c1', timestamp: Date.now() - 1000, message: 'committed 7' }]);
    const out: string[] = [];
    await logs(t, 'coordinator', { follow: false, sinceMs: 60_000, client, write: (text) => out.push(text) });
    expect(out).toEqual([expect.stringMatching(/^\S+Z committed 7\n$/)]);
    await expect(logs(t, 's0', { follow: false, sinceMs: 60_000, client })).rejects.toThrow(/log group does not exist/);
  });
});
