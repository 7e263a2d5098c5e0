/**
 * Fraud detection with broadcast rules: transactions are keyed by account; rules (per merchant
 * category: a single-payment limit, and a burst limit — how many payments within a minute) arrive
 * on their own stream and are broadcast to every instance. An alert names the rule it broke.
 */
import {
  dynamoUpsertSink,
  job,
  listState,
  mapState,
  WatermarkStrategies,
  type KeyedBroadcastProcessFunction,
} from 'sluice';

export interface Txn {
  readonly id: string;
  readonly account: string;
  readonly category: string;
  readonly amount: number;
  readonly ts: number;
}

export interface Rule {
  readonly category: string;
  readonly maxAmount: number;
  /** payments allowed per account within a minute */
  readonly maxPerMinute: number;
}

export interface Alert {
  readonly txn: string;
  readonly account: string;
  readonly rule: 'amount' | 'burst';
  readonly detail: string;
}

export const rules = mapState<string, Rule>('rules');
const recent = listState<number>('recent-payments');

export const detect: KeyedBroadcastProcessFunction<string, Txn, Rule, Alert> = {
  state: [recent],
  processElement(t, ctx, out) {
    const rule = ctx.getBroadcastState(rules).get(t.category);
    if (!rule) return;
    if (t.amount > rule.maxAmount) out.collect({ txn: t.id, account: t.account, rule: 'amount', detail: `${t.amount} > ${rule.maxAmount}` });
    const window = ctx.getListState(recent);
    const inMinute = [...window.get().filter((ts) => ts > t.ts - 60_000), t.ts];
    window.update(inMinute);
    if (inMinute.length > rule.maxPerMinute) out.collect({ txn: t.id, account: t.account, rule: 'burst', detail: `${inMinute.length} payments in a minute` });
  },
  processBroadcastElement(rule, ctx) {
    ctx.getBroadcastState(rules).put(rule.category, rule);
  },
};

const fraud = job('fraud-detection', { maxParallelism: 64, checkpoint: { intervalMs: 5_000 } });
const ruleStream = fraud.source<Rule>({ name: 'rules', shards: 1 }).broadcast(rules as never);
const alerts = fraud
  .source<Txn>({ name: 'transactions', shards: 2, timestamp: (t) => t.ts, watermarks: WatermarkStrategies.boundedOutOfOrderness(5_000) })
  .keyBy((t) => t.account, { parallelism: 2 })
  .connect(ruleStream)
  .process(detect, { name: 'detect' });
alerts.sinkTo(dynamoUpsertSink<Alert>({ name: 'alerts', key: (a) => `${a.txn}|${a.rule}` }));

export default fraud;
