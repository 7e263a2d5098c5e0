/**
 * The chaos job: a running sum per key, built only with the public API, so the chaos harness drives
 * exactly what a user would deploy.
 *
 * Input records are JSON `{ id, key, value, poison? }`. Some input is poison on purpose: lines that
 * are not JSON (the source cannot decode them), `poison: 'map'` (the first map throws) and
 * `poison: 'process'` (the keyed function throws before touching state). With the `dead-letter`
 * policy each of them must land in the dead letters exactly once and nowhere else.
 *
 * Outputs, per input record that is not poison:
 * - the `totals` DynamoDB upsert sink: the key's running `{ sum, count }` (idempotent, versioned);
 * - the `outputs` collect sink: `{ id, key, sum }`, staged per epoch and published at commit
 *   (transactional): exactly-once means each id is published once, and per key the published sums
 *   form the running-sum chain.
 *
 * Two shapes:
 * - `two-stage`: source → parse/map → keyBy → process → sinks (s0 → s1);
 * - `three-stage`: source → map → rebalance → map → keyBy → process → sinks (s0 → s1 → s2), so an
 *   inner stateless stage with a round-robin exchange sits between the source and the keyed stage.
 */
import { collectSink, dynamoUpsertSink, job, valueState } from '../../shared/api/index.js';
import type { Job, KeyedProcessFunction } from '../../shared/api/index.js';

export type ChaosVariant = 'two-stage' | 'three-stage';

/** What producers put on the source stream (before any poisoning). */
export interface ChaosInput {
  readonly id: string;
  readonly key: string;
  readonly value: number;
  /** where the record must fail: in the first map, or in the keyed process function */
  readonly poison?: 'map' | 'process';
  /** ballast carried to the keyed stage (large envelopes: several packets per channel and batch) */
  readonly pad?: string;
}

export interface ChaosOutput {
  readonly id: string;
  readonly key: string;
  readonly sum: number;
}

export interface ChaosTotal {
  readonly key: string;
  readonly sum: number;
  readonly count: number;
}

interface Totals {
  sum: number;
  count: number;
  /** with `keepPadInState`: the last record's ballast (a state value larger than a DynamoDB item) */
  pad?: string;
}

export const SOURCE_NAME = 'input';
export const TOTALS_SINK = 'totals';
export const OUTPUTS_SINK = 'outputs';

export interface ChaosJobOptions {
  readonly variant?: ChaosVariant;
  /** shards of the source stream; @default 2 */
  readonly sourceShards?: number;
  /** shards of each inner stream; @default 2 */
  readonly innerShards?: number;
  /** checkpoint timeout (a short one makes slow acks abort checkpoints); @default 2000 */
  readonly checkpointTimeoutMs?: number;
  /** keep each key's last ballast (`pad`) in its state: state values larger than a DynamoDB item (§6) */
  readonly keepPadInState?: boolean;
  /** the job name (names no resources by itself: the runner's prefix does) */
  readonly name?: string;
  /**
   * the keyed function also sets a processing-time timer per record, due at the next tick, whose
   * callback reads the key's state and emits nothing: timers due around a reshard of the keyed
   * stage (outputs unchanged)
   */
  readonly timers?: boolean;
  /**
   * the keyed function throws for every record of this key, after updating the key's state and
   * emitting its output (a bug that hits one key forever): each such record must be dead-lettered,
   * its state change and output undone, and nothing else held up
   */
  readonly failingKey?: string;
  /** every how many checkpoints the keyed state is applied to the state table (`checkpoint.materializeEvery`); @default the plan's */
  readonly materializeEvery?: number;
  /** the job's processing guarantee; @default 'exactly-once' */
  readonly mode?: 'exactly-once' | 'at-least-once';
  /** the job's `checkpoint.maxInFlightRecords` (a source shard's credit window); @default the engine's */
  readonly maxInFlightRecords?: number;
}

function parseInput(raw: unknown): ChaosInput {
  const r = raw as Partial<ChaosInput> | null;
  if (!r || typeof r !== 'object') throw new Error('record must be an object');
  if (typeof r.id !== 'string' || typeof r.key !== 'string' || typeof r.value !== 'number') throw new Error('record needs id, key and a numeric value');
  return { id: r.id, key: r.key, value: r.value, ...(r.poison ? { poison: r.poison } : {}), ...(typeof r.pad === 'string' ? { pad: r.pad } : {}) };
}

function failOnMapPoison(r: ChaosInput): ChaosInput {
  if (r.poison === 'map') throw new Error(`poison record ${r.id} rejected by the map`);
  return r;
}

const totals = valueState<Totals>('totals');

function runningSum(keepPad: boolean, timers: boolean, failingKey: string | undefined): KeyedProcessFunction<string, ChaosInput, ChaosOutput & { count: number }> {
  return {
    state: [totals],
    ...(timers
      ? {
          onTimer(_time, ctx) {
            // reads the key's row (a restored instance loads it): a timer fired for a key another
            // instance owns now would read a row written past this instance's epoch
            ctx.getState(totals).value();
          },
        }
      : {}),
    processElement(r, ctx, out) {
      // throw before the state is touched: a poison record must leave no trace
      if (r.poison === 'process') throw new Error(`poison record ${r.id} rejected by the keyed function`);
      if (timers) ctx.timerService.registerProcessingTimeTimer(ctx.timerService.currentProcessingTime() + 1);
      const prev = ctx.getState(totals).value() ?? { sum: 0, count: 0 };
      const next: Totals = { sum: prev.sum + r.value, count: prev.count + 1 };
      if (keepPad && (r.pad ?? prev.pad) !== undefined) next.pad = r.pad ?? prev.pad;
      ctx.getState(totals).update(next);
      out.collect({ id: r.id, key: r.key, sum: next.sum, count: next.count });
      if (r.key === failingKey) throw new Error(`the running sum of key ${r.key} always fails (record ${r.id})`);
    },
  };
}

/** Builds the chaos job. */
export function chaosJob(options: ChaosJobOptions = {}): Job {
  const variant = options.variant ?? 'two-stage';
  const inner = options.innerShards ?? 2;
  const j = job(options.name ?? (variant === 'two-stage' ? 'chaos2' : 'chaos3'), {
    maxParallelism: 16,
    poisonPolicy: 'dead-letter',
    checkpoint: {
      intervalMs: 300,
      timeoutMs: options.checkpointTimeoutMs ?? 2_000,
      retained: 3,
      ...(options.maxInFlightRecords !== undefined ? { maxInFlightRecords: options.maxInFlightRecords } : {}),
      ...(options.materializeEvery !== undefined ? { materializeEvery: options.materializeEvery } : {}),
    },
    ...(options.mode ? { mode: options.mode } : {}),
  });
  const parsed = j
    .source<ChaosInput>({ name: SOURCE_NAME, shards: options.sourceShards ?? 2, format: 'json', parse: parseInput })
    .map(failOnMapPoison, { name: 'reject-map-poison' });
  const beforeKey =
    variant === 'two-stage'
      ? parsed
      : parsed
          .rebalance({ parallelism: inner })
          .map((r) => ({ ...r, key: r.key }), { name: 'pass-through' });
  const summed = beforeKey.keyBy((r) => r.key, { parallelism: inner }).process(runningSum(options.keepPadInState ?? false, options.timers ?? false, options.failingKey), { name: 'running-sum' });
  summed.sinkTo(
    dynamoUpsertSink<ChaosOutput & { count: number }>({
      name: TOTALS_SINK,
      key: (o) => o.key,
      item: (o) => ({ sum: o.sum, count: o.count }),
    }),
  );
  summed.map((o): ChaosOutput => ({ id: o.id, key: o.key, sum: o.sum }), { name: 'to-output' }).sinkTo(collectSink<ChaosOutput>(OUTPUTS_SINK));
  return j;
}
