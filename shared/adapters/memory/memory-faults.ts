/**
 * Fault hooks of the in-memory twins: every twin service runs `before` and `after` hooks around each
 * call, so tests can throttle, fail, delay or block any call, or lose its response (see
 * `memory-ports.ts`). Errors are shaped like the SDK's: only `name` matters to the callers.
 */
import { isThrottling } from '../throttling.js';

/** Names of the operations hooks see. */
export type PortOp =
  | 'control.readLease'
  | 'control.takeOver'
  | 'control.writeDelta'
  | 'control.readDelta'
  | 'control.publishSnapshot'
  | 'control.commitPosition'
  | 'control.ack'
  | 'state.getRows'
  | 'state.applyRows'
  /** one item write of an applyRows call (service hooks only): throwing here crashes mid-flush */
  | 'state.applyRow'
  | 'shards.openShards'
  | 'writer.putAll'
  | 'reader.read'
  | 'deadLetters.put'
  | 'notifier.succeed'
  | 'upsertSink.write'
  | 'collectSink.stage'
  | 'sourceBarriers.announced'
  | 'sourceBarriers.recorded'
  | 'sourceBarriers.record'
  | 'sourceBarriers.crossed'
  /** the coordinator's conditional writes that create an item or open a checkpoint */
  | 'checkpoints.openNext'
  | 'checkpoints.createRescale'
  | 'checkpoints.takeIdle'
  /** the parked token: read back, left on one source lease item, removed from one (wake.ts) */
  | 'checkpoints.parkIdle'
  | 'checkpoints.idleToken'
  | 'checkpoints.markParked'
  | 'checkpoints.clearParked'
  /** one listing of the bucket's delta objects (the coordinator's GC) */
  | 'deltas.list'
  /** one PutRecords/PutRecord request (service hooks only) */
  | 'kinesis.putRecords'
  /** one GetRecords page (service hooks only) */
  | 'kinesis.getRecords';

export interface OpInfo {
  readonly instanceId?: string;
  readonly checkpointId?: number;
  readonly stream?: string;
  readonly shardId?: string;
  /** retry attempt of this call inside the twin (0 first) */
  readonly attempt?: number;
  /** records, rows or writes the call carries */
  readonly size?: number;
}

export interface PortHooks {
  /** runs before the call takes effect: throw to fail it, await to delay or block it */
  before?(op: PortOp, info: OpInfo): void | Promise<void>;
  /** runs after the call took effect, before the caller sees the answer: throw for a lost response */
  after?(op: PortOp, info: OpInfo): void | Promise<void>;
  /**
   * true: the call's response is lost after it took effect and the SDK sends it again (the caller
   * gets the retry's answer), as `lostResponse` does on the emulators
   */
  loseResponse?(op: PortOp, info: OpInfo): boolean;
}

export interface PutEntryInfo {
  readonly stream: string;
  readonly shardId: string;
  /** index of the entry in its PutRecords request */
  readonly index: number;
  readonly data: Uint8Array;
  /** which retry of its entries the request is (0 first), as the writers count them */
  readonly attempt: number;
}

export interface MemoryFaults extends PortHooks {
  /** PutRecords partial failure: true rejects this entry with ProvisionedThroughputExceededException */
  rejectPutEntry?(entry: PutEntryInfo): boolean;
}

/** An error shaped like an AWS SDK exception (only `name` matters to the adapters). */
export function awsError(name: string, message = name): Error {
  const e = new Error(message);
  e.name = name;
  return e;
}

/** A throttling error: the twins (and the AWS adapters) retry these forever. */
export const throttled = (message = 'Rate exceeded') => awsError('ProvisionedThroughputExceededException', message);

export const isThrottlingError = isThrottling;

/** Yields to the event loop (a retry "backoff" that lets other work interleave, without waiting). */
export const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Safety net for tests whose hooks throttle forever (AWS retries forever; a test must not hang). */
export const MAX_THROTTLE_RETRIES = 10_000;

/** Runs one service call with the service hooks: throttling in `before` is retried, as the AWS adapters' `withThrottleRetry` does. */
export async function serviceCall<T>(faults: MemoryFaults, op: PortOp, info: OpInfo, fn: () => T | Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      await faults.before?.(op, attempt ? { ...info, attempt } : info);
    } catch (err) {
      if (isThrottlingError(err) && attempt < MAX_THROTTLE_RETRIES) {
        await yieldTurn();
        continue;
      }
      throw err;
    }
    const result = await fn();
    await faults.after?.(op, info);
    if (faults.loseResponse?.(op, info)) return fn();
    return result;
  }
}
