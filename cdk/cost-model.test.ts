/**
 * The cost model (bench/cost.ts, what `sluice cost` prints) against the template SluiceJob
 * synthesizes: the alarms and the dashboard it prices are the ones the stack bills, and the idle
 * figure stays within its target. A resource added to the stack without its price fails here.
 */
import { describe, expect, it } from 'vitest';
import clickstream from '../examples/clickstream/job.js';
import { byService, monthlyCost, ROUND_STANDARD_TRANSITIONS, type MonthlyCost } from '../bench/cost.js';
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

  it('prices the steady metrics the functions publish: two per stage and one of the coordinator, the detailed ones only with detailedMetrics', () => {
    const plan = planJob(clickstream);
    expect(quantity(monthlyCost({ plan, eventsPerSecond: 1000 }), 'EMF custom metrics')).toBe(plan.stages.length * 2 + 1);
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

