/**
 * The cost model (bench/cost.ts, what `sluice cost` prints) against the template SluiceJob
 * synthesizes: the alarms and the dashboard it prices are the ones the stack bills, and the idle
 * figure stays within its target. A resource added to the stack without its price fails here.
 */
import { describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { ackReadsPerCheckpoint, byService, monthlyCost, ROUND_STANDARD_TRANSITIONS, type MonthlyCost } from '../bench/cost.js';
import { keyedCountJob } from '../bench/jobs.js';
import { SECONDS_PER_MONTH } from '../bench/prices.js';
import { runPipeline } from '../bench/pipeline.js';
import { defaultBatching, fromMeter, stageFlows, type Batching } from '../bench/stage-activity.js';
import { coordinatorDefinition } from './coordinator-definition.js';
import { COORDINATOR_STATES as S } from './coordinator-state-machine.js';
import { planJob } from '../shared/plan/planner.js';
import { synthJob, threeStageJob } from './test-support.js';

const quantity = (c: MonthlyCost, prefix: string) => c.lines.filter((l) => l.item.startsWith(prefix)).reduce((a, l) => a + l.quantity, 0);

/** The stack's alarms: on AWS metrics, and on Metrics Insights queries (with the series each query matches). */
function alarmsOf(template: ReturnType<typeof synthJob>['template']): { standard: number; insights: string[] } {
  const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map((r) => r.Properties as { Metrics?: Array<{ Expression?: string }> });
  const insights = alarms.flatMap((a) => (a.Metrics ?? []).map((m) => m.Expression).filter((e): e is string => e?.startsWith('SELECT') ?? false));
  return { standard: alarms.length - insights.length, insights };
}

describe('the cost model prices what the stack bills', () => {
  for (const [name, job, idleCoordinator] of [
    ['clickstream', clickstream, true],
    ['three stages, idle coordinator off', threeStageJob(), false],
  ] as const) {
    it(`alarms and dashboard: ${name}`, () => {
      const plan = planJob(job);
      const { template } = synthJob(job, { idleCoordinator });
      const c = monthlyCost({ plan, eventsPerSecond: 0, idleCoordinator });
      const { standard, insights } = alarmsOf(template);
      expect(quantity(c, 'alarms on AWS metrics')).toBe(standard);
      // a query over the coordinator's metrics matches its one series; over DeadLetters, one per stage
      const series = insights.reduce((a, q) => a + (q.includes('DeadLetters') ? plan.stages.length : 1), 0);
      expect(quantity(c, 'Metrics Insights alarms')).toBe(series);
      expect(quantity(c, 'dashboard')).toBe(Object.keys(template.findResources('AWS::CloudWatch::Dashboard')).length);
      expect(quantity(monthlyCost({ plan, eventsPerSecond: 0, idleCoordinator, dashboard: true }), 'dashboard')).toBe(1);
    });
  }

  it('prices the steady metrics the functions publish: two per stage, the coordinator\'s completed checkpoints only where an alarm or the dashboard reads them, the detailed ones only with detailedMetrics', () => {
    const plan = planJob(clickstream);
    expect(quantity(monthlyCost({ plan, eventsPerSecond: 1000 }), 'EMF custom metrics')).toBe(plan.stages.length * 2);
    expect(quantity(monthlyCost({ plan, eventsPerSecond: 1000, idleCoordinator: false }), 'EMF custom metrics')).toBe(plan.stages.length * 2 + 1);
    expect(quantity(monthlyCost({ plan, eventsPerSecond: 1000, dashboard: true }), 'EMF custom metrics')).toBe(plan.stages.length * 2 + 1);
    expect(quantity(monthlyCost({ plan, eventsPerSecond: 1000, detailedMetrics: true }), 'EMF custom metrics')).toBe(plan.stages.length * 6 + 2);
    expect(quantity(monthlyCost({ plan, eventsPerSecond: 0 }), 'EMF custom metrics')).toBe(0);
  });

  it('an idle job costs at most $1 a month beyond its shards', () => {
    const c = monthlyCost({ plan: planJob(clickstream), eventsPerSecond: 0 });
    expect(c.usd).toBeLessThanOrEqual(1);
  });

  it('on-demand source streams: their stream-hours are reported apart, the streams between stages stay priced per shard', () => {
    const plan = planJob(threeStageJob());
    const provisioned = monthlyCost({ plan, eventsPerSecond: 1000 });
    const onDemand = monthlyCost({ plan, eventsPerSecond: 1000, kinesisMode: 'on-demand' });
    const inner = plan.stages.filter((s) => s.input.kind !== 'source').reduce((a, s) => a + s.parallelism, 0);
    const all = plan.stages.reduce((a, s) => a + s.parallelism, 0);
    expect(provisioned.shardsUsd).toBeCloseTo(all * 730 * 0.015, 6);
    expect(onDemand.shardsUsd).toBeCloseTo(inner * 730 * 0.015 + 730 * 0.04, 6);
    expect(quantity(onDemand, 'on-demand retrieval')).toBeGreaterThan(0);
  });

  it('prices an Express round at the Standard states the synthesized workflow enters per round', () => {
    const { definition } = coordinatorDefinition(clickstream, { expressCheckpoints: true });
    const states = definition.States as Record<string, { Next?: string; Choices?: Array<{ Next: string; StringEquals?: string; Or?: Array<{ StringEquals?: string }> }> }>;
    // a round that ran out of time after a commit: Allocate → Round → Rounded? → Pause → Allocate
    const path: string[] = [S.allocate];
    for (let at = states[S.allocate]!.Next!; at !== S.allocate; ) {
      path.push(at);
      const st = states[at]!;
      at = st.Choices ? st.Choices.find((c) => c.StringEquals === 'budget' || c.Or?.some((o) => o.StringEquals === 'budget'))!.Next : st.Next!;
    }
    expect(path).toEqual([S.allocate, S.round, S.rounded, S.pause]);
    expect(path).toHaveLength(ROUND_STANDARD_TRANSITIONS);
    const p = planJob(clickstream);
    const plan = { ...p, checkpoint: { ...p.checkpoint, intervalMs: 10_000 } };
    const standard = monthlyCost({ plan, eventsPerSecond: 1000, expressCheckpoints: false });
    const express = monthlyCost({ plan, eventsPerSecond: 1000 });
    expect(express.expressCheckpoints).toBe(true);
    expect(express.transitionsPerCheckpoint).toBeLessThan(1);
    const sfn = (c: MonthlyCost) => byService(c).find(([s]) => s === 'Step Functions')![1];
    expect(sfn(standard)).toBeCloseTo(17.92, 1);
    expect(sfn(express)).toBeLessThan(5);
  });

  it('prices the ack reads a round makes after its first wait (free): what is left of the barrier\'s way on the slow side, one a second, and the one that finds them all', () => {
    const p = planJob(clickstream);
    const at = (intervalMs: number) => ({ ...p, checkpoint: { ...p.checkpoint, intervalMs } });
    // two stages, 2 s windows: 4 s on the slow side, 2 s of them (one exchange hop) waited: reads at 2, 3 and 4 s
    expect(ackReadsPerCheckpoint(at(10_000), defaultBatching(at(10_000)))).toBe(3);
    // the reads are the round's own GetItems (read units); the function is invoked to allocate and commit
    const ten = monthlyCost({ plan: at(10_000), eventsPerSecond: 1000 });
    const checkpoints = quantity(ten, 'coordinator writes') / 11;
    expect(quantity(ten, 'coordinator invocations (allocate, commit per checkpoint; its 3 ack reads are DynamoDB reads)') / checkpoints).toBeCloseTo(2, 6);
    // (+ the watchdog's reads)
    expect(quantity(ten, 'coordinator reads') / checkpoints).toBeCloseTo(15 + 3, 0);
    // 5 s windows: 5 s waited of 10 s; the sixth read is the function's poll (after five direct ones)
    expect(ackReadsPerCheckpoint(at(60_000), { ...defaultBatching(at(60_000)), windowMs: 5000 })).toBe(6);
    const slow = monthlyCost({ plan: at(40_000), eventsPerSecond: 1000, batching: { ...defaultBatching(at(40_000)), windowMs: 5000 } });
    expect(quantity(slow, 'coordinator invocations (allocate, commit, 1 ack polls per checkpoint; its 6 ack reads') / (quantity(slow, 'coordinator writes') / 11)).toBeCloseTo(3, 6);
    // no window: no wait, a poll (about a second) per stage
    expect(ackReadsPerCheckpoint(at(2_000), defaultBatching(at(2_000)))).toBe(3);
  });

  it('the default (rounds where allowed and cheaper, as the construct deploys) is the cheaper loop at every pause from 1 s to 70 s', () => {
    const p = planJob(clickstream);
    for (let s = 1; s <= 70; s++) {
      const plan = { ...p, checkpoint: { ...p.checkpoint, intervalMs: s * 1000 } };
      const usd = (expressCheckpoints?: boolean) => monthlyCost({ plan, eventsPerSecond: 1000, ...(expressCheckpoints !== undefined ? { expressCheckpoints } : {}) }).usd;
      const cheaper = s <= 60 ? Math.min(usd(true), usd(false)) : usd(false);
      expect(usd(), `${s} s`).toBeCloseTo(cheaper, 6);
    }
    // rounds the construct refuses are not priced either
    const slow = { ...p, checkpoint: { ...p.checkpoint, intervalMs: 61_000 } };
    expect(() => monthlyCost({ plan: slow, eventsPerSecond: 1000, expressCheckpoints: true })).toThrow(/pause of at most 60 s.*61 s/);
  });
});

describe('the cost model prices the stages\' batch settings', () => {
  const p = planJob(keyedCountJob({ sourceShards: 2, parallelism: 1, checkpointIntervalMs: 10_000 }));
  const at = (batching: Batching) => monthlyCost({ plan: p, eventsPerSecond: 1000, batching });
  const perBatch = ['stage invocations', 'writes: lease positions', 'reads: leases', 'reads: idle item'];

  it('prices by default what SluiceJob deploys for the plan: batch size, window, memory', () => {
    const { template } = synthJob(keyedCountJob({ sourceShards: 2, parallelism: 1, checkpointIntervalMs: 10_000 }));
    const b = monthlyCost({ plan: p, eventsPerSecond: 1000 }).batching;
    expect(b).toEqual(defaultBatching(p));
    for (const r of Object.values(template.findResources('AWS::Lambda::EventSourceMapping'))) {
      const props = r.Properties as { BatchSize: number; MaximumBatchingWindowInSeconds?: number };
      expect(props.BatchSize).toBe(b.batchSize);
      expect((props.MaximumBatchingWindowInSeconds ?? 0) * 1000).toBe(b.windowMs);
    }
    template.hasResourceProperties('AWS::Lambda::Function', { FunctionName: 'sluice-bench-count-s0', MemorySize: b.memoryMb });
  });

  it('a longer window makes fewer batches, and every per-batch line falls with them', () => {
    const oneS = at({ batchSize: 10_000, windowMs: 1000, memoryMb: 512 });
    const fourS = at({ batchSize: 10_000, windowMs: 4000, memoryMb: 512 });
    // 2 source shards and 1 keyed shard, one batch per window each
    expect(oneS.batchesPerSecond).toBeCloseTo(3, 6);
    expect(fourS.batchesPerSecond).toBeCloseTo(0.75, 6);
    for (const item of perBatch) expect(quantity(fourS, item)).toBeCloseTo(quantity(oneS, item) / 4, 0);
    expect(quantity(fourS, 'writes: stage functions')).toBe(quantity(oneS, 'writes: stage functions'));
  });

  it('prices the commit GC\'s deletes: each inline delta once more (a delete is billed by the item\'s size), one write per checkpoint record past the history', () => {
    const c = at({ batchSize: 10_000, windowMs: 2000, memoryMb: 512 });
    const inline = c.lines.find((l) => l.item.startsWith('commit GC deletes'));
    expect(inline).toBeDefined();
    // the default rates: 200 WRU of inline deltas per million events, at 1,000 events/s over 2 stages
    expect(inline!.quantity).toBeCloseTo(200e-6 * 1000 * (p.stages.length / 2) * SECONDS_PER_MONTH + c.checkpointsPerMonth, -3);
    expect(inline!.quantity).toBeGreaterThan(c.checkpointsPerMonth);
  });

  it('a batch size below what a window gathers splits it: 500 events a second per source shard in batches of 100', () => {
    const c = at({ batchSize: 100, windowMs: 2000, memoryMb: 512 });
    const flows = stageFlows(p, 1000, c.batching, { eventBytes: 200, packedBytes: 34, checkpointsPerS: 0 });
    expect(flows.find((f) => f.source)!.batchesPerShardS).toBeCloseTo(5, 6);
    // the keyed stage gets one packed record per source batch: 10 a second, batched per window
    expect(flows.find((f) => !f.source)!.batchesPerShardS).toBeCloseTo(0.5, 6);
  });

  it('memory prices the time waiting on requests, not the CPU (below a full vCPU)', () => {
    const small = at({ batchSize: 10_000, windowMs: 2000, memoryMb: 512 });
    const large = at({ batchSize: 10_000, windowMs: 2000, memoryMb: 1024 });
    expect(quantity(large, 'stage GB-s (1024 MB): waiting')).toBeCloseTo(2 * quantity(small, 'stage GB-s (512 MB): waiting'), 0);
    const cpu = (c: MonthlyCost) => quantity(c, `stage GB-s (${c.batching.memoryMb} MB): CPU`);
    expect(cpu(large)).toBeGreaterThan(cpu(small));
    expect(cpu(large)).toBeLessThan(2 * cpu(small));
  });

  it('counts the batches a metered run of the job makes with a window, from a run without one', async () => {
    const job = keyedCountJob({ sourceShards: 2, parallelism: 1, checkpointIntervalMs: 10_000 });
    const run = (pollEverySeconds: number, maxBatch: number) => runPipeline({ job, eventsPerSecond: 500, seconds: 20, warmupSeconds: 10, checkpointEverySeconds: 10, maxBatch, pollEverySeconds, keys: 1000 });
    const [polled, windowed] = await Promise.all([run(1, 250), run(2, 10_000)]);
    const rates = fromMeter(polled, p);
    const b: Batching = { batchSize: 10_000, windowMs: 2000, memoryMb: 512 };
    const flows = stageFlows(p, 500, b, { eventBytes: 200, packedBytes: rates.perEvent.packedBytes, checkpointsPerS: 0.1 });
    const predicted = flows.reduce((a, f) => a + f.batchesPerShardS * f.shards, 0) * windowed.seconds;
    const metered = windowed.stages.reduce((a, s) => a + s.invocations, 0);
    expect(metered).toBe(30);
    expect(predicted).toBeCloseTo(metered, 0);
    // one position and one lease read per batch, as the model prices them
    expect(windowed.meter.get('dynamodb.write.position').requests).toBe(metered);
    expect(windowed.meter.get('dynamodb.read.lease').requests).toBe(metered);
  });
});

