/** The one side (twin or emulator) a contract suite's tests run against: started before them, stopped after. */
import { afterAll, beforeAll } from 'vitest';

export function contractTarget<T extends { stop(): Promise<void> }>(start: () => Promise<T>): () => T {
  let target: T | undefined;
  beforeAll(async () => {
    target = await start();
  });
  afterAll(async () => {
    await target?.stop();
  });
  return () => {
    if (!target) throw new Error('the contract target did not start');
    return target;
  };
}
