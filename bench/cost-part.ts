/**
 * `npm run bench -- --only cost`: the monthly bill of the bench's keyed job (two stages, 10 s
 * checkpoints) idle and at 1,000 events/s, from a metered in-process run (bench/pipeline.ts) and
 * the synthesized coordinator workflow. Ends with
 * `cost: idle_usd_month=… active_usd_month_1k=… transitions_per_checkpoint=… shards_usd_month=…`;
 * the idle and active figures exclude the shard-hours and the producers' PUTs (printed apart).
 */
import { planJob } from '../shared/plan/planner.js';
import { transitionsPerCheckpoint, type AslState } from './cost.js';
import { keyedCountJob } from './jobs.js';
import { formatMonthlyCost, fromMeter, monthlyCost } from './monthly-cost.js';
import { runPipeline } from './pipeline.js';

export async function runCostPart(log: (line: string) => void, quick = false): Promise<string> {
  const job = keyedCountJob({ sourceShards: 2, parallelism: 1, checkpointIntervalMs: 10_000 });
  const plan = planJob(job);
  const { cachedCoordinatorDefinition } = await import('../local/coordinator-cache.js');
  const transitions = transitionsPerCheckpoint(cachedCoordinatorDefinition(job).definition.States as unknown as Record<string, AslState>);
  log(`coordinator happy path: ${transitions.path.join(' → ')} → ${transitions.path[0]} (${transitions.count} transitions per checkpoint)`);
  const eps = 1_000;
  log(`metering the job in process at ${eps} ev/s…`);
  const r = await runPipeline({ job, eventsPerSecond: eps, seconds: quick ? 10 : 30, checkpointEverySeconds: 10, maxBatch: 500, keys: 10_000, warmupSeconds: 10 });
  const idle = monthlyCost({ plan, eventsPerSecond: 0, transitionsPerCheckpoint: transitions.count });
  const active = monthlyCost({ plan, eventsPerSecond: eps, activity: fromMeter(r, eps, plan), transitionsPerCheckpoint: transitions.count });
  log(`\nidle (no events, ${plan.checkpoint.intervalMs / 1000} s interval), per month:\n${formatMonthlyCost(idle)}`);
  log(`\n${eps} events/s, per month:\n${formatMonthlyCost(active)}`);
  return (
    `cost: idle_usd_month=${idle.usd.toFixed(2)} active_usd_month_1k=${active.usd.toFixed(2)} ` +
    `transitions_per_checkpoint=${transitions.count} shards_usd_month=${active.shardsUsd.toFixed(2)}`
  );
}
