/**
 * Chaos for any job: runs a user's job on the emulated AWS stack under a seeded fault schedule (the
 * fault kinds of the project's own chaos harness: crashes between every write of the checkpoint
 * protocol, zombies, partial PutRecords, throttling, redelivered batches, coordinator failures,
 * recycled environments), runs it again without faults, and compares every sink, key by key, and
 * the dead letters. Exactly-once means the two agree. When they do not, the job's functions are put
 * through the determinism check, which names the function that broke determinism if one did.
 *
 * Both runs share one set of emulators (each under its own resource prefix) and run at the same time.
 * Used by `sluice run <job> --chaos <seed>` and, through `sluice/testing`, by users' tests.
 */
import { DeleteTableCommand } from '@aws-sdk/client-dynamodb';
import { DeleteStreamCommand } from '@aws-sdk/client-kinesis';
import type { Job } from '../../shared/api/job.js';
import { planJob } from '../../shared/plan/planner.js';
import type { Plan, PlanSink } from '../../shared/plan/plan.js';
import { checkDeterminism, type NondeterministicFunction } from '../../shared/testing/determinism.js';
import { canonicalJson } from '../../shared/testing/function-probe.js';
import { startEmulators, type LocalEmulators } from '../emulators.js';
import { readNumberedLines } from '../input-lines.js';
import { readRunOutput, type RunOutput } from '../run-output.js';
import { LocalJobRunner } from '../runner.js';
import { chaosHooks } from './faults.js';
import { FaultSchedule, INPUT_FAULT_KINDS, type FaultKind } from './schedule.js';

/** Invocation timeout of the simulated Lambda under chaos: a zombie stalls past it. */
export const CHAOS_CHECK_INVOCATION_TIMEOUT_MS = 10_000;
/** The stage functions' SDK request timeout under chaos: below the invocation timeout, above a busy emulator's slowest answers. */
export const CHAOS_CHECK_REQUEST_TIMEOUT_MS = 8_000;

export interface ChaosCheckOptions {
  /** the fault schedule's seed: a seed always asks for the same kinds of trouble */
  readonly seed: number;
  /** input as JSON-lines files per source (dead letters then name their file and line) */
  readonly files?: ReadonlyArray<{ readonly source: string; readonly file: string }>;
  /** input as records per source (values, or raw bytes as a producer would send them) */
  readonly records?: Readonly<Record<string, readonly unknown[]>>;
  /** running emulators to share; started (and stopped) here when omitted */
  readonly emulators?: LocalEmulators;
  /** a fault profile (mixed, zombie-takeover, putrecords-barrier, atomic-flush, coordinator); @default by seed */
  readonly profile?: string;
  /** simulated execution environments per stage; @default 3 */
  readonly environments?: number;
  /** time between checkpoints; @default 500 ms */
  readonly checkpointIntervalMs?: number;
  /** bound of the fault phase after the input is in; @default 20 s */
  readonly faultPhaseMs?: number;
  /** how long each run may take to finish once its input ended; @default 300 s */
  readonly timeoutMs?: number;
  /** progress lines (long steps) */
  readonly progress?: (line: string) => void;
}

/** One key of one sink whose records differ between the faulted and the fault-free run. */
export interface SinkDifference {
  /** a sink name, or `dead letters` */
  readonly sink: string;
  /** an upsert sink's row key; for other sinks, the record itself */
  readonly key: string;
  readonly faulted: unknown[];
  readonly faultFree: unknown[];
}

export interface ChaosReport {
  readonly seed: number;
  readonly profile: string;
  readonly faults: ReadonlyMap<FaultKind, number>;
  readonly totalFaults: number;
  /** the faulted run's results (what `sluice run --out` writes) */
  readonly faulted: RunOutput;
  readonly faultFree: RunOutput;
  readonly differences: SinkDifference[];
  /** outputs the faulted run re-emitted under an id it had used, with other content (replay) */
  readonly replayConflicts: number;
  /** when the runs differ: what the determinism check found (functions named with their operators) */
  readonly determinism?: { deterministic: boolean; differences: string[]; functions: NondeterministicFunction[] };
  /** no difference, no replay conflict */
  readonly ok: boolean;
  /** `chaos: seed=S profile=P faults=F kinds=K sinks=N records=R differences=D` */
  readonly line: string;
}

let runs = 0;

/** Runs `job` under the seed's faults and without, and compares what they produced. */
export async function chaosCheck(job: Job, options: ChaosCheckOptions): Promise<ChaosReport> {
  const plan = planJob(job);
  const fixed = plan.sources.filter((s) => s.streamName !== undefined);
  if (fixed.length) {
    throw new Error(`chaos: source ${fixed.map((s) => `"${s.name}"`).join(', ')} reads a fixed stream (streamName); the faulted and the fault-free run need one stream each: leave streamName out to check the job`);
  }
  if (!options.files?.length && !options.records) throw new Error('chaos: give the input as files or records');
  const t0 = Date.now();
  const progress = (line: string) => options.progress?.(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${line}`);
  const own = !options.emulators;
  if (own) progress('starting the emulated AWS stack…');
  const emulators = options.emulators ?? (await startEmulators());
  try {
    // a slow ack outlasts the checkpoint timeout; under a long timeout it would outlast the invocation too
    // the input kinds change the chaos job's own input and function: a user's job takes the others
    const exclude: FaultKind[] = [...INPUT_FAULT_KINDS, ...(plan.checkpoint.timeoutMs + 1_000 >= CHAOS_CHECK_INVOCATION_TIMEOUT_MS ? (['slow-ack'] as const) : [])];
    const schedule = new FaultSchedule({ seed: options.seed, exclude, ...(options.profile ? { profile: options.profile } : {}) });
    const tag = `${process.pid % 100_000}-${++runs}`;
    progress(`seed ${options.seed}: profile ${schedule.profile}; the faulted and the fault-free run start`);
    const [faulted, faultFree] = await Promise.all([
      runOnce(job, plan, emulators, `chaos-f${options.seed}-${tag}`, { ...options, progress }, schedule),
      runOnce(job, plan, emulators, `chaos-r${options.seed}-${tag}`, { ...options, progress }, undefined),
    ]);
    const differences = compareRuns(plan, faulted.output, faultFree.output);
    let determinism: ChaosReport['determinism'];
    if (differences.length || faulted.conflicts) {
      progress('the runs differ: checking the job\'s functions for determinism…');
      determinism = await checkDeterminism(job, inputRecords(options));
    }
    const faults = new Map([...schedule.counts].filter(([, n]) => n > 0));
    const records = Object.values(faulted.output.sinks).reduce((a, r) => a + r.length, 0);
    const line = `chaos: seed=${options.seed} profile=${schedule.profile} faults=${schedule.total} kinds=${faults.size} sinks=${plan.sinks.length} records=${records} differences=${differences.length}`;
    return {
      seed: options.seed,
      profile: schedule.profile,
      faults,
      totalFaults: schedule.total,
      faulted: faulted.output,
      faultFree: faultFree.output,
      differences,
      replayConflicts: faulted.conflicts,
      ...(determinism ? { determinism } : {}),
      ok: differences.length === 0 && faulted.conflicts === 0,
      line,
    };
  } finally {
    if (own) await emulators.stop();
  }
}

/** One run of the job to its end, with the schedule's faults on during its first phase (or none). */
async function runOnce(job: Job, plan: Plan, emulators: LocalEmulators, prefix: string, o: ChaosCheckOptions, schedule: FaultSchedule | undefined): Promise<{ output: RunOutput; conflicts: number }> {
  const what = schedule ? 'faulted run' : 'fault-free run';
  const hooks = schedule ? chaosHooks(schedule, { invocationTimeoutMs: CHAOS_CHECK_INVOCATION_TIMEOUT_MS, checkpointTimeoutMs: plan.checkpoint.timeoutMs }) : undefined;
  const runner = await LocalJobRunner.start(job, {
    emulators,
    prefix,
    seed: o.seed,
    environments: o.environments ?? 3,
    checkpointIntervalMs: o.checkpointIntervalMs ?? 500,
    requestTimeoutMs: CHAOS_CHECK_REQUEST_TIMEOUT_MS,
    ...hooks?.options,
  });
  try {
    hooks?.attach(runner);
    o.progress?.(`${what}: deployed; producing the input`);
    if (o.files?.length) await runner.produceFiles(o.files);
    for (const [source, records] of Object.entries(o.records ?? {})) await runner.produce(source, records);
    if (schedule) {
      // faults stay on while the input flows: until a checkpoint that started after it has ended, one
      // has committed, and every kind of the schedule has fired — within a bound
      const fed = Date.now();
      const until = fed + (o.faultPhaseMs ?? 20_000);
      let narrowed = false;
      for (;;) {
        await new Promise((r) => setTimeout(r, 250));
        // half-way, only the kinds still missing fire (some need a commit that the others keep aborting)
        if (!narrowed && Date.now() > fed + (until - fed) / 2 && schedule.missing().length) {
          narrowed = true;
          schedule.narrowTo(schedule.missing());
        }
        const list = await runner.coordinator.list();
        const ended = list.some((c) => c.status !== 'IN_FLIGHT' && Date.parse(c.startedAt) > fed);
        const committed = list.some((c) => c.status === 'COMPLETED');
        if ((ended && committed && schedule.missing().length === 0) || Date.now() > until) break;
      }
      schedule.enabled = false;
      const recycled = runner.telemetry.get('EnvironmentsRecycled');
      if (recycled) schedule.count('env-recycled', recycled);
      o.progress?.(`faults off after ${schedule.total} (${schedule.describe()}); the faulted run goes on to its end`);
    }
    await runner.endAllInput();
    await runner.awaitFinished(o.timeoutMs ?? 300_000);
    o.progress?.(`${what} finished`);
    return { output: await readRunOutput(runner, true), conflicts: runner.collected.conflicts };
  } finally {
    await runner.stop();
    await hooks?.dispose();
    await deleteJobStreams(runner);
  }
}

/** Deletes a stopped run's streams (runs share one emulator; its shards are counted against one account). */
export async function deleteJobStreams(r: LocalJobRunner): Promise<void> {
  await Promise.all(
    r.plan.stages.map((stage) =>
      r.clients.kinesis.send(new DeleteStreamCommand({ StreamName: r.names.streamOf(stage), EnforceConsumerDeletion: true })).catch(() => undefined),
    ),
  );
}

/**
 * Deletes a stopped run's DynamoDB tables (state, control, upsert sinks) once it has been judged:
 * dynalite keeps every table in this process's heap, so hundreds of seeds on one emulator would
 * otherwise make each garbage collection (and so each later seed) slower.
 */
export async function deleteJobTables(r: LocalJobRunner): Promise<void> {
  const tables = [r.names.stateTable, r.names.controlTable, ...r.plan.sinks.filter((s) => s.kind === 'dynamodb-upsert').map((s) => r.names.sinkTable(s))];
  await Promise.all(tables.map((t) => r.clients.dynamodb.send(new DeleteTableCommand({ TableName: t })).catch(() => undefined)));
}

/** The input as records per source, for the determinism check (file lines as the bytes a producer sends). */
function inputRecords(o: ChaosCheckOptions): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {};
  const enc = new TextEncoder();
  for (const { source, file } of o.files ?? []) (out[source] ??= []).push(...readNumberedLines(file).map((l) => enc.encode(l.text)));
  for (const [source, records] of Object.entries(o.records ?? {})) (out[source] ??= []).push(...records);
  return out;
}

/**
 * Every sink compared key by key: an upsert sink by its row key; any other sink as a multiset of
 * records (order is not compared: records of one key from two upstream shards may interleave
 * differently in two runs). Dead letters are compared by record and reason.
 */
export function compareRuns(plan: Plan, faulted: RunOutput, faultFree: RunOutput): SinkDifference[] {
  const diffs: SinkDifference[] = [];
  for (const sink of plan.sinks) diffs.push(...compareSink(sink.name, keyOf(sink), faulted.sinks[sink.name] ?? [], faultFree.sinks[sink.name] ?? []));
  const letter = (l: RunOutput['deadLetters'][number]) => ({ ...(l.file !== undefined ? { at: `${l.file}:${l.line}` } : {}), reason: l.reason, data: l.data });
  diffs.push(...compareSink('dead letters', (l) => canonicalJson(l), faulted.deadLetters.map(letter), faultFree.deadLetters.map(letter)));
  return diffs;
}

function keyOf(sink: PlanSink): (record: unknown) => string {
  if (sink.kind !== 'dynamodb-upsert') return (r) => canonicalJson(r);
  const attribute = sink.keyAttribute ?? 'pk';
  return (r) => String((r as Record<string, unknown>)[attribute]);
}

function compareSink(sink: string, key: (r: unknown) => string, a: readonly unknown[], b: readonly unknown[]): SinkDifference[] {
  const group = (rs: readonly unknown[]) => {
    const m = new Map<string, unknown[]>();
    for (const r of rs) {
      const k = key(r);
      const list = m.get(k);
      if (list) list.push(r);
      else m.set(k, [r]);
    }
    return m;
  };
  const ga = group(a);
  const gb = group(b);
  const out: SinkDifference[] = [];
  for (const k of new Set([...ga.keys(), ...gb.keys()])) {
    const ra = ga.get(k) ?? [];
    const rb = gb.get(k) ?? [];
    const canon = (rs: unknown[]) => rs.map((r) => canonicalJson(r)).sort().join('\n');
    if (canon(ra) !== canon(rb)) out.push({ sink, key: k, faulted: ra, faultFree: rb });
  }
  return out;
}

/** The report as lines: the faults by kind, each difference (up to `limit`), the culprits, the summary line last. */
export function formatChaosReport(r: ChaosReport, limit = 20): string[] {
  const lines: string[] = [];
  lines.push(`faults by kind: ${[...r.faults].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}=${n}`).join(' ') || 'none'}`);
  lines.push(
    `faulted run: checkpoints completed=${r.faulted.checkpoints.completed} aborted=${r.faulted.checkpoints.aborted}; fault-free run: completed=${r.faultFree.checkpoints.completed} aborted=${r.faultFree.checkpoints.aborted}`,
  );
  const text = (rs: unknown[]) => (rs.length ? rs.map((x) => canonicalJson(x)).join(', ') : '(nothing)');
  const cut = (s: string) => (s.length > 300 ? `${s.slice(0, 297)}…` : s);
  if (!r.differences.length) lines.push(`no difference: every sink (${Object.keys(r.faulted.sinks).join(', ')}) and the dead letters hold the same under faults as without`);
  const bySink = new Map<string, SinkDifference[]>();
  for (const d of r.differences) bySink.set(d.sink, [...(bySink.get(d.sink) ?? []), d]);
  for (const [sink, ds] of bySink) {
    lines.push(`${sink}: ${ds.length} key(s) differ`);
    for (const d of ds.slice(0, limit)) lines.push(cut(`  key ${d.key}: under faults ${text(d.faulted)}; without ${text(d.faultFree)}`));
    if (ds.length > limit) lines.push(`  … and ${ds.length - limit} more`);
  }
  if (r.replayConflicts) lines.push(`the faulted run re-emitted ${r.replayConflicts} output(s) under an id it had used, with other content: a replay did not reproduce them`);
  if (r.determinism) {
    const fns = r.determinism.functions;
    if (fns.length) for (const f of fns) lines.push(cut(`not deterministic: ${f.operator}, its ${f.function}: ${f.example}`));
    else if (!r.determinism.deterministic) lines.push(`the determinism check failed without naming a function: ${r.determinism.differences.join('; ')}`);
    else lines.push('the determinism check found every function deterministic: the difference is not explained by the job\'s functions (an engine fault, or input whose order the job depends on)');
  }
  lines.push(r.line);
  return lines;
}
