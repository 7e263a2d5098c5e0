/**
 * Crash points of the coordinator's tasks: every write a task sends can be the last thing it does,
 * right before or right after the write takes effect.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { AwsClients } from '../../shared/adapters/aws/clients.js';
import { ChaosCrash } from './schedule.js';

/** The coordinator task running in this async context (its writes are crash points). */
const coordinatorTask = new AsyncLocalStorage<{ readonly task: string; writes: number }>();

/** Runs every coordinator task in its own context, so that its writes (and only its) can crash. */
export function inCoordinatorTask<I extends { action: string }, O>(run: (input: I) => Promise<O>): (input: I) => Promise<O> {
  return (input) => coordinatorTask.run({ task: input.action, writes: 0 }, () => run(input));
}

/** True inside a coordinator task (see inCoordinatorTask). */
export const inCoordinatorTaskNow = (): boolean => coordinatorTask.getStore() !== undefined;

/** Commands that change something: the crash points of the coordinator's tasks. */
const WRITE_COMMANDS = new Set([
  'PutCommand',
  'UpdateCommand',
  'DeleteCommand',
  'BatchWriteCommand',
  'PutItemCommand',
  'UpdateItemCommand',
  'DeleteItemCommand',
  'PutRecordCommand',
  'PutRecordsCommand',
  'UpdateShardCountCommand',
  'PutObjectCommand',
  'DeleteObjectCommand',
  'DeleteObjectsCommand',
]);

export function isWriteCommand(cmd: object): boolean {
  return WRITE_COMMANDS.has(cmd.constructor.name);
}

/** Where a coordinator task is about to write: its action and the write's number in it (1-based). */
export interface CoordinatorWritePoint {
  readonly task: string;
  readonly write: number;
  readonly command: string;
}

/**
 * Patches the clients a Coordinator uses (in place): every write sent inside a coordinator task
 * (see inCoordinatorTask) asks `decide` whether the task dies right before it, right after it, or
 * not at all. A crash after the write is a lost response too: the write took effect, the task saw an
 * error (as a Lambda timeout or an SDK retry that exhausted itself would).
 */
export function crashCoordinatorWrites(clients: AwsClients, decide: (where: CoordinatorWritePoint) => 'before' | 'after' | undefined): void {
  for (const service of ['doc', 'kinesis', 's3'] as const) {
    const client = clients[service] as unknown as { send: (cmd: object, ...rest: unknown[]) => Promise<unknown> };
    const send = client.send.bind(client);
    client.send = async (cmd: object, ...rest: unknown[]) => {
      const ctx = coordinatorTask.getStore();
      if (!ctx || !isWriteCommand(cmd)) return send(cmd, ...rest);
      const where = { task: ctx.task, write: ++ctx.writes, command: cmd.constructor.name };
      const when = decide(where);
      const crash = () => new ChaosCrash('coordinator-crash-at-write', `coordinator ${where.task}, ${when} write #${where.write} (${where.command})`);
      if (when === 'before') throw crash();
      const out = await send(cmd, ...rest);
      if (when === 'after') throw crash();
      return out;
    };
  }
}
