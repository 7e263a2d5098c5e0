// A job with a function that is not deterministic: its map stamps each reading with Math.random().
// A replay after a fault re-emits other values than the first attempt did, so `sluice run --chaos`
// must find a difference from the fault-free run and name the map. Used by cli/run-chaos.test.ts.
import { dynamoUpsertSink, job } from 'sluice';

interface Reading {
  readonly sensor: string;
  readonly value: number;
}

const noisy = job('noisy', { maxParallelism: 8, poisonPolicy: 'dead-letter', checkpoint: { intervalMs: 500, timeoutMs: 5_000 } });

noisy
  .source<Reading>({ name: 'readings', shards: 1, format: 'json' })
  .map((r) => ({ ...r, jitter: Math.random() }), { name: 'add-noise' })
  .keyBy((r) => r.sensor, { parallelism: 1 })
  .reduce((a, b) => ({ sensor: a.sensor, value: a.value + b.value, jitter: a.jitter + b.jitter }), { name: 'sum' })
  .sinkTo(dynamoUpsertSink({ name: 'sums', key: (r) => r.sensor }));

export default noisy;
