/**
 * Load for the chaos harness: the CI machine is often busy, and a protocol that only stays live on an
 * idle machine is not live. Two kinds:
 *
 * - `slow:K` — every stage invocation takes K times as long: it waits (K−1) × its own duration before
 *   it returns (so the invocation timeout, the ESM and the checkpoint all see the slow function);
 * - `cpu:N` — N busy-looping node processes compete for the CPU with the emulators and the engine
 *   (started before the seeds, killed by PID after them).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { KinesisHandler } from '../../local/event-source-poller.js';

export type ChaosLoad = { readonly kind: 'slow'; readonly factor: number } | { readonly kind: 'cpu'; readonly hogs: number };

export function parseLoad(text: string): ChaosLoad {
  const m = /^(slow|cpu):(\d+(?:\.\d+)?)$/.exec(text);
  const n = m ? Number(m[2]) : Number.NaN;
  if (m?.[1] === 'slow' && n >= 1 && n <= 50) return { kind: 'slow', factor: n };
  if (m?.[1] === 'cpu' && Number.isInteger(n) && n >= 1 && n <= 16) return { kind: 'cpu', hogs: n };
  throw new Error(`load must be slow:K (1 ≤ K ≤ 50, every handler K× slower) or cpu:N (1 ≤ N ≤ 16 busy processes), got "${text}"`);
}

export function describeLoad(load: ChaosLoad | undefined): string {
  if (!load) return 'none';
  return load.kind === 'slow' ? `every handler ${load.factor}× slower` : `${load.hogs} CPU hog process(es)`;
}

/** Wraps a handler so that it takes `factor` times as long. */
export function slowedHandler(handler: KinesisHandler, factor: number): KinesisHandler {
  if (factor <= 1) return handler;
  return async (event) => {
    const t0 = Date.now();
    const out = await handler(event);
    await new Promise<void>((r) => setTimeout(r, (factor - 1) * (Date.now() - t0)));
    return out;
  };
}

/** Starts the CPU hogs of a `cpu:N` load; the returned function kills them (by PID). */
export function startCpuHogs(load: ChaosLoad | undefined): () => Promise<void> {
  if (load?.kind !== 'cpu') return async () => {};
  const hogs: ChildProcess[] = [];
  for (let i = 0; i < load.hogs; i++) {
    hogs.push(spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
  }
  return async () => {
    await Promise.all(
      hogs.map(
        (h) =>
          new Promise<void>((resolve) => {
            if (h.exitCode !== null || h.pid === undefined) return resolve();
            h.once('exit', () => resolve());
            try {
              process.kill(h.pid, 'SIGKILL');
            } catch {
              resolve(); // already gone
            }
          }),
      ),
    );
  };
}
