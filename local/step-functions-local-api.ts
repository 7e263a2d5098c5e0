/**
 * The part of the Step Functions API the engine and the CLI use, served over HTTP on 127.0.0.1
 * (awsJson1_0, `X-Amz-Target: AWSStepFunctions.<Operation>`) for one local state machine.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listenOnLoopback } from './emulators.js';
import type { LocalStepFunctions } from './step-functions-local.js';

/** A Step Functions API error (its `type` is the wire `__type`, e.g. TaskTimedOut, ExecutionAlreadyExists). */
export class SfnApiError extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
    this.name = type;
  }
}

/** A listening API server for `sfn`; `close()` lets responses in flight finish. */
export interface StepFunctionsApi {
  readonly endpoint: string;
  close(): Promise<void>;
}

export async function serveStepFunctionsApi(sfn: LocalStepFunctions): Promise<StepFunctionsApi> {
  const server: Server = createServer((req, res) => void serve(sfn, req, res));
  await listenOnLoopback(server);
  const addr = server.address();
  return {
    endpoint: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`,
    async close() {
      // Let responses in flight finish; cut keep-alive and stuck sockets after a short grace.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const grace = setTimeout(() => server.closeAllConnections(), 200);
      await closed;
      clearTimeout(grace);
    },
  };
}

async function serve(sfn: LocalStepFunctions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const send = (status: number, body: unknown, errorType?: string) => {
    const data = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/x-amz-json-1.0',
      'content-length': Buffer.byteLength(data),
      'x-amzn-requestid': randomUUID(),
      ...(errorType ? { 'x-amzn-errortype': errorType } : {}),
    });
    res.end(data);
  };
  try {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: Record<string, unknown>;
    try {
      body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      throw new SfnApiError('SerializationException', 'request body is not JSON');
    }
    const target = String(req.headers['x-amz-target'] ?? '');
    const op = target.startsWith('AWSStepFunctions.') ? target.slice('AWSStepFunctions.'.length) : '';
    send(200, await dispatch(sfn, op, body));
  } catch (err) {
    if (err instanceof SfnApiError) send(400, { __type: err.type, message: err.message }, err.type);
    else send(500, { __type: 'InternalFailure', message: String((err as Error)?.message ?? err) }, 'InternalFailure');
  }
}

async function dispatch(sfn: LocalStepFunctions, op: string, b: Record<string, unknown>): Promise<unknown> {
  const str = (k: string): string | undefined => (typeof b[k] === 'string' ? (b[k] as string) : undefined);
  const epoch = (d?: Date) => (d ? d.getTime() / 1000 : undefined);
  switch (op) {
    case 'SendTaskSuccess':
      sfn.sendTaskSuccess(str('taskToken') ?? '', str('output') ?? '');
      return {};
    case 'SendTaskFailure':
      sfn.sendTaskFailure(str('taskToken') ?? '', str('error'), str('cause'));
      return {};
    case 'SendTaskHeartbeat':
      sfn.sendTaskHeartbeat(str('taskToken') ?? '');
      return {};
    case 'StartExecution': {
      if (str('stateMachineArn') !== sfn.stateMachineArn) {
        throw new SfnApiError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${String(b.stateMachineArn)}'`);
      }
      let input: unknown = {};
      if (str('input') !== undefined) {
        try {
          input = JSON.parse(str('input')!);
        } catch {
          throw new SfnApiError('InvalidExecutionInput', 'Invalid execution input: not JSON');
        }
      }
      const r = await sfn.startExecution(input, str('name'));
      return { executionArn: r.executionArn, startDate: epoch(r.startDate) };
    }
    case 'DescribeExecution': {
      const d = sfn.describe(str('executionArn') ?? '');
      return {
        executionArn: d.arn,
        stateMachineArn: sfn.stateMachineArn,
        name: d.name,
        status: d.status,
        startDate: epoch(d.startDate),
        ...(d.status !== 'RUNNING' ? { stopDate: epoch(d.stopDate) } : {}),
        input: JSON.stringify(d.input),
        inputDetails: { included: true },
        ...(d.status === 'SUCCEEDED' ? { output: JSON.stringify(d.output), outputDetails: { included: true } } : {}),
        ...(d.error !== undefined ? { error: d.error } : {}),
        ...(d.cause !== undefined ? { cause: d.cause } : {}),
      };
    }
    case 'ListExecutions': {
      if (str('stateMachineArn') !== sfn.stateMachineArn) {
        throw new SfnApiError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${String(b.stateMachineArn)}'`);
      }
      const filter = str('statusFilter');
      const all = sfn
        .executions()
        .filter((r) => !filter || r.status === filter)
        .reverse() // newest first
        .map((r) => sfn.describe(r.arn));
      const start = Number(str('nextToken') ?? 0) || 0;
      const max = typeof b.maxResults === 'number' && b.maxResults > 0 ? Math.min(b.maxResults, 1000) : 100;
      const page = all.slice(start, start + max);
      return {
        executions: page.map((r) => ({
          executionArn: r.arn,
          stateMachineArn: sfn.stateMachineArn,
          name: r.name,
          status: r.status,
          startDate: epoch(r.startDate),
          ...(r.status !== 'RUNNING' ? { stopDate: epoch(r.stopDate) } : {}),
        })),
        ...(start + max < all.length ? { nextToken: String(start + max) } : {}),
      };
    }
    case 'StopExecution': {
      const r = sfn.stopExecution(str('executionArn') ?? '', str('error'), str('cause'));
      return { stopDate: epoch(r.stopDate) };
    }
    default:
      throw new SfnApiError('UnknownOperationException', `operation not supported locally: ${op || '(no X-Amz-Target)'}`);
  }
}
