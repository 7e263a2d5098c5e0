/**
 * `sluice cost <job> --rate <events/s>`: a monthly estimate per service from the job's plan
 * (bench/cost.ts): every item a deployment bills, with the Kinesis shards and the
 * producers' PUTs reported apart. The stage functions' activity per event is what the bench
 * measured for its keyed job, scaled by the job's stages; `npm run bench -- --only cost` meters it.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { formatMonthlyCost, monthlyCost } from '../bench/cost.js';
import { planJob } from '../shared/plan/planner.js';
import { loadJob } from './load-job.js';

const positive = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative number, got "${v}"`);
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
    .option('--no-idle', 'the coordinator checkpoints even with no input (idleCoordinator: false)')
    .option('--json', 'print the estimate as JSON')
    .action(async (jobPath: string, o: { rate: number; eventBytes: number; keys: number; onDemand?: boolean; dashboard?: boolean; customerKey?: boolean; idle: boolean; json?: boolean; logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR'; express?: boolean; detailedMetrics?: boolean }) => {
      const plan = planJob(await loadJob(jobPath));
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
      });
      if (o.json) {
        console.log(JSON.stringify(c, null, 2));
        return;
      }
      console.log(`${plan.job} at ${o.rate} events/s, checkpoint every ${plan.checkpoint.intervalMs / 1000} s${c.expressCheckpoints ? ' in Express rounds' : ' (Standard loop)'}, per month:\n${formatMonthlyCost(c)}`);
    });
}
