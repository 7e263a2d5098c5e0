/**
 * `endpoint-outage`: a Kinesis, DynamoDB or S3 endpoint stops answering for a while — connections
 * are refused, open ones reset — and then answers again with its data intact. This is what an
 * emulator crash and restart can honestly stand for: AWS never loses an acknowledged write, but
 * the way to a service does fail for seconds (an endpoint's host replaced, a network path or a
 * load balancer reset). A restart of kinesis-mock or dynalite without their data would be a fault
 * no AWS service makes, so the emulators keep running and a TCP proxy in front of each one (on the
 * loopback) goes dark instead.
 *
 * The stage functions' clients talk through the proxies; the SDK retries a refused or reset
 * connection a few times, and when the outage outlasts those attempts the invocation fails and the
 * event source mapping retries its batch (the environment's cached instance is dropped and rebuilt
 * from the lease). The coordinator and the harness's producer keep the direct endpoints.
 */
import net from 'node:net';
import { createAwsClients, type AwsClientOptions, type AwsClients } from '../../shared/adapters/aws/clients.js';
import { sleep } from '../../shared/adapters/throttling.js';
import { listenOnLoopback } from '../emulators.js';
import type { FaultSchedule } from './schedule.js';

export const OUTAGE_SERVICES = ['kinesis', 'dynamodb', 's3'] as const;
export type OutageService = (typeof OUTAGE_SERVICES)[number];

/** A TCP proxy on 127.0.0.1 in front of one endpoint that can go dark for a while. */
export class OutageProxy {
  private readonly open = new Set<net.Socket>();
  /** the SDK's side of each open connection */
  private readonly clients = new Set<net.Socket>();
  private port = 0;
  private dark = false;
  private stopped = false;
  private readonly server: net.Server;
  /** told when the port could not be listened on again for a while */
  onStuck: (() => void) | undefined;

  private constructor(private readonly target: URL) {
    this.server = net.createServer((client) => this.accept(client));
  }

  static async start(endpoint: string): Promise<OutageProxy> {
    const p = new OutageProxy(new URL(endpoint));
    await listenOnLoopback(p.server);
    p.port = (p.server.address() as net.AddressInfo).port;
    return p;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private accept(client: net.Socket): void {
    client.on('error', () => undefined);
    if (this.dark) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(Number(this.target.port), this.target.hostname);
    upstream.on('error', () => undefined);
    this.clients.add(client);
    this.open.add(client).add(upstream);
    const end = () => {
      this.clients.delete(client);
      this.open.delete(client);
      this.open.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream).pipe(client);
  }

  /** Goes dark for `ms`: new connections are refused, open ones reset; then listens again on the same port. */
  async outage(ms: number): Promise<void> {
    this.dark = true;
    // close() waits for the open connections: reset them first (keep-alive sockets would hold it for good)
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    // the SDK's side sees its connections reset; the emulator's side is closed in order (an
    // emulator is not what failed, and some do not take a reset well)
    for (const s of this.open) {
      if (this.clients.has(s)) s.resetAndDestroy();
      else s.destroy();
    }
    this.open.clear();
    this.clients.clear();
    await closed;
    await sleep(ms);
    this.dark = false;
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        await new Promise<void>((resolve, reject) => {
          this.server.once('error', reject);
          this.server.listen(this.port, '127.0.0.1', () => {
            this.server.removeListener('error', reject);
            resolve();
          });
        });
        return;
      } catch {
        // the port is ours; a socket of the old listener may still hold it for a moment. An
        // endpoint that never comes back is not this fault: keep trying until it listens again
        if (attempt % 50 === 49) this.onStuck?.();
        await sleep(100);
      }
    }
  }

  async close(): Promise<void> {
    this.stopped = true;
    for (const s of this.open) s.destroy();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export interface EndpointOutageOptions {
  /** how often an outage may start; @default 1 s */
  readonly everyMs?: number;
  /** outage length: min … max; @default 1–3.5 s */
  readonly minMs?: number;
  readonly maxMs?: number;
  /** the services that may go dark, one entry per chance; @default Kinesis and DynamoDB twice as often as S3 (which the stage functions call far less) */
  readonly services?: readonly OutageService[];
}

const SERVICE_DRAW: readonly OutageService[] = ['kinesis', 'dynamodb', 'kinesis', 'dynamodb', 's3'];

/**
 * Proxies for the three endpoints and the seeded driver that takes one of them down now and then
 * while the schedule's fault phase runs (one outage at a time).
 */
export class EndpointOutages {
  private running = true;
  private loop: Promise<void> = Promise.resolve();
  private clientsFor: AwsClients | undefined;

  private constructor(
    private readonly proxies: Readonly<Record<OutageService, OutageProxy>>,
    private readonly clientOptions: AwsClientOptions,
    private readonly schedule: FaultSchedule,
    private readonly o: EndpointOutageOptions,
  ) {}

  /** Starts the seeded outages (once the job runs: before, no function would notice). */
  begin(): void {
    const { schedule, o } = this;
    const services = o.services ?? SERVICE_DRAW;
    const minMs = o.minMs ?? 1_000;
    const maxMs = o.maxMs ?? 3_500;
    this.loop = (async () => {
      while (this.running) {
        await sleep(o.everyMs ?? 1_000);
        if (!this.running || !schedule.roll('endpoint-outage')) continue;
        const service = services[schedule.int(services.length)]!;
        const ms = minMs + schedule.int(maxMs - minMs + 1);
        schedule.observe(`outage:${service}`);
        this.proxies[service].onStuck = () => schedule.observe(`outage-relisten-slow:${service}`);
        await this.proxies[service].outage(ms).catch((err: unknown) => schedule.observe(`outage-failed:${String(err)}`));
      }
    })();
  }

  static async start(
    endpoints: Readonly<Record<OutageService, string>>,
    clientOptions: Omit<AwsClientOptions, 'endpoints'>,
    schedule: FaultSchedule,
    o: EndpointOutageOptions = {},
  ): Promise<EndpointOutages> {
    const [kinesis, dynamodb, s3] = await Promise.all(OUTAGE_SERVICES.map((s) => OutageProxy.start(endpoints[s])));
    const proxies = { kinesis: kinesis!, dynamodb: dynamodb!, s3: s3! };
    const endpointsVia = { kinesis: proxies.kinesis.endpoint, dynamodb: proxies.dynamodb.endpoint, s3: proxies.s3.endpoint };
    return new EndpointOutages(proxies, { ...clientOptions, endpoints: endpointsVia }, schedule, o);
  }

  /** `clients` with Kinesis, DynamoDB and S3 reached through the proxies (one set of clients for every environment). */
  through(clients: AwsClients): AwsClients {
    this.clientsFor ??= createAwsClients(this.clientOptions);
    const p = this.clientsFor;
    return { ...clients, kinesis: p.kinesis, dynamodb: p.dynamodb, doc: p.doc, s3: p.s3 };
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop.catch(() => undefined);
    await Promise.all(Object.values(this.proxies).map((p) => p.close()));
  }
}
