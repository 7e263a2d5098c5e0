/**
 * A lost response on the emulated stack: every kind of write the engine makes (conditional
 * DynamoDB writes of instances and coordinator, PutRecords, S3 objects, Step Functions task answers)
 * may be applied, its response lost, and sent again by the SDK. A conditional write whose retry meets
 * its own earlier write must take it as its own success (a write token, read back): a takeover is not
 * fenced, a state flush is not redone, and no invocation fails for it. Without the token read-back
 * (`ownConditionalWrite` answering "someone else wrote"), the retried takeovers report FencedError
 * (`fenced-write-rejected`) and their invocations fail.
 */
import { describe, expect, it } from 'vitest';
import { useEmulators } from '../emulators-fixture.js';
import { runSeed } from './harness.js';
import { expectCleanSeed } from './expect-seed.js';

describe('chaos: lost responses on the emulated stack', () => {
  const emulators = useEmulators();

  it('a conditional write whose SDK retry meets its own earlier write succeeds: no takeover fenced by its own write, exact outputs', async () => {
    const r = await runSeed(312, emulators(), { prefixTag: '-lr', variant: 'two-stage', records: 80, input: { bursts: 6, gapMs: 600, keys: 4 }, rates: { 'lost-response': 0.3 } });
    const msg = expectCleanSeed(r);
    const conditionalLost = (r.observed.get('lost-response:UpdateCommand') ?? 0) + (r.observed.get('lost-response:PutCommand') ?? 0);
    expect(conditionalLost, msg).toBeGreaterThan(0);
    // without the read-back, retried takeovers are fenced (3 on this seed) and their invocations fail
    // with them; failed invocations are not asserted here, as a slow machine can time one out
    expect(r.observed.get('fenced-write-rejected') ?? 0, msg).toBe(0);
  }, 240_000);
});
