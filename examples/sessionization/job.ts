/**
 * Sessionization of a clickstream: a user's clicks with gaps shorter than 30 minutes form a session;
 * for each session, emit its length, duration and pages. Event-time session windows; clicks may
 * arrive up to 10 seconds out of order.
 */
import { EventTimeSessionWindows, dynamoUpsertSink, job, WatermarkStrategies } from 'sluice';

export interface Click {
  readonly userId: string;
  readonly url: string;
  readonly ts: number;
}

export interface Session {
  readonly userId: string;
  readonly start: number;
  readonly end: number;
  readonly clicks: number;
  readonly pages: string[];
}

export const SESSION_GAP_MS = 30 * 60_000;

const sessions = job('sessionization', { maxParallelism: 64, checkpoint: { intervalMs: 5_000 } });

const perSession = sessions
  .source<Click>({
    name: 'clicks',
    shards: 2,
    timestamp: (c) => c.ts,
    watermarks: WatermarkStrategies.boundedOutOfOrderness(10_000, { idleTimeoutMs: 60_000 }),
  })
  .keyBy((c) => c.userId, { parallelism: 2 })
  .window(EventTimeSessionWindows.withGap(SESSION_GAP_MS))
  .process<Session>(
    {
      process(userId, window, clicks, out) {
        const sorted = [...clicks].sort((a, b) => a.ts - b.ts);
        out.collect({
          userId: String(userId),
          start: sorted[0]!.ts,
          end: sorted[sorted.length - 1]!.ts,
          clicks: sorted.length,
          pages: [...new Set(sorted.map((c) => c.url))],
        });
        void window;
      },
    },
    { name: 'session' },
  );

perSession.sinkTo(dynamoUpsertSink<Session>({ name: 'sessions', key: (s) => `${s.userId}|${s.start}` }));

export default sessions;
