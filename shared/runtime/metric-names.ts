/**
 * Which metric names the functions publish (EMF, namespace `Sluice`, dimensions job and stage). Each
 * name is a custom metric per stage, billed $0.30 a month prorated by the hours it has data: a
 * name counted only when something goes wrong (DeadLetters, CacheMiss, TimerFailures, …) costs
 * next to nothing, a name counted at every batch or checkpoint costs the whole $0.30.
 *
 * By default the steady names are only those the alarms, the dashboard and an operator need
 * (`STEADY_METRICS`). The other steady ones are published only with SluiceJob `detailedMetrics`
 * (`DETAILED_METRICS`); without it their figures are still seen elsewhere: the checkpoint records
 * `sluice status` prints (bytes and keys a checkpoint flushed, its duration), the stage functions'
 * own Invocations beside CacheMiss (the batches on a valid cache), the sinks themselves.
 */

/** Published in steady state by default (the cost model counts these): per stage, and by the coordinator. */
export const STEADY_METRICS = {
  stage: ['RecordsIn', 'RecordsOut'],
  coordinator: [],
} as const;

/**
 * Steady names published only while something reads them: an alarm or the dashboard the construct
 * made (`watchedMetrics`), or `detailedMetrics`. Completed checkpoints are otherwise in the
 * checkpoint records (`sluice status`).
 */
export const WATCHED_METRICS = {
  coordinator: ['CheckpointCompleted'],
} as const;

/** The WATCHED_METRICS the construct's alarms or dashboard read, comma-separated. */
export const WATCHED_METRICS_ENV = 'SLUICE_WATCHED_METRICS';

/**
 * Which WATCHED_METRICS a deployment reads: the "no checkpoint completed" alarm, made only when the
 * coordinator never idles (an idle one completes none on purpose), and the dashboard.
 */
export function watchedMetrics(o: { readonly idleCoordinator: boolean; readonly dashboard: boolean }): string[] {
  return !o.idleCoordinator || o.dashboard ? [...WATCHED_METRICS.coordinator] : [];
}

/** Steady names published only with `detailedMetrics`, per stage and by the coordinator. */
export const DETAILED_METRICS = {
  stage: ['CacheHit', 'CheckpointKeys', 'CheckpointBytes', 'CheckpointDurationMs'],
  coordinator: ['SinkValuesPublished'],
} as const;

/** '1' when the construct turned on `detailedMetrics`; anything else publishes the default set. */
export const DETAILED_METRICS_ENV = 'SLUICE_DETAILED_METRICS';

const DETAILED: ReadonlySet<string> = new Set([...DETAILED_METRICS.stage, ...DETAILED_METRICS.coordinator]);
const WATCHED: ReadonlySet<string> = new Set(WATCHED_METRICS.coordinator);

/**
 * Whether a function publishes `name`: every name but the detailed ones, which only with
 * `detailed`, and the watched ones, which only when `watched` (or `detailed`) has them.
 */
export function publishesMetric(name: string, detailed: boolean, watched: ReadonlySet<string> = new Set()): boolean {
  if (detailed) return true;
  if (WATCHED.has(name)) return watched.has(name);
  return !DETAILED.has(name);
}
