/**
 * `sluice cost <job> --rate <events/s>`: a monthly estimate per service from the job's plan
 * (bench/cost.ts): every item a deployment bills, with the Kinesis shards and the
 * producers' PUTs reported apart. The stage functions' activity per event and per batch is what the
 * bench measured for its keyed job (per event scaled by the job's stages); the batches come from
 * the stages' batch size and window (SluiceJob's defaults for the job unless given), and the
 * estimate says which it assumed. `npm run bench -- --only cost` meters the activity.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { formatMonthlyCost, monthlyCost } from '../bench/cost.js';
import { defaultBatching } from '../bench/stage-activity.js';
import { maxBatchingWindowMs } from '../cdk/stage-batching.js';
import { planJob } from '../shared/plan/planner.js';
import { loadJob } from './load-job.js';

const positive = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative number, got "${v}"`);
  return n;
};

const integer = (name: string, min: number, max: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be an integer between ${min} and ${max}, got "${v}"`);
  return n;
};

export function addCostCommand(program: Command): void {
  program
    .command('cost')
    .description('estimate what a deployed job costs per month, service by service, at an event rate (list prices, us-east-1)')
    .argument('<job>', 'job module')
    .requiredOption('--rate <events/s>', 'events per second into the sources (0: idle)', positive('--rate'))
    .option('--event-bytes <n>', 'bytes per event', positive('--event-bytes'), 200)
    .option('--keys <n>', 'distinct keys held in state (storage)', positive('--keys'), 10_000)
    .option('--on-demand', 'the source streams in on-demand mode (SluiceJob onDemandSources); the streams between stages stay provisioned')
    .option('--dashboard', 'the job\'s CloudWatch dashboard (SluiceJob dashboard: true)')
    .option('--customer-key', 'a customer-managed KMS key (encryptionKey)')
    .option('--log-level <level>', 'the functions\' log level (SluiceJob logLevel): DEBUG and INFO add Lambda\'s platform lines', (v: string) => {
      if (!['DEBUG', 'INFO', 'WARN', 'ERROR'].includes(v)) throw new InvalidArgumentError(`--log-level must be DEBUG, INFO, WARN or ERROR, got "${v}"`);
      return v as 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
    }, 'WARN')
    // both spellings, so that neither given means the construct's default (commander leaves it unset)
    .option('--express', 'checkpoints in Express rounds even where they cost more (SluiceJob expressCheckpoints: true); by default they run where they are allowed and cost less')
    .option('--no-express', 'the Standard loop, three transitions per checkpoint (SluiceJob expressCheckpoints: false)')
    .option('--detailed-metrics', 'the steady metrics published only on request (SluiceJob detailedMetrics: true)')
    .option('--batch-size <n>', 'records per stage invocation (SluiceJob stageSettings batchSize); default: SluiceJob\'s', integer('--batch-size', 1, 10_000))
    .option('--batching-window <s>', 'seconds the event source mappings gather records (stageSettings maxBatchingWindow; 0: none); default: SluiceJob\'s for the job\'s checkpoint interval', integer('--batching-window', 0, 300))
    .option('--memory <MB>', 'the stage functions\' memory (stageSettings memorySize); default: SluiceJob\'s', integer('--memory', 128, 10_240))
    .option('--no-idle', 'the coordinator checkpoints even with no input (idleCoordinator: false)')
    .option('--json', 'print the estimate as JSON')
    .action(async (jobPath: string, o: { rate: number; eventBytes: number; keys: number; onDemand?: boolean; dashboard?: boolean; customerKey?: boolean; idle: boolean; json?: boolean; logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR'; express?: boolean; detailedMetrics?: boolean; batchSize?: number; batchingWindow?: number; memory?: number }) => {
      const plan = planJob(await loadJob(jobPath));
      const deployed = defaultBatching(plan);
      const batching = {
        batchSize: o.batchSize ?? deployed.batchSize,
        windowMs: o.batchingWindow !== undefined ? o.batchingWindow * 1000 : deployed.windowMs,
        memoryMb: o.memory ?? deployed.memoryMb,
      };
      // the construct refuses the same (cdk/job-validation.ts)
      if (batching.windowMs > maxBatchingWindowMs(plan.checkpoint)) {
        throw new InvalidArgumentError(`--batching-window must be at most half of the job's checkpoint.timeoutMs (${maxBatchingWindowMs(plan.checkpoint) / 1000} s), got ${o.batchingWindow}`);
      }
      const c = monthlyCost({
        plan,
        eventsPerSecond: o.rate,
        eventBytes: o.eventBytes,
        keys: o.keys,
        kinesisMode: o.onDemand ? 'on-demand' : 'provisioned',
        customerKey: o.customerKey ?? false,
        idleCoordinator: o.idle,
        dashboard: o.dashboard ?? false,
        logLevel: o.logLevel,
        detailedMetrics: o.detailedMetrics ?? false,
        ...(o.express !== undefined ? { expressCheckpoints: o.express } : {}),
        batching,
      });
      if (o.json) {
        console.log(JSON.stringify(c, null, 2));
        return;
      }
      const given = (v: number | undefined) => (v === undefined ? ' (default)' : '');
      console.log(
        `${plan.job} at ${o.rate} events/s, checkpoint every ${plan.checkpoint.intervalMs / 1000} s${c.expressCheckpoints ? ' in Express rounds' : ' (Standard loop)'}, per month:\n` +
          `stages: batchSize ${batching.batchSize.toLocaleString('en-US')}${given(o.batchSize)}, ` +
          `${batching.windowMs > 0 ? `${batching.windowMs / 1000} s window` : 'no window'}${o.batchingWindow === undefined ? ' (default: a fifth of the time between checkpoints, whole seconds, at most 5 s)' : ''}, ` +
          `${batching.memoryMb} MB${given(o.memory)}: ${c.batchesPerSecond.toFixed(2)} batches a second\n${formatMonthlyCost(c)}`,
      );
    });
}
