/**
 * `npm run bench -- --only cost`: the monthly bill of the bench's keyed job (two stages) idle and
 * at 1,000 events/s with 10 s checkpoints — as deployed by default (Express rounds), and in the
 * Standard loop — and with 60 s checkpoints (the Standard loop, the default there), from metered
 * in-process runs (bench/pipeline.ts) and the synthesized coordinator workflow. Each run first warms up until every key was touched several times, so that what is
 * metered is the steady state (state reads of replaced environments are a line of the model).
 * Ends with `cost: idle_usd_month=… active_usd_month_1k=… transitions_per_checkpoint=… shards_usd_month=…`
 * for the default deployment (transitions: the Standard ones per checkpoint, a round's spread over its
 * checkpoints); the idle and active figures exclude the shard-hours and the producers' PUTs (printed apart).
 */
import type { Plan } from '../shared/plan/plan.js';
import { planJob } from '../shared/plan/planner.js';
import { materializeEvery } from '../shared/runtime/changelog.js';
import { batchingWords, byService, formatMonthlyCost, monthlyCost, transitionsPerCheckpoint, type AslState, type MonthlyCost } from './cost.js';
import { keyedCountJob } from './jobs.js';
import { runPipeline } from './pipeline.js';
import { defaultBatching, fromMeter, type Batching, type StageRates } from './stage-activity.js';

export interface CostPartResult {
  readonly line: string;
  readonly transitions: { count: number; path: string[] };
  /** idle, then 1,000 ev/s at 10 s checkpoints (the default: Express rounds), the same in the Standard loop, then at 60 s */
  readonly scenarios: MonthlyCost[];
}

const KEYS = 10_000;
/** the stage functions' DynamoDB writes, by what they write (metering.ts) */
const WRITE_KINDS = ['state', 'delta', 'position', 'pointer', 'ack', 'takeover', 'sink'] as const;
const EPS = 1_000;

/** the stage settings SluiceJob deployed before batching windows: what the earlier figures priced */
const EARLIER: Batching = { batchSize: 500, windowMs: 0, memoryMb: 1024 };

async function metered(intervalS: number, quick: boolean, transitions: number, log: (line: string) => void): Promise<{ plan: Plan; cost: MonthlyCost; standard: MonthlyCost; rates: StageRates }> {
  const job = keyedCountJob({ sourceShards: 2, parallelism: 1, checkpointIntervalMs: intervalS * 1000 });
  const plan = planJob(job);
  // at 1,000 ev/s over 10,000 keys, 60 s touch every key about six times (all but 0.25 % of them);
  // both spans are whole periods of materializeEvery, so the metered one holds its share of the
  // state table's writes (one application per period), not none or two
  const periodS = materializeEvery(plan.checkpoint) * intervalS;
  const warmupSeconds = quick ? intervalS : Math.ceil(60 / periodS) * periodS;
  const seconds = quick ? intervalS : Math.ceil(Math.max(60, 3 * intervalS) / periodS) * periodS;
  log(`metering the job in process at ${EPS} ev/s, ${intervalS} s checkpoints (${warmupSeconds} s warm-up, ${seconds} s metered)…`);
  // metered with the batch settings SluiceJob deploys (the window in whole seconds is how often a shard gets a batch)
  const deployed = defaultBatching(plan);
  const r = await runPipeline({ job, eventsPerSecond: EPS, seconds, checkpointEverySeconds: intervalS, maxBatch: deployed.batchSize, pollEverySeconds: Math.max(1, deployed.windowMs / 1000), keys: KEYS, warmupSeconds });
  log(`  stage functions' writes per checkpoint (WRU): ${WRITE_KINDS.map((k) => `${k} ${((r.meter.get(`dynamodb.write.${k}`).units * intervalS) / seconds).toFixed(1)}`).join(', ')}; requests per checkpoint: ${((r.meter.sum('dynamodb.write.').requests * intervalS) / seconds).toFixed(1)}`);
  // per event and per batch; the batches are priced from the deployed batch settings, not this run's polls
  const rates = fromMeter(r, plan);
  const fmt = (x: number) => x.toPrecision(3);
  log(`  rates: per event cpu ${fmt(rates.perEvent.cpuS * 1e6)} µs, io ${fmt(rates.perEvent.ioS * 1e6)} µs, wru ${fmt(rates.perEvent.wru)}, rru ${fmt(rates.perEvent.rru)}, s3 puts ${fmt(rates.perEvent.s3Puts)}, packed ${fmt(rates.perEvent.packedBytes)} bytes; per batch wru ${fmt(rates.perBatch.wru)}, rru ${fmt(rates.perBatch.rru)}, io ${fmt(rates.perBatch.ioS * 1e3)} ms, PutRecords ${fmt(rates.perBatch.putIoS * 1e3)} ms (${r.stages.reduce((a, s) => a + s.invocations, 0)} batches metered)`);
  const earlier = monthlyCost({ plan, eventsPerSecond: EPS, keys: KEYS, rates, batching: EARLIER, transitionsPerCheckpoint: transitions });
  const earlierStandard = monthlyCost({ plan, eventsPerSecond: EPS, keys: KEYS, rates, batching: EARLIER, transitionsPerCheckpoint: transitions, expressCheckpoints: false });
  log(`  with the earlier stage settings (${batchingWords(EARLIER)}, ${EARLIER.memoryMb} MB): ${earlier.batchesPerSecond.toFixed(2)} batches/s, active_usd_month_1k=${earlier.usd.toFixed(2)} (Standard loop ${earlierStandard.usd.toFixed(2)})`);
  return {
    plan,
    rates,
    // as SluiceJob deploys it by default (Express rounds where they are allowed and cost less)
    cost: monthlyCost({ plan, eventsPerSecond: EPS, keys: KEYS, rates, transitionsPerCheckpoint: transitions }),
    // the same job in the Standard loop (expressCheckpoints: false): the stage functions do the same work
    standard: monthlyCost({ plan, eventsPerSecond: EPS, keys: KEYS, rates, transitionsPerCheckpoint: transitions, expressCheckpoints: false }),
  };
}

export async function runCostPart(log: (line: string) => void, quick = false): Promise<CostPartResult> {
  const job = keyedCountJob({ sourceShards: 2, parallelism: 1, checkpointIntervalMs: 10_000 });
  const plan = planJob(job);
  const { cachedCoordinatorDefinition } = await import('../local/coordinator-cache.js');
  const transitions = transitionsPerCheckpoint(cachedCoordinatorDefinition(job).definition.States as unknown as Record<string, AslState>);
  log(`coordinator happy path: ${transitions.path.join(' → ')} → ${transitions.path[0]} (${transitions.count} transitions per checkpoint)`);
  const idle = monthlyCost({ plan, eventsPerSecond: 0, keys: KEYS, transitionsPerCheckpoint: transitions.count });
  const { cost: active, standard } = await metered(10, quick, transitions.count, log);
  const slow = (await metered(60, quick, transitions.count, log)).cost;
  log(`\nidle (no events, ${plan.checkpoint.intervalMs / 1000} s interval), per month:\n${formatMonthlyCost(idle)}`);
  for (const c of [active, standard, slow]) {
    log(`\n${EPS} events/s, ${c.checkpointIntervalS} s checkpoints ${c.expressCheckpoints ? 'in Express rounds' : 'in the Standard loop'}${c === standard ? ' (expressCheckpoints: false)' : ' (the default)'}, stages ${batchingWords(c.batching)}, ${c.batching.memoryMb} MB (${c.batchesPerSecond.toFixed(2)} batches/s), per month:\n${formatMonthlyCost(c)}`);
    log(`by service: ${byService(c).map(([s, usd]) => `${s} $${usd.toFixed(2)}`).join(', ')}`);
  }
  log(`\nwith the Standard loop (expressCheckpoints: false): active_usd_month_1k=${standard.usd.toFixed(2)} transitions_per_checkpoint=${standard.transitionsPerCheckpoint}`);
  log(`with 60 s checkpoints (checkpoint.intervalMs: 60_000): active_usd_month_1k=${slow.usd.toFixed(2)}`);
  const line =
    `cost: idle_usd_month=${idle.usd.toFixed(2)} active_usd_month_1k=${active.usd.toFixed(2)} ` +
    `transitions_per_checkpoint=${Number(active.transitionsPerCheckpoint.toFixed(2))} shards_usd_month=${active.shardsUsd.toFixed(2)}`;
  return { line, transitions, scenarios: [idle, active, standard, slow] };
}
