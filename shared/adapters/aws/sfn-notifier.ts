import { SendTaskSuccessCommand } from '@aws-sdk/client-sfn';
import type { TaskNotifier } from '../../runtime/ports.js';
import type { AwsClients } from './clients.js';
import { withThrottleRetry } from './clients.js';

/** The token was already answered, or its task timed out: the coordinator moved on, nothing to do. */
const STALE_TOKEN = new Set(['TaskTimedOut', 'InvalidToken', 'TaskDoesNotExist']);

export class SfnTaskNotifier implements TaskNotifier {
  constructor(private readonly clients: AwsClients) {}

  async succeed(taskToken: string, output: unknown): Promise<void> {
    try {
      await withThrottleRetry(() => this.clients.sfn.send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify(output) })));
    } catch (err) {
      if (!STALE_TOKEN.has((err as { name?: string }).name ?? '')) throw err;
    }
  }
}
