/**
 * One set of emulators for a test file: started before its tests (on free loopback ports), stopped
 * after them. Returns a getter, as the emulators exist only once `beforeAll` has run.
 */
import { afterAll, beforeAll } from 'vitest';
import { startEmulators, type LocalEmulators } from '../local/emulators.js';

export function useEmulators(): () => LocalEmulators {
  let emulators: LocalEmulators | undefined;
  beforeAll(async () => {
    emulators = await startEmulators();
  }, 120_000);
  afterAll(async () => {
    await emulators?.stop();
  });
  return () => {
    if (!emulators) throw new Error('the emulators are not started yet (use them inside a test or a hook)');
    return emulators;
  };
}
