/**
 * The `sdk-hang` fault: a server on 127.0.0.1 that never answers, and a middleware that sends the
 * first attempt of one SDK command to it. The client's own request timeout has to end the attempt;
 * the SDK's retry then goes to the real endpoint.
 */
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP server on 127.0.0.1 that accepts connections, reads requests and never answers: a request
 * sent to it hangs until the client gives up on it.
 */
export function silentServer(onConnection: () => void, onGivenUp: () => void): { port: () => Promise<number>; close: () => Promise<void> } {
  let server: Server | undefined;
  let listening: Promise<number> | undefined;
  let closing = false;
  const sockets = new Set<Socket>();
  return {
    port() {
      listening ??= new Promise<number>((resolve, reject) => {
        server = createServer((socket) => {
          sockets.add(socket);
          onConnection();
          socket.on('data', () => undefined);
          socket.on('error', () => undefined);
          socket.on('close', () => {
            sockets.delete(socket);
            // the client gave up on its request (not us closing at the end)
            if (!closing) onGivenUp();
          });
        });
        server.on('error', reject);
        server.listen(0, '127.0.0.1', () => resolve((server!.address() as AddressInfo).port));
        server.unref();
      });
      return listening;
    },
    async close() {
      closing = true;
      for (const socket of sockets) socket.destroy();
      if (server?.listening) await new Promise<void>((resolve) => server!.close(() => resolve()));
    },
  };
}

/** The attempt counters of commands that carry the middleware: a command may be sent again. */
const hung = new WeakMap<object, { attempts: number }>();

/**
 * Sends the first attempt of `cmd`'s next send to the silent server (the SDK's retries go to the
 * real endpoint): a middleware inside the retry loop rewrites the attempt's host. A command the
 * engine sends again keeps its one middleware (a second one of the same name is refused by the
 * stack); its counter is reset instead.
 */
export function hangFirstAttempt(cmd: object, port: number): void {
  const stack = (cmd as { middlewareStack?: { add: (mw: unknown, opts: object) => void } }).middlewareStack;
  if (!stack) return;
  const known = hung.get(cmd);
  if (known) {
    known.attempts = 0;
    return;
  }
  const counter = { attempts: 0 };
  hung.set(cmd, counter);
  stack.add(
    (next: (args: { request: unknown }) => Promise<unknown>) => async (args: { request: unknown }) => {
      const req = args.request as { hostname?: string; port?: number; protocol?: string } | undefined;
      if (counter.attempts++ === 0 && req && typeof req === 'object' && 'hostname' in req) {
        req.hostname = '127.0.0.1';
        req.port = port;
        req.protocol = 'http:';
      }
      return next(args);
    },
    { step: 'finalizeRequest', priority: 'low', name: 'chaosHangFirstAttempt' },
  );
}
