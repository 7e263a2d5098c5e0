import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ListStreamsCommand } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients } from '../../shared/adapters/aws/clients.js';
import { hangFirstAttempt, silentServer } from './sdk-hang.js';

// An endpoint that answers every ListStreams: what is under test is where each attempt goes.
let endpoint: Server;
let answered = 0;
beforeAll(async () => {
  endpoint = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      answered++;
      res.setHeader('content-type', 'application/x-amz-json-1.1');
      res.end(JSON.stringify({ StreamNames: [], HasMoreStreams: false }));
    });
  });
  await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  endpoint.closeAllConnections();
  await new Promise<void>((resolve) => endpoint.close(() => resolve()));
});

describe('sdk-hang', () => {
  it('a command sent twice hangs its first attempt each time (one middleware, its counter reset)', async () => {
    let connections = 0;
    let givenUp = 0;
    const silent = silentServer(() => connections++, () => givenUp++);
    const port = (endpoint.address() as AddressInfo).port;
    const { kinesis } = createAwsClients({
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      endpoints: { kinesis: `http://127.0.0.1:${port}` },
      requestTimeoutMs: 300,
    });
    try {
      const cmd = new ListStreamsCommand({});
      for (let send = 1; send <= 2; send++) {
        hangFirstAttempt(cmd, await silent.port());
        await expect(kinesis.send(cmd)).resolves.toMatchObject({ StreamNames: [] });
        expect(connections, `hung first attempts after send ${send}`).toBe(send);
        expect(answered, `answered retries after send ${send}`).toBe(send);
      }
      // a later send that is not hung goes straight to the endpoint
      await kinesis.send(cmd);
      expect(connections).toBe(2);
      expect(answered).toBe(3);
    } finally {
      kinesis.destroy();
      await silent.close();
    }
  });
});
