/**
 * The Task resources the local interpreter runs and how: their ARNs, the task-token placeholder,
 * Lambda's error shape and the DynamoDB integrations.
 */
import * as Ddb from '@aws-sdk/client-dynamodb';

/** An error with a Step Functions error name (`name`) and cause (`message`). */
export class StatesError extends Error {
  constructor(name: string, cause: string) {
    super(cause);
    this.name = name;
  }
}

export const TOKEN_PLACEHOLDER = '__sluice_local_task_token__';
/** setTimeout overflows past 2^31-1 ms and would fire at once. */
export const MAX_TASK_TIMEOUT_SECONDS = Math.floor((2 ** 31 - 1) / 1000);
export const LAMBDA_INVOKE = 'arn:aws:states:::lambda:invoke';
export const LAMBDA_INVOKE_TOKEN = 'arn:aws:states:::lambda:invoke.waitForTaskToken';
export const START_EXECUTION = /^arn:aws:states:::states:startExecution(\.sync(:2)?|\.waitForTaskToken)?$/;
export const LAMBDA_ARN = /^arn:aws[a-z-]*:lambda:[^:]*:[^:]*:function:[^:]+(:[^:]+)?$/;
export const DYNAMO_OPTIMIZED = /^arn:aws:states:::dynamodb:(getItem|putItem|updateItem|deleteItem)$/;
export const DYNAMO_SDK = /^arn:aws:states:::aws-sdk:dynamodb:([a-zA-Z]+)$/;

export function deepClone<T>(v: T): T {
  return v === undefined ? (null as T) : (JSON.parse(JSON.stringify(v)) as T);
}

/** Replaces the placeholder token wherever it occurs in a resolved input (also inside strings). */
export function substituteToken(v: unknown, token: string): unknown {
  if (typeof v === 'string') return v.includes(TOKEN_PLACEHOLDER) ? v.split(TOKEN_PLACEHOLDER).join(token) : v;
  if (Array.isArray(v)) return v.map((x) => substituteToken(x, token));
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substituteToken(x, token)]));
  }
  return v;
}

export function functionName(ref: string): string {
  // arn:aws:lambda:region:account:function:name[:qualifier], account:function:name, name[:qualifier]
  const m = /(?:^|:)function:([^:]+)/.exec(ref);
  if (m) return m[1];
  return ref.split(':')[0];
}

/** Lambda reports a thrown error as errorType/errorMessage; Step Functions uses errorType as the Error name. */
export function lambdaFailure(err: unknown): StatesError {
  const e = err as { name?: unknown; message?: unknown; stack?: unknown };
  const errorType = typeof e?.name === 'string' && e.name ? e.name : 'Error';
  const errorMessage = typeof e?.message === 'string' ? e.message : String(err);
  const trace = typeof e?.stack === 'string' ? e.stack.split('\n') : [];
  return new StatesError(errorType, JSON.stringify({ errorType, errorMessage, trace }));
}

/** A DynamoDB task (optimized or SDK integration), run with the client given to the machine. */
export async function runDynamoTask(client: Ddb.DynamoDBClient | undefined, resource: string, input: unknown): Promise<unknown> {
  const optimized = DYNAMO_OPTIMIZED.exec(resource);
  const action = optimized?.[1] ?? DYNAMO_SDK.exec(resource)?.[1];
  if (!client || !action) throw new StatesError('States.Runtime', `cannot run Resource ${resource}`);
  const commandName = `${action[0].toUpperCase()}${action.slice(1)}Command`;
  type AnyCommand = Parameters<Ddb.DynamoDBClient['send']>[0];
  const Command = (Ddb as unknown as Record<string, (new (i: unknown) => AnyCommand) | undefined>)[commandName];
  if (!Command) throw new StatesError('States.Runtime', `unknown DynamoDB action ${action}`);
  try {
    const res = (await client.send(new Command(input))) as unknown as Record<string, unknown>;
    const { $metadata: _ignored, ...rest } = res;
    return deepClone(rest);
  } catch (err) {
    const name = (err as Error)?.name ?? 'Error';
    // Error names differ between the optimized and the SDK integration.
    throw new StatesError(optimized ? `DynamoDB.${name}` : `DynamoDb.${name}`, (err as Error)?.message ?? String(err));
  }
}
